//! [`Bottleneck`]: ResNet-50's residual block, torchvision's `Bottleneck` (v1.5: the stride on
//! the 3x3) or Keras's `residual_block_v1` (the stride on the first 1x1): a 1x1 convolution
//! narrowing to `planes`, a 3x3, a 1x1 widening to `4 planes`, each with a batch norm, added to
//! the shortcut.

use burn::module::Module;
use burn::tensor::activation::relu;
use burn::tensor::{Device, Tensor};
use towers_kernels::nn::BatchNorm;
use towers_kernels::nn::conv::Conv2d;

use crate::nets::resnet::downsample::{Downsample, DownsampleConfig, shortcut};
use crate::nets::resnet::layout::ResNetLayout;
use crate::nets::resnet::residual_block::ResidualBlock;

/// `relu(bn3(conv3(relu(bn2(conv2(relu(bn1(conv1(x))))))) + shortcut(x))`.
#[derive(Module, Debug)]
pub struct Bottleneck {
    /// 1x1, `in` to `planes` (at the block's stride in Keras's layout).
    pub conv1: Conv2d,
    /// After `conv1`.
    pub bn1: BatchNorm,
    /// 3x3, `planes` to `planes` (at the block's stride in torchvision's layout).
    pub conv2: Conv2d,
    /// After `conv2`.
    pub bn2: BatchNorm,
    /// 1x1, `planes` to `4 planes`.
    pub conv3: Conv2d,
    /// After `conv3`.
    pub bn3: BatchNorm,
    /// Where the block changes size or channels; else the input itself.
    pub downsample: Option<Downsample>,
}

impl ResidualBlock for Bottleneck {
    const EXPANSION: usize = 4;

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
        let out = planes * Self::EXPANSION;
        let downsample = (stride != 1 || in_channels != out).then(|| {
            DownsampleConfig::new([in_channels, out], stride)
                .with_layout(layout)
                .init(device)
        });
        let (stride1, stride2) = match layout {
            ResNetLayout::Keras => (stride, 1),
            ResNetLayout::Torchvision => (1, stride),
        };
        Self {
            conv1: layout.conv([in_channels, planes], 1, stride1, device),
            bn1: layout.batch_norm(planes, device),
            conv2: layout.conv([planes, planes], 3, stride2, device),
            bn2: layout.batch_norm(planes, device),
            conv3: layout.conv([planes, out], 1, 1, device),
            bn3: layout.batch_norm(out, device),
            downsample,
        }
    }

    fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        let shortcut = shortcut(&self.downsample, &x);
        let y = self.bn1.forward_relu(self.conv1.forward(x));
        let y = self.bn2.forward_relu(self.conv2.forward(y));
        let y = self.bn3.forward(self.conv3.forward(y));
        relu(y + shortcut)
    }
}
