//! MobileNetV3's convolutions in either library's layout: those of MobileNetV2
//! ([`MobileNetLayout`]: padding, initializers) with MobileNetV3's batch norms, and its
//! squeeze-excitation gates.

use burn::tensor::Device;
use towers_kernels::nn::BatchNormConfig;
use towers_kernels::nn::conv::Conv2d;

use crate::layers::zeros;
use crate::nets::efficientnet::{SqueezeExcitation, SqueezeGate};
use crate::nets::{ConvBn, MobileNetLayout};

/// The batch norms' epsilon and momentum (as Burn counts it): torchvision's MobileNetV3 takes
/// 1e-3 and 0.01, Keras's 1e-3 and 0.999 (0.001 as Burn counts it).
fn batch_norm_constants(layout: MobileNetLayout) -> [f64; 2] {
    match layout {
        MobileNetLayout::Keras => [1e-3, 0.001],
        _ => [1e-3, 0.01],
    }
}

/// A square `kernel` convolution without a bias from `channels[0]` to `channels[1]` at
/// `stride` (one filter per channel where `depthwise`), and its batch norm.
pub(crate) fn conv_bn(
    layout: MobileNetLayout,
    channels: [usize; 2],
    kernel: usize,
    [stride, groups]: [usize; 2],
    device: &Device,
) -> ConvBn {
    let [epsilon, momentum] = batch_norm_constants(layout);
    let bn = BatchNormConfig::new(channels[1])
        .with_epsilon(epsilon)
        .with_momentum(momentum);
    ConvBn {
        conv: layout.conv(channels, kernel, stride, groups, device),
        bn: bn.init(device),
    }
}

/// A 1x1 convolution from `channels[0]` to `channels[1]` with a zero bias.
fn conv_1x1_with_bias(layout: MobileNetLayout, channels: [usize; 2], device: &Device) -> Conv2d {
    let mut conv = layout.conv(channels, 1, 1, 1, device);
    conv.bias = Some(zeros(channels[1], device));
    conv
}

/// MobileNetV3's gate of `channels` through `squeezed` (ReLU inside, a hard sigmoid gate).
pub(crate) fn squeeze_excitation(
    layout: MobileNetLayout,
    [channels, squeezed]: [usize; 2],
    device: &Device,
) -> SqueezeExcitation {
    let reduce = conv_1x1_with_bias(layout, [channels, squeezed], device);
    let expand = conv_1x1_with_bias(layout, [squeezed, channels], device);
    SqueezeExcitation::of(reduce, expand, SqueezeGate::HardSigmoid)
}
