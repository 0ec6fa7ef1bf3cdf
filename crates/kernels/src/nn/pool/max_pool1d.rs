//! [`MaxPool1d`] and [`MaxPool1dConfig`]: Burn's 1D max pooling, computed by
//! [`crate::max_pool1d`].

use burn::config::Config;
use burn::nn::PaddingConfig1d;
use burn::tensor::Tensor;

use crate::dispatch::max_pool1d;
use crate::nn::wrapped::wrapped_module;

/// [`burn::nn::pool::MaxPool1dConfig`], field for field, whose [`init`](Self::init) makes this
/// crate's [`MaxPool1d`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct MaxPool1dConfig {
    /// The size of the kernel.
    pub kernel_size: usize,
    /// The stride.
    #[config(default = "kernel_size")]
    pub stride: usize,
    /// The padding configuration.
    #[config(default = "PaddingConfig1d::Valid")]
    pub padding: PaddingConfig1d,
    /// The dilation.
    #[config(default = "1")]
    pub dilation: usize,
    /// If true, use ceiling instead of floor for output size calculation.
    #[config(default = "false")]
    pub ceil_mode: bool,
}

impl MaxPool1dConfig {
    /// A new [`MaxPool1d`].
    pub fn init(&self) -> MaxPool1d {
        MaxPool1d::from(burn::nn::pool::MaxPool1dConfig::from(self).init())
    }
}

impl From<&MaxPool1dConfig> for burn::nn::pool::MaxPool1dConfig {
    fn from(config: &MaxPool1dConfig) -> Self {
        Self {
            kernel_size: config.kernel_size,
            stride: config.stride,
            padding: config.padding.clone(),
            dilation: config.dilation,
            ceil_mode: config.ceil_mode,
        }
    }
}

/// Burn's [`burn::nn::pool::MaxPool1d`], whose [`forward`](Self::forward) runs on burn-towers'
/// flex kernels where they apply.
#[derive(Clone, Debug)]
pub struct MaxPool1d {
    inner: burn::nn::pool::MaxPool1d,
}

wrapped_module!(MaxPool1d, burn::nn::pool::MaxPool1d);

impl MaxPool1d {
    /// `[n, c, l]` to `[n, c, ol]`, as Burn's `MaxPool1d::forward`.
    pub fn forward(&self, input: Tensor<3>) -> Tensor<3> {
        max_pool1d(&self.inner, input)
    }
}
