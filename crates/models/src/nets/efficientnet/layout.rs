//! [`EfficientNetLayout`]: whose EfficientNet the layers follow, torchvision's or
//! keras.applications', and the convolutions, batch norms and head each builds.

use burn::config::Config;
use burn::nn::Initializer;
use burn::tensor::Device;
use towers_kernels::nn::conv::{Conv2d, Conv2dConfig};
use towers_kernels::nn::{BatchNormConfig, Linear, LinearConfig};

use crate::layers::{truncated_normal, zeros};
use crate::nets::{ConvBn, MobileNetLayout, ResNetLayout};

/// Whose EfficientNet: the two compute the same network but for the padding of a strided
/// convolution, the batch norms' constants and the images they take, so each loads only its
/// own weights.
#[derive(Config, Debug, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EfficientNetLayout {
    /// torchvision's `efficientnet_b0` .. `b7` (`torchvision/models/efficientnet.py`): every
    /// convolution padded by `(k - 1) / 2` on each side; batch norms of epsilon 1e-5 and
    /// momentum 0.1 (B5-B7: 1e-3 and 0.01, see
    /// [`EfficientNetConfig::tf_batch_norms`](super::EfficientNetConfig)); images normalized
    /// outside the network; convolutions by Kaiming's normal on the fan-out, the logits'
    /// weights uniform within `1 / √classes`.
    Torchvision,
    /// keras.applications' `EfficientNetB0` .. `B7`
    /// (`keras/src/applications/efficientnet.py`): TF's `same` padding (a strided convolution
    /// on an even side pads one row and column more at the bottom and right), batch norms of
    /// epsilon 1e-3 and Keras's momentum 0.99 (0.01 as Burn counts it); raw pixels in
    /// `[0, 255]` in, normalized by the network's own first layers
    /// ([`InputNormalization`](super::InputNormalization)); kernels by a truncated normal of
    /// variance `2 / fan_out` (a depthwise kernel's fan-out is its area), the logits' weights
    /// uniform within `1 / √classes`.
    Keras,
}

impl From<EfficientNetLayout> for MobileNetLayout {
    /// The same library's layout: its padding is the same.
    fn from(layout: EfficientNetLayout) -> Self {
        match layout {
            EfficientNetLayout::Keras => Self::Keras,
            _ => Self::Torchvision,
        }
    }
}

impl From<ResNetLayout> for EfficientNetLayout {
    /// The same library's layout (a command line's `--layout` names either).
    fn from(layout: ResNetLayout) -> Self {
        match layout {
            ResNetLayout::Keras => Self::Keras,
            _ => Self::Torchvision,
        }
    }
}

/// The deviation of a standard normal truncated at two deviations: Keras's `VarianceScaling`
/// divides its deviation by it, so that the truncated draws have the variance asked for.
const TRUNCATED_NORMAL_SPREAD: f64 = 0.879_625_661_034_239_8;

/// The deviation, before truncation, of Keras's `VarianceScaling(2, "fan_out",
/// "truncated_normal")` for a kernel of `c_out` filters of side `kernel` over `groups`: the
/// fan-out is a `Conv2D`'s `out · k²`, a `DepthwiseConv2D`'s `k²` (its kernel is
/// `[k, k, in, 1]`). torchvision's `kaiming_normal_(mode="fan_out")`, Burn's initializer
/// above, takes `out · k²` for any groups, untruncated.
fn keras_kernel_std(c_out: usize, kernel: usize, groups: usize) -> f64 {
    let area = (kernel * kernel) as f64;
    let fan_out = match groups {
        1 => c_out as f64 * area,
        _ => area,
    };
    (2.0 / fan_out).sqrt() / TRUNCATED_NORMAL_SPREAD
}

impl EfficientNetLayout {
    /// A square `kernel` convolution from `channels[0]` to `channels[1]` at `stride`, with a
    /// `bias` or not, over `groups` groups (1, or the input's channels: a depthwise
    /// convolution), padded and initialized as this layout's library does.
    pub(crate) fn conv(
        self,
        channels: [usize; 2],
        kernel: usize,
        stride: usize,
        groups: usize,
        bias: bool,
        device: &Device,
    ) -> Conv2d {
        let padding = MobileNetLayout::from(self).padding(kernel);
        let [c_in, c_out] = channels;
        let mut conv = Conv2dConfig::new(channels, [kernel; 2])
            .with_stride([stride; 2])
            .with_groups(groups)
            .with_padding(padding)
            .with_bias(bias)
            .with_initializer(Initializer::Normal {
                mean: 0.0,
                std: (2.0 / (c_out * kernel * kernel) as f64).sqrt(),
            })
            .init(device);
        if self == Self::Keras {
            let shape = [c_out, c_in / groups, kernel, kernel];
            conv.weight = truncated_normal(shape, keras_kernel_std(c_out, kernel, groups), device);
        }
        if bias {
            conv.bias = Some(zeros(c_out, device));
        }
        conv
    }

    /// A convolution without a bias and its batch norm, `epsilon` and `momentum` (as Burn
    /// counts it) given.
    pub(crate) fn conv_bn(
        self,
        channels: [usize; 2],
        kernel: usize,
        stride: usize,
        depthwise: bool,
        [epsilon, momentum]: [f64; 2],
        device: &Device,
    ) -> ConvBn {
        let groups = if depthwise { channels[0] } else { 1 };
        let bn = BatchNormConfig::new(channels[1])
            .with_epsilon(epsilon)
            .with_momentum(momentum);
        ConvBn {
            conv: self.conv(channels, kernel, stride, groups, false, device),
            bn: bn.init(device),
        }
    }

    /// The batch norms' epsilon and momentum (as Burn counts it): torchvision's 1e-5 and 0.1,
    /// or TF's 1e-3 and 0.01 (Keras's momentum 0.99) where `tf_constants` or in Keras's
    /// layout.
    pub(crate) fn batch_norm_constants(self, tf_constants: bool) -> [f64; 2] {
        match (self, tf_constants) {
            (Self::Torchvision, false) => [1e-5, 0.1],
            _ => [1e-3, 0.01],
        }
    }

    /// The dense layer to the logits, as both libraries initialize it: weights uniform within
    /// `1 / √classes` (torchvision's `init_range`, Keras's `VarianceScaling(1/3, "fan_out",
    /// "uniform")`), zero bias.
    pub(crate) fn classifier(self, features: usize, classes: usize, device: &Device) -> Linear {
        let limit = 1.0 / (classes as f64).sqrt();
        let mut dense = LinearConfig::new(features, classes)
            .with_initializer(Initializer::Uniform {
                min: -limit,
                max: limit,
            })
            .init(device);
        dense.bias = Some(zeros(classes, device));
        dense
    }
}
