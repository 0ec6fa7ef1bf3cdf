//! [`BasicBlock`]: ResNet-18's and ResNet-34's residual block, torchvision's `BasicBlock`: two
//! 3x3 convolutions, each with a batch norm, added to the shortcut (Keras has no such
//! ResNet: in its layout, the same block with biases and Keras's batch norms).

use burn::module::Module;
use burn::tensor::activation::relu;
use burn::tensor::{Device, Tensor};
use towers_kernels::nn::BatchNorm;
use towers_kernels::nn::conv::Conv2d;

use crate::nets::resnet::downsample::{Downsample, DownsampleConfig, shortcut};
use crate::nets::resnet::layout::ResNetLayout;
use crate::nets::resnet::residual_block::ResidualBlock;

/// `relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))`.
#[derive(Module, Debug)]
pub struct BasicBlock {
    /// 3x3 at the block's stride.
    pub conv1: Conv2d,
    /// After `conv1`.
    pub bn1: BatchNorm,
    /// 3x3 at stride 1.
    pub conv2: Conv2d,
    /// After `conv2`.
    pub bn2: BatchNorm,
    /// Where the block changes size or channels; else the input itself.
    pub downsample: Option<Downsample>,
}

impl ResidualBlock for BasicBlock {
    const EXPANSION: usize = 1;

    fn new(in_channels: usize, planes: usize, stride: usize, device: &Device) -> Self {
        Self::new_in_layout(
            in_channels,
            planes,
            stride,
            ResNetLayout::Torchvision,
            device,
        )
    }

    fn new_in_layout(
        in_channels: usize,
        planes: usize,
        stride: usize,
        layout: ResNetLayout,
        device: &Device,
    ) -> Self {
        let downsample = (stride != 1 || in_channels != planes).then(|| {
            DownsampleConfig::new([in_channels, planes], stride)
                .with_layout(layout)
                .init(device)
        });
        Self {
            conv1: layout.conv([in_channels, planes], 3, stride, device),
            bn1: layout.batch_norm(planes, device),
            conv2: layout.conv([planes, planes], 3, 1, device),
            bn2: layout.batch_norm(planes, device),
            downsample,
        }
    }

    fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        let shortcut = shortcut(&self.downsample, &x);
        let y = self.bn1.forward_relu(self.conv1.forward(x));
        let y = self.bn2.forward(self.conv2.forward(y));
        relu(y + shortcut)
    }
}
