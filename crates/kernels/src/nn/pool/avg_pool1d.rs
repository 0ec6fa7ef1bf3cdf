//! [`AvgPool1d`] and [`AvgPool1dConfig`]: Burn's 1D average pooling, computed by
//! [`crate::avg_pool1d`].

use burn::config::Config;
use burn::nn::PaddingConfig1d;
use burn::tensor::Tensor;

use crate::dispatch::avg_pool1d;
use crate::nn::wrapped::wrapped_module;

/// [`burn::nn::pool::AvgPool1dConfig`], field for field, whose [`init`](Self::init) makes this
/// crate's [`AvgPool1d`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct AvgPool1dConfig {
    /// The size of the kernel.
    pub kernel_size: usize,
    /// The stride.
    #[config(default = "kernel_size")]
    pub stride: usize,
    /// The padding configuration.
    #[config(default = "PaddingConfig1d::Valid")]
    pub padding: PaddingConfig1d,
    /// If the padding is counted in the denominator when computing the average.
    #[config(default = "true")]
    pub count_include_pad: bool,
    /// If true, use ceiling instead of floor for output size calculation.
    #[config(default = "false")]
    pub ceil_mode: bool,
}

impl AvgPool1dConfig {
    /// A new [`AvgPool1d`].
    pub fn init(&self) -> AvgPool1d {
        AvgPool1d::from(burn::nn::pool::AvgPool1dConfig::from(self).init())
    }
}

impl From<&AvgPool1dConfig> for burn::nn::pool::AvgPool1dConfig {
    fn from(config: &AvgPool1dConfig) -> Self {
        Self {
            kernel_size: config.kernel_size,
            stride: config.stride,
            padding: config.padding.clone(),
            count_include_pad: config.count_include_pad,
            ceil_mode: config.ceil_mode,
        }
    }
}

/// Burn's [`burn::nn::pool::AvgPool1d`], whose [`forward`](Self::forward) runs on burn-towers'
/// flex kernels where they apply.
#[derive(Clone, Debug)]
pub struct AvgPool1d {
    inner: burn::nn::pool::AvgPool1d,
}

wrapped_module!(AvgPool1d, burn::nn::pool::AvgPool1d);

impl AvgPool1d {
    /// `[n, c, l]` to `[n, c, ol]`, as Burn's `AvgPool1d::forward`.
    pub fn forward(&self, input: Tensor<3>) -> Tensor<3> {
        avg_pool1d(&self.inner, input)
    }
}
