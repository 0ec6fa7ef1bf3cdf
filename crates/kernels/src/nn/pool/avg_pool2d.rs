//! [`AvgPool2d`] and [`AvgPool2dConfig`]: Burn's 2D average pooling, computed by
//! [`crate::avg_pool2d`].

use burn::config::Config;
use burn::nn::PaddingConfig2d;
use burn::tensor::Tensor;

use crate::dispatch::avg_pool2d;
use crate::nn::wrapped::wrapped_module;

/// [`burn::nn::pool::AvgPool2dConfig`], field for field, whose [`init`](Self::init) makes this
/// crate's [`AvgPool2d`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct AvgPool2dConfig {
    /// The size of the kernel.
    pub kernel_size: [usize; 2],
    /// The strides.
    #[config(default = "kernel_size")]
    pub strides: [usize; 2],
    /// The padding configuration.
    #[config(default = "PaddingConfig2d::Valid")]
    pub padding: PaddingConfig2d,
    /// If the padding is counted in the denominator when computing the average.
    #[config(default = "true")]
    pub count_include_pad: bool,
    /// If true, use ceiling instead of floor for output size calculation.
    #[config(default = "false")]
    pub ceil_mode: bool,
}

impl AvgPool2dConfig {
    /// A new [`AvgPool2d`].
    pub fn init(&self) -> AvgPool2d {
        AvgPool2d::from(burn::nn::pool::AvgPool2dConfig::from(self).init())
    }
}

impl From<&AvgPool2dConfig> for burn::nn::pool::AvgPool2dConfig {
    fn from(config: &AvgPool2dConfig) -> Self {
        Self {
            kernel_size: config.kernel_size,
            strides: config.strides,
            padding: config.padding.clone(),
            count_include_pad: config.count_include_pad,
            ceil_mode: config.ceil_mode,
        }
    }
}

/// Burn's [`burn::nn::pool::AvgPool2d`], whose [`forward`](Self::forward) runs on burn-towers'
/// flex kernels where they apply.
#[derive(Clone, Debug)]
pub struct AvgPool2d {
    inner: burn::nn::pool::AvgPool2d,
}

wrapped_module!(AvgPool2d, burn::nn::pool::AvgPool2d);

impl AvgPool2d {
    /// `[n, c, h, w]` to `[n, c, oh, ow]`, as Burn's `AvgPool2d::forward`.
    pub fn forward(&self, input: Tensor<4>) -> Tensor<4> {
        avg_pool2d(&self.inner, input)
    }
}
