//! [`AdaptiveAvgPool2d`] and [`AdaptiveAvgPool2dConfig`]: Burn's 2D adaptive average
//! pooling, computed by [`crate::adaptive_avg_pool2d`].

use burn::config::Config;
use burn::tensor::Tensor;

use crate::dispatch::adaptive_avg_pool2d;
use crate::nn::wrapped::wrapped_module;

/// [`burn::nn::pool::AdaptiveAvgPool2dConfig`], field for field, whose [`init`](Self::init)
/// makes this crate's [`AdaptiveAvgPool2d`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct AdaptiveAvgPool2dConfig {
    /// The size of the output.
    pub output_size: [usize; 2],
}

impl AdaptiveAvgPool2dConfig {
    /// A new [`AdaptiveAvgPool2d`].
    pub fn init(&self) -> AdaptiveAvgPool2d {
        AdaptiveAvgPool2d::from(burn::nn::pool::AdaptiveAvgPool2dConfig::from(self).init())
    }
}

impl From<&AdaptiveAvgPool2dConfig> for burn::nn::pool::AdaptiveAvgPool2dConfig {
    fn from(config: &AdaptiveAvgPool2dConfig) -> Self {
        Self {
            output_size: config.output_size,
        }
    }
}

/// Burn's [`burn::nn::pool::AdaptiveAvgPool2d`], whose [`forward`](Self::forward) runs on
/// burn-towers' flex kernels where they apply.
#[derive(Clone, Debug)]
pub struct AdaptiveAvgPool2d {
    inner: burn::nn::pool::AdaptiveAvgPool2d,
}

wrapped_module!(AdaptiveAvgPool2d, burn::nn::pool::AdaptiveAvgPool2d);

impl AdaptiveAvgPool2d {
    /// `[n, c, h, w]` to `[n, c, output_size[0], output_size[1]]`, as Burn's
    /// `AdaptiveAvgPool2d::forward`.
    pub fn forward(&self, input: Tensor<4>) -> Tensor<4> {
        adaptive_avg_pool2d(&self.inner, input)
    }
}
