//! [`ResNetLayout`]: whose ResNet the layers follow, torchvision's or keras.applications', and
//! the convolutions and batch norms each builds.

use burn::config::Config;
use burn::nn::{Initializer, PaddingConfig2d};
use burn::tensor::Device;
use towers_kernels::nn::conv::{Conv2d, Conv2dConfig};
use towers_kernels::nn::{BatchNorm, BatchNormConfig, Linear, LinearConfig};

use crate::layers::{glorot_uniform, zeros};

/// Whose ResNet: the two differ in a bottleneck's stride, in the convolutions' biases and in
/// the batch norms' constants, so each loads only its own weights.
#[derive(Config, Debug, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResNetLayout {
    /// torchvision's `resnet50` (v1.5): a bottleneck's stride on its 3x3, convolutions without
    /// biases initialized by Kaiming's normal on the fan-out, batch norms of epsilon 1e-5 and
    /// momentum 0.1.
    Torchvision,
    /// keras.applications' `ResNet50` (v1, `keras/src/applications/resnet.py`): a
    /// bottleneck's stride on its first 1x1, every convolution with a bias, kernels by
    /// Glorot's uniform and biases at zero, batch norms of epsilon 1.001e-5 and Keras's
    /// momentum 0.99 (0.01 as Burn counts it: the weight of the batch).
    Keras,
}

impl std::str::FromStr for ResNetLayout {
    type Err = String;

    /// `torchvision` or `keras`, as a command line names them.
    fn from_str(name: &str) -> Result<Self, String> {
        match name {
            "torchvision" => Ok(Self::Torchvision),
            "keras" => Ok(Self::Keras),
            other => Err(format!(
                "`{other}` is no ResNet layout: `torchvision` or `keras`"
            )),
        }
    }
}

impl ResNetLayout {
    /// A square `kernel` convolution at `stride`, padded by `kernel / 2` on every side
    /// (torchvision's padding, and Keras's: its `ZeroPadding2D` before the stem, `same` on the
    /// 3x3s at stride 1), initialized as this layout's library initializes it.
    pub(crate) fn conv(
        self,
        channels: [usize; 2],
        kernel: usize,
        stride: usize,
        device: &Device,
    ) -> Conv2d {
        let config = square_conv(channels, kernel, stride);
        match self {
            // `kaiming_normal_(mode="fan_out", nonlinearity="relu")`: a standard deviation of
            // `sqrt(2 / fan_out)`.
            Self::Torchvision => config
                .with_bias(false)
                .with_initializer(Initializer::KaimingNormal {
                    gain: 2.0f64.sqrt(),
                    fan_out_only: true,
                })
                .init(device),
            Self::Keras => keras_conv(config, true, device),
        }
    }

    /// A batch norm of `channels` with this layout's constants.
    pub(crate) fn batch_norm(self, channels: usize, device: &Device) -> BatchNorm {
        let config = BatchNormConfig::new(channels);
        match self {
            Self::Torchvision => config,
            Self::Keras => config.with_epsilon(1.001e-5).with_momentum(0.01),
        }
        .init(device)
    }

    /// The dense layer to the logits, as torchvision's `nn.Linear` (Burn's default) or Keras's
    /// `Dense` (Glorot's uniform, biases at zero) initializes it.
    pub(crate) fn classifier(self, features: usize, classes: usize, device: &Device) -> Linear {
        let config = LinearConfig::new(features, classes);
        match self {
            Self::Torchvision => config.init(device),
            Self::Keras => {
                let mut dense = config.with_initializer(glorot_uniform()).init(device);
                dense.bias = Some(zeros(classes, device));
                dense
            }
        }
    }
}

/// A square `kernel` convolution at `stride`, padded by `kernel / 2` on every side (Keras's
/// `ZeroPadding2D` before a `valid` convolution, or `same` at stride 1).
fn square_conv(channels: [usize; 2], kernel: usize, stride: usize) -> Conv2dConfig {
    let pad = kernel / 2;
    Conv2dConfig::new(channels, [kernel; 2])
        .with_stride([stride; 2])
        .with_padding(PaddingConfig2d::Explicit(pad, pad, pad, pad))
}

/// Keras's `Conv2D` of `config`'s shape, with or without a `bias`, initialized as Keras does
/// (Glorot's uniform, the bias at zero).
pub(crate) fn keras_conv(config: Conv2dConfig, bias: bool, device: &Device) -> Conv2d {
    let out = config.channels[1];
    let mut conv = (config.with_bias(bias))
        .with_initializer(glorot_uniform())
        .init(device);
    if bias {
        conv.bias = Some(zeros(out, device));
    }
    conv
}

/// [`ResNetLayout::conv`] as keras.applications' ResNet v2 builds it, with or without a `bias`
/// (its blocks' first two convolutions have none).
pub(crate) fn keras_v2_conv(
    channels: [usize; 2],
    kernel: usize,
    stride: usize,
    bias: bool,
    device: &Device,
) -> Conv2d {
    keras_conv(square_conv(channels, kernel, stride), bias, device)
}
