//! [`AdaptiveAvgPool3d`] and [`AdaptiveAvgPool3dConfig`]: Burn's 3D adaptive average
//! pooling, computed by [`crate::adaptive_avg_pool3d`].

use burn::config::Config;
use burn::tensor::Tensor;

use crate::dispatch::adaptive_avg_pool3d;
use crate::nn::wrapped::wrapped_module;

/// [`burn::nn::pool::AdaptiveAvgPool3dConfig`], field for field, whose [`init`](Self::init)
/// makes this crate's [`AdaptiveAvgPool3d`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct AdaptiveAvgPool3dConfig {
    /// The size of the output.
    pub output_size: [usize; 3],
}

impl AdaptiveAvgPool3dConfig {
    /// A new [`AdaptiveAvgPool3d`].
    pub fn init(&self) -> AdaptiveAvgPool3d {
        AdaptiveAvgPool3d::from(burn::nn::pool::AdaptiveAvgPool3dConfig::from(self).init())
    }
}

impl From<&AdaptiveAvgPool3dConfig> for burn::nn::pool::AdaptiveAvgPool3dConfig {
    fn from(config: &AdaptiveAvgPool3dConfig) -> Self {
        Self {
            output_size: config.output_size,
        }
    }
}

/// Burn's [`burn::nn::pool::AdaptiveAvgPool3d`], whose [`forward`](Self::forward) runs on
/// burn-towers' flex kernels where they apply.
#[derive(Clone, Debug)]
pub struct AdaptiveAvgPool3d {
    inner: burn::nn::pool::AdaptiveAvgPool3d,
}

wrapped_module!(AdaptiveAvgPool3d, burn::nn::pool::AdaptiveAvgPool3d);

impl AdaptiveAvgPool3d {
    /// `[n, c, d, h, w]` to `[n, c, output_size[0], output_size[1], output_size[2]]`, as Burn's
    /// `AdaptiveAvgPool3d::forward`.
    pub fn forward(&self, input: Tensor<5>) -> Tensor<5> {
        adaptive_avg_pool3d(&self.inner, input)
    }
}
