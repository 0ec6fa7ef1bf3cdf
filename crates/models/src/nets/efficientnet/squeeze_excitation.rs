//! [`SqueezeExcitation`] (Hu et al. 2018), EfficientNet's and MobileNetV3's channel gate: each
//! channel of the input scaled by a gate of the image's mean channels through a bottleneck.

use burn::config::Config;
use burn::module::Module;
use burn::tensor::activation::{relu, sigmoid};
use burn::tensor::{Device, Tensor};
use towers_kernels::nn::conv::Conv2d;
use towers_kernels::nn::pool::{AdaptiveAvgPool2d, AdaptiveAvgPool2dConfig};
use towers_kernels::{hard_sigmoid, silu};

use crate::nets::efficientnet::layout::EfficientNetLayout;

/// The activations of a [`SqueezeExcitation`]: inside its bottleneck, and of its gate.
#[derive(Config, Debug, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SqueezeGate {
    /// SiLU inside, a sigmoid gate: EfficientNet's.
    Sigmoid,
    /// ReLU inside, a hard sigmoid gate (`relu6(x + 3) / 6`): MobileNetV3's.
    HardSigmoid,
}

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
    /// A new [`SqueezeExcitation`] with EfficientNet's activations, initialized as its layout's
    /// library initializes it.
    pub fn init(&self, device: &Device) -> SqueezeExcitation {
        let conv = |channels| self.layout.conv(channels, 1, 1, 1, true, device);
        let reduce = conv([self.channels, self.squeezed]);
        SqueezeExcitation::of(
            reduce,
            conv([self.squeezed, self.channels]),
            SqueezeGate::Sigmoid,
        )
    }
}

/// `x · gate(expand(act(reduce(mean of x over its pixels))))`, per image and channel: `act`
/// and `gate` SiLU and sigmoid, or ReLU and hard sigmoid ([`SqueezeGate`]).
#[derive(Module, Debug)]
pub struct SqueezeExcitation {
    /// The mean of each channel over the pixels (`_se_squeeze`, `avgpool`).
    pub squeeze: AdaptiveAvgPool2d,
    /// 1x1 with a bias, to the bottleneck (Keras's `_se_reduce`, torchvision's `fc1`).
    pub reduce: Conv2d,
    /// 1x1 with a bias, back to the channels (`_se_expand`, `fc2`).
    pub expand: Conv2d,
    #[module(skip)]
    gate: SqueezeGate,
}

impl SqueezeExcitation {
    /// The gate of the 1x1 convolutions `reduce` and `expand` (with biases) and `gate`'s
    /// activations.
    pub(crate) fn of(reduce: Conv2d, expand: Conv2d, gate: SqueezeGate) -> Self {
        Self {
            squeeze: AdaptiveAvgPool2dConfig::new([1, 1]).init(),
            reduce,
            expand,
            gate,
        }
    }

    /// `[n, c, h, w]` gated, the same shape.
    pub fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        let squeezed = self.reduce.forward(self.squeeze.forward(x.clone()));
        let gate = match self.gate {
            SqueezeGate::Sigmoid => sigmoid(self.expand.forward(silu(squeezed))),
            SqueezeGate::HardSigmoid => hard_sigmoid(self.expand.forward(relu(squeezed))),
        };
        x * gate
    }
}
