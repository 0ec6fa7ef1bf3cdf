//! [`ResidualBlock`]: what [`ResNet`](crate::nets::resnet::ResNet) needs of its blocks.

use burn::module::Module;
use burn::tensor::{Device, Tensor};

use crate::nets::resnet::layout::ResNetLayout;

/// A residual block: [`BasicBlock`](crate::nets::resnet::basic_block::BasicBlock) (ResNet-18,
/// -34) or [`Bottleneck`](crate::nets::resnet::bottleneck::Bottleneck) (ResNet-50, -101, -152).
pub trait ResidualBlock: Module + burn::module::ModuleDisplay + Sync {
    /// Its output channels per `planes`.
    const EXPANSION: usize;

    /// A block from `in_channels` to `planes * EXPANSION` channels, its first convolution (or
    /// 3x3, in a bottleneck) at `stride`, with a downsampling shortcut where the size or the
    /// channels change; initialized as torchvision initializes it.
    fn new(in_channels: usize, planes: usize, stride: usize, device: &Device) -> Self;

    /// The same block in `layout` (where the stride goes, biases, batch-norm constants:
    /// [`ResNetLayout`]). A block of one layout only builds [`new`](Self::new)'s.
    fn new_in_layout(
        in_channels: usize,
        planes: usize,
        stride: usize,
        _layout: ResNetLayout,
        device: &Device,
    ) -> Self {
        Self::new(in_channels, planes, stride, device)
    }

    /// `[n, in, h, w]` to `[n, planes * EXPANSION, h / stride, w / stride]`.
    fn forward(&self, x: Tensor<4>) -> Tensor<4>;
}
