//! [`MobileNetLayout`]: whose MobileNetV2 the layers follow, torchvision's or
//! keras.applications', and the convolutions, batch norms and head each builds.

use burn::config::Config;
use burn::nn::{Initializer, PaddingConfig2d};
use burn::tensor::Device;
use towers_kernels::nn::conv::{Conv2d, Conv2dConfig};
use towers_kernels::nn::{BatchNorm, BatchNormConfig, Linear, LinearConfig};

use crate::layers::{glorot_uniform, zeros};
use crate::nets::ResNetLayout;

/// Whose MobileNetV2: the two compute the same network but for the padding of a strided
/// convolution, the batch norms' constants and the dropout before the logits, so each loads
/// only its own weights.
#[derive(Config, Debug, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MobileNetLayout {
    /// torchvision's `mobilenet_v2` (`torchvision/models/mobilenetv2.py`): every 3x3 padded by
    /// 1 on each side, batch norms of epsilon 1e-5 and momentum 0.1, dropout 0.2 before the
    /// logits; convolutions by Kaiming's normal on the fan-out, the logits' weights by a normal
    /// of deviation 0.01.
    Torchvision,
    /// keras.applications' `MobileNetV2` (`keras/src/applications/mobilenet_v2.py`): TF's
    /// `same` padding (a strided 3x3 on an even side pads one row and column, at the bottom and
    /// right), batch norms of epsilon 1e-3 and Keras's momentum 0.999 (0.001 as Burn counts
    /// it), no dropout; kernels by Glorot's uniform on Keras's fans, biases at zero.
    Keras,
}

impl From<ResNetLayout> for MobileNetLayout {
    /// The same library's layout (a command line's `--layout` names either).
    fn from(layout: ResNetLayout) -> Self {
        match layout {
            ResNetLayout::Keras => Self::Keras,
            _ => Self::Torchvision,
        }
    }
}

impl MobileNetLayout {
    /// A square `kernel` convolution without a bias from `channels[0]` to `channels[1]` at
    /// `stride`, over `groups` groups (1, or the input's channels: a depthwise convolution),
    /// padded and initialized as this layout's library does.
    pub(crate) fn conv(
        self,
        channels: [usize; 2],
        kernel: usize,
        stride: usize,
        groups: usize,
        device: &Device,
    ) -> Conv2d {
        Conv2dConfig::new(channels, [kernel; 2])
            .with_stride([stride; 2])
            .with_groups(groups)
            .with_padding(self.padding(kernel))
            .with_bias(false)
            .with_initializer(self.conv_initializer(channels, kernel, groups))
            .init(device)
    }

    /// The padding of a square `kernel` at any stride: torchvision's `(k - 1) / 2` on every
    /// side, or TF's `same` (at stride 2 on an even side, one more after than before). The
    /// EfficientNets' too.
    pub(crate) fn padding(self, kernel: usize) -> PaddingConfig2d {
        match self {
            Self::Torchvision => {
                let pad = (kernel - 1) / 2;
                PaddingConfig2d::Explicit(pad, pad, pad, pad)
            }
            Self::Keras => PaddingConfig2d::Same,
        }
    }

    /// The kernels' initializer. Both libraries count a depthwise kernel's fans otherwise than
    /// Burn does (over the groups), so they are counted here: torchvision's
    /// `kaiming_normal_(mode="fan_out")` takes `out · k²` for any groups; Keras's
    /// `glorot_uniform` takes a `Conv2D`'s `in · k²` and `out · k²`, and a
    /// `DepthwiseConv2D`'s `in · k²` and `k²` (its kernel is `[k, k, in, 1]`).
    fn conv_initializer(
        self,
        [c_in, c_out]: [usize; 2],
        kernel: usize,
        groups: usize,
    ) -> Initializer {
        let area = (kernel * kernel) as f64;
        match self {
            Self::Torchvision => Initializer::Normal {
                mean: 0.0,
                std: (2.0 / (c_out as f64 * area)).sqrt(),
            },
            Self::Keras if groups == 1 => glorot_uniform(),
            Self::Keras => {
                let limit = (6.0 / (c_in as f64 * area + (c_out / c_in) as f64 * area)).sqrt();
                Initializer::Uniform {
                    min: -limit,
                    max: limit,
                }
            }
        }
    }

    /// A batch norm of `channels` with this layout's constants.
    pub(crate) fn batch_norm(self, channels: usize, device: &Device) -> BatchNorm {
        let config = BatchNormConfig::new(channels);
        match self {
            Self::Torchvision => config,
            Self::Keras => config.with_epsilon(1e-3).with_momentum(0.001),
        }
        .init(device)
    }

    /// The dense layer to the logits: torchvision's `nn.init.normal_(weight, 0, 0.01)` and
    /// zero bias, or Keras's `Dense` (Glorot's uniform, zero bias).
    pub(crate) fn classifier(self, features: usize, classes: usize, device: &Device) -> Linear {
        let initializer = match self {
            Self::Torchvision => Initializer::Normal {
                mean: 0.0,
                std: 0.01,
            },
            Self::Keras => glorot_uniform(),
        };
        let mut dense = LinearConfig::new(features, classes)
            .with_initializer(initializer)
            .init(device);
        dense.bias = Some(zeros(classes, device));
        dense
    }

    /// The dropout before the logits: torchvision's 0.2, none in Keras's.
    pub(crate) fn dropout(self) -> f64 {
        match self {
            Self::Torchvision => 0.2,
            Self::Keras => 0.0,
        }
    }
}
