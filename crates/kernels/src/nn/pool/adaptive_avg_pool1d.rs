//! [`AdaptiveAvgPool1d`] and [`AdaptiveAvgPool1dConfig`]: Burn's 1D adaptive average
//! pooling, computed by [`crate::adaptive_avg_pool1d`].

use burn::config::Config;
use burn::tensor::Tensor;

use crate::dispatch::adaptive_avg_pool1d;
use crate::nn::wrapped::wrapped_module;

/// [`burn::nn::pool::AdaptiveAvgPool1dConfig`], field for field, whose [`init`](Self::init)
/// makes this crate's [`AdaptiveAvgPool1d`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct AdaptiveAvgPool1dConfig {
    /// The size of the output.
    pub output_size: usize,
}

impl AdaptiveAvgPool1dConfig {
    /// A new [`AdaptiveAvgPool1d`].
    pub fn init(&self) -> AdaptiveAvgPool1d {
        AdaptiveAvgPool1d::from(burn::nn::pool::AdaptiveAvgPool1dConfig::from(self).init())
    }
}

impl From<&AdaptiveAvgPool1dConfig> for burn::nn::pool::AdaptiveAvgPool1dConfig {
    fn from(config: &AdaptiveAvgPool1dConfig) -> Self {
        Self {
            output_size: config.output_size,
        }
    }
}

/// Burn's [`burn::nn::pool::AdaptiveAvgPool1d`], whose [`forward`](Self::forward) runs on
/// burn-towers' flex kernels where they apply.
#[derive(Clone, Debug)]
pub struct AdaptiveAvgPool1d {
    inner: burn::nn::pool::AdaptiveAvgPool1d,
}

wrapped_module!(AdaptiveAvgPool1d, burn::nn::pool::AdaptiveAvgPool1d);

impl AdaptiveAvgPool1d {
    /// `[n, c, l]` to `[n, c, output_size]`, as Burn's `AdaptiveAvgPool1d::forward`.
    pub fn forward(&self, input: Tensor<3>) -> Tensor<3> {
        adaptive_avg_pool1d(&self.inner, input)
    }
}
