//! [`BasicBlock`]: ResNet-18's and ResNet-34's residual block, torchvision's `BasicBlock`: two
//! 3x3 convolutions, each with a batch norm, added to the shortcut.

use burn::module::Module;
use burn::nn::PaddingConfig2d;
use burn::tensor::activation::relu;
use burn::tensor::{Device, Tensor};
use towers_kernels::nn::conv::{Conv2d, Conv2dConfig};
use towers_kernels::nn::{BatchNorm, BatchNormConfig};

use crate::nets::resnet::conv_initializer;
use crate::nets::resnet::downsample::{Downsample, DownsampleConfig};
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

/// A 3x3 convolution padded by 1, without bias, as torchvision's `conv3x3`.
fn conv3x3(channels: [usize; 2], stride: usize, device: &Device) -> Conv2d {
    Conv2dConfig::new(channels, [3, 3])
        .with_stride([stride; 2])
        .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
        .with_bias(false)
        .with_initializer(conv_initializer())
        .init(device)
}

impl ResidualBlock for BasicBlock {
    const EXPANSION: usize = 1;

    fn new(in_channels: usize, planes: usize, stride: usize, device: &Device) -> Self {
        let downsample = (stride != 1 || in_channels != planes)
            .then(|| DownsampleConfig::new([in_channels, planes], stride).init(device));
        Self {
            conv1: conv3x3([in_channels, planes], stride, device),
            bn1: BatchNormConfig::new(planes).init(device),
            conv2: conv3x3([planes, planes], 1, device),
            bn2: BatchNormConfig::new(planes).init(device),
            downsample,
        }
    }

    fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        let shortcut = match &self.downsample {
            Some(downsample) => downsample.forward(x.clone()),
            None => x.clone(),
        };
        let y = relu(self.bn1.forward(self.conv1.forward(x)));
        let y = self.bn2.forward(self.conv2.forward(y));
        relu(y + shortcut)
    }
}
