//! [`SqueezeExcitation`] (Hu et al. 2018), EfficientNet's channel gate: each channel of the
//! input scaled by a sigmoid of the image's mean channels through a bottleneck.

use burn::config::Config;
use burn::module::Module;
use burn::tensor::activation::sigmoid;
use burn::tensor::{Device, Tensor};
use towers_kernels::nn::conv::Conv2d;
use towers_kernels::nn::pool::{AdaptiveAvgPool2d, AdaptiveAvgPool2dConfig};
use towers_kernels::silu;

use crate::nets::efficientnet::layout::EfficientNetLayout;

/// [`SqueezeExcitation`]'s shape.
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct SqueezeExcitationConfig {
    /// The channels gated.
    pub channels: usize,
    /// The bottleneck's channels (EfficientNet: a quarter of its block's input channels).
    pub squeezed: usize,
    /// Whose initializers.
    #[config(default = "EfficientNetLayout::Torchvision")]
    pub layout: EfficientNetLayout,
}

impl SqueezeExcitationConfig {
    /// A new [`SqueezeExcitation`], initialized as its layout's library initializes it.
    pub fn init(&self, device: &Device) -> SqueezeExcitation {
        let conv = |channels| self.layout.conv(channels, 1, 1, 1, true, device);
        SqueezeExcitation {
            squeeze: AdaptiveAvgPool2dConfig::new([1, 1]).init(),
            reduce: conv([self.channels, self.squeezed]),
            expand: conv([self.squeezed, self.channels]),
        }
    }
}

/// `x · sigmoid(expand(silu(reduce(mean of x over its pixels))))`, per image and channel.
#[derive(Module, Debug)]
pub struct SqueezeExcitation {
    /// The mean of each channel over the pixels (`_se_squeeze`, `avgpool`).
    pub squeeze: AdaptiveAvgPool2d,
    /// 1x1 with a bias, to the bottleneck (Keras's `_se_reduce`, torchvision's `fc1`).
    pub reduce: Conv2d,
    /// 1x1 with a bias, back to the channels (`_se_expand`, `fc2`).
    pub expand: Conv2d,
}

impl SqueezeExcitation {
    /// `[n, c, h, w]` gated, the same shape.
    pub fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        let squeezed = self.squeeze.forward(x.clone());
        let gate = sigmoid(self.expand.forward(silu(self.reduce.forward(squeezed))));
        x * gate
    }
}
