//! [`LeakyRelu`] and [`LeakyReluConfig`]: Burn's leaky ReLU, computed by [`crate::leaky_relu`].

use burn::config::Config;
use burn::tensor::Tensor;

use crate::dispatch::leaky_relu;
use crate::nn::wrapped::wrapped_module;

/// [`burn::nn::LeakyReluConfig`], field for field, whose [`init`](Self::init) makes this
/// crate's [`LeakyRelu`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct LeakyReluConfig {
    /// The slope below 0.
    #[config(default = "0.01")]
    pub negative_slope: f64,
}

impl LeakyReluConfig {
    /// A new [`LeakyRelu`].
    pub fn init(&self) -> LeakyRelu {
        LeakyRelu::from(burn::nn::LeakyReluConfig::from(self).init())
    }
}

impl From<&LeakyReluConfig> for burn::nn::LeakyReluConfig {
    fn from(config: &LeakyReluConfig) -> Self {
        Self {
            negative_slope: config.negative_slope,
        }
    }
}

/// Burn's [`burn::nn::LeakyRelu`], whose [`forward`](Self::forward) runs in one pass each way
/// on flex.
#[derive(Clone, Debug)]
pub struct LeakyRelu {
    inner: burn::nn::LeakyRelu,
}

wrapped_module!(LeakyRelu, burn::nn::LeakyRelu);

impl LeakyRelu {
    /// `x` where `x ≥ 0`, `negative_slope · x` below, as Burn's `LeakyRelu::forward`.
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        leaky_relu(input, self.inner.negative_slope)
    }
}
