//! [`RmsNorm`] and [`RmsNormConfig`]: Burn's RMS normalization (LLaMA's), computed by
//! [`crate::rms_norm`].

use burn::config::Config;
use burn::tensor::{Device, Tensor};

use crate::dispatch::rms_norm;
use crate::nn::wrapped::wrapped_module;

/// [`burn::nn::RmsNormConfig`], field for field (a config saved from either loads as the
/// other), whose [`init`](Self::init) makes this crate's [`RmsNorm`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct RmsNormConfig {
    /// The size of the last dimension, which each row is normalized over.
    pub d_model: usize,
    /// A value added to the mean square for numerical stability.
    #[config(default = 1e-5)]
    pub epsilon: f64,
}

impl RmsNormConfig {
    /// A new [`RmsNorm`], initialized as Burn's `RmsNormConfig::init` initializes it (scale
    /// ones).
    ///
    /// # Panics
    ///
    /// If `epsilon` is not positive (as Burn's).
    pub fn init(&self, device: &Device) -> RmsNorm {
        let config = burn::nn::RmsNormConfig::from(self);
        RmsNorm::from(config.init(device))
    }
}

impl From<&RmsNormConfig> for burn::nn::RmsNormConfig {
    fn from(config: &RmsNormConfig) -> Self {
        Self {
            d_model: config.d_model,
            epsilon: config.epsilon,
        }
    }
}

/// Burn's [`burn::nn::RmsNorm`] (the same parameter, names and records; its scale and epsilon
/// read through `Deref`), whose [`forward`](Self::forward) runs on burn-towers' flex kernels
/// where they apply.
#[derive(Clone, Debug)]
pub struct RmsNorm {
    inner: burn::nn::RmsNorm,
}

wrapped_module!(RmsNorm, burn::nn::RmsNorm);

impl RmsNorm {
    /// `input` over the root mean square of its last dimension, scaled, as Burn's
    /// `RmsNorm::forward`.
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        rms_norm(&self.inner, input)
    }
}
