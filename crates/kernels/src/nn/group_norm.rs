//! [`GroupNorm`] and [`GroupNormConfig`]: Burn's group normalization, computed by
//! [`crate::group_norm`].

use burn::config::Config;
use burn::tensor::{Device, Tensor};

use crate::dispatch::group_norm;
use crate::nn::wrapped::wrapped_module;

/// [`burn::nn::GroupNormConfig`], field for field (a config saved from either loads as the
/// other), whose [`init`](Self::init) makes this crate's [`GroupNorm`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct GroupNormConfig {
    /// The number of groups the channels are split into.
    pub num_groups: usize,
    /// The number of channels the input has.
    pub num_channels: usize,
    /// A value added to the variance for numerical stability.
    #[config(default = 1e-5)]
    pub epsilon: f64,
    /// Whether the layer has a scale and an offset per channel.
    #[config(default = true)]
    pub affine: bool,
}

impl GroupNormConfig {
    /// A new [`GroupNorm`], initialized as Burn's `GroupNormConfig::init` initializes it.
    pub fn init(&self, device: &Device) -> GroupNorm {
        GroupNorm::from(burn::nn::GroupNormConfig::from(self).init(device))
    }
}

impl From<&GroupNormConfig> for burn::nn::GroupNormConfig {
    fn from(config: &GroupNormConfig) -> Self {
        Self {
            num_groups: config.num_groups,
            num_channels: config.num_channels,
            epsilon: config.epsilon,
            affine: config.affine,
        }
    }
}

/// Burn's [`burn::nn::GroupNorm`] (the same parameters, names and records), whose
/// [`forward`](Self::forward) runs on burn-towers' flex kernels where they apply (an affine
/// one).
#[derive(Clone, Debug)]
pub struct GroupNorm {
    inner: burn::nn::GroupNorm,
}

wrapped_module!(GroupNorm, burn::nn::GroupNorm);

impl GroupNorm {
    /// `[n, c, ...]` normalized per group of channels, as Burn's `GroupNorm::forward`.
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        group_norm(&self.inner, input)
    }
}
