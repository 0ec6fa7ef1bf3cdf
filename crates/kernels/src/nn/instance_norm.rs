//! [`InstanceNorm`] and [`InstanceNormConfig`]: Burn's instance normalization, computed by
//! [`crate::instance_norm`].

use burn::config::Config;
use burn::tensor::{Device, Tensor};

use crate::dispatch::instance_norm;
use crate::nn::wrapped::wrapped_module;

/// [`burn::nn::InstanceNormConfig`], field for field, whose [`init`](Self::init) makes this
/// crate's [`InstanceNorm`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct InstanceNormConfig {
    /// The number of channels the input has.
    pub num_channels: usize,
    /// A value added to the variance for numerical stability.
    #[config(default = 1e-5)]
    pub epsilon: f64,
    /// Whether the layer has a scale and an offset per channel.
    #[config(default = true)]
    pub affine: bool,
}

impl InstanceNormConfig {
    /// A new [`InstanceNorm`], initialized as Burn's `InstanceNormConfig::init` initializes it.
    pub fn init(&self, device: &Device) -> InstanceNorm {
        InstanceNorm::from(burn::nn::InstanceNormConfig::from(self).init(device))
    }
}

impl From<&InstanceNormConfig> for burn::nn::InstanceNormConfig {
    fn from(config: &InstanceNormConfig) -> Self {
        Self {
            num_channels: config.num_channels,
            epsilon: config.epsilon,
            affine: config.affine,
        }
    }
}

/// Burn's [`burn::nn::InstanceNorm`] (the same parameters, names and records), whose
/// [`forward`](Self::forward) runs on the group norm's flex kernel where it applies (an affine
/// one).
#[derive(Clone, Debug)]
pub struct InstanceNorm {
    inner: burn::nn::InstanceNorm,
}

wrapped_module!(InstanceNorm, burn::nn::InstanceNorm);

impl InstanceNorm {
    /// `[n, c, ...]` normalized per image and channel, as Burn's `InstanceNorm::forward`.
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        instance_norm(&self.inner, input)
    }
}
