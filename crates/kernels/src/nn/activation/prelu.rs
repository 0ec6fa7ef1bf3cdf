//! [`PRelu`] and [`PReluConfig`]: Burn's PReLU, computed by [`crate::prelu`].

use burn::config::Config;
use burn::tensor::{Device, Tensor};

use crate::dispatch::prelu;
use crate::nn::wrapped::wrapped_module;

/// [`burn::nn::PReluConfig`], field for field, whose [`init`](Self::init) makes this crate's
/// [`PRelu`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct PReluConfig {
    /// The number of slopes: 1 (one for all values) or the input's channels (dimension 1).
    #[config(default = "1")]
    pub num_parameters: usize,
    /// The slopes' first value.
    #[config(default = "0.25")]
    pub alpha: f64,
}

impl PReluConfig {
    /// A new [`PRelu`], initialized as Burn's `PReluConfig::init` initializes it.
    pub fn init(&self, device: &Device) -> PRelu {
        PRelu::from(burn::nn::PReluConfig::from(self).init(device))
    }
}

impl From<&PReluConfig> for burn::nn::PReluConfig {
    fn from(config: &PReluConfig) -> Self {
        Self {
            num_parameters: config.num_parameters,
            alpha: config.alpha,
        }
    }
}

/// Burn's [`burn::nn::PRelu`] (the same slopes, names and records), whose
/// [`forward`](Self::forward) runs in one pass each way on flex.
#[derive(Clone, Debug)]
pub struct PRelu {
    inner: burn::nn::PRelu,
}

wrapped_module!(PRelu, burn::nn::PRelu);

impl PRelu {
    /// `x` where `x ≥ 0`, the channel's slope times `x` below, as Burn's `PRelu::forward`.
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        prelu(&self.inner, input)
    }
}
