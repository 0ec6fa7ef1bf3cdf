//! [`Downsample`]: a residual block's shortcut where the block changes its map's size or
//! channels, torchvision's `downsample` (a 1x1 convolution at the block's stride, then a batch
//! norm; Keras's `_0_conv` and `_0_bn`).

use burn::config::Config;
use burn::module::Module;
use burn::tensor::{Device, Tensor};
use towers_kernels::nn::BatchNorm;
use towers_kernels::nn::conv::Conv2d;

use crate::nets::resnet::layout::ResNetLayout;

/// [`Downsample`]'s shape: `channels` `[in, out]` and the stride.
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct DownsampleConfig {
    /// `[in, out]` channels.
    pub channels: [usize; 2],
    /// The stride of the 1x1 convolution.
    pub stride: usize,
    /// Whose shortcut: torchvision's or Keras's (with a bias, Keras's batch norm).
    #[config(default = "ResNetLayout::Torchvision")]
    pub layout: ResNetLayout,
}

impl DownsampleConfig {
    /// A new [`Downsample`], initialized as its layout's library initializes it.
    pub fn init(&self, device: &Device) -> Downsample {
        Downsample {
            conv: self.layout.conv(self.channels, 1, self.stride, device),
            bn: self.layout.batch_norm(self.channels[1], device),
        }
    }
}

/// The shortcut `bn(conv(x))` (torchvision's `downsample.0`, `downsample.1`).
#[derive(Module, Debug)]
pub struct Downsample {
    /// The 1x1 convolution.
    pub conv: Conv2d,
    /// Its batch norm.
    pub bn: BatchNorm,
}

impl Downsample {
    /// `[n, in, h, w]` to `[n, out, h / stride, w / stride]`.
    pub fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        self.bn.forward(self.conv.forward(x))
    }
}

/// A block's shortcut of `x`: through `downsample` where the block has one, else `x` itself.
pub(crate) fn shortcut(downsample: &Option<Downsample>, x: &Tensor<4>) -> Tensor<4> {
    match downsample {
        Some(downsample) => downsample.forward(x.clone()),
        None => x.clone(),
    }
}
