//! [`MaxPool2d`] and [`MaxPool2dConfig`]: Burn's 2D max pooling, computed by
//! [`crate::max_pool2d`].

use burn::config::Config;
use burn::nn::PaddingConfig2d;
use burn::tensor::Tensor;

use crate::dispatch::max_pool2d;
use crate::nn::wrapped::wrapped_module;

/// [`burn::nn::pool::MaxPool2dConfig`], field for field, whose [`init`](Self::init) makes this
/// crate's [`MaxPool2d`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct MaxPool2dConfig {
    /// The size of the kernel.
    pub kernel_size: [usize; 2],
    /// The strides.
    #[config(default = "kernel_size")]
    pub strides: [usize; 2],
    /// The padding configuration.
    #[config(default = "PaddingConfig2d::Valid")]
    pub padding: PaddingConfig2d,
    /// The dilation.
    #[config(default = "[1, 1]")]
    pub dilation: [usize; 2],
    /// If true, use ceiling instead of floor for output size calculation.
    #[config(default = "false")]
    pub ceil_mode: bool,
}

impl MaxPool2dConfig {
    /// A new [`MaxPool2d`].
    pub fn init(&self) -> MaxPool2d {
        MaxPool2d::from(burn::nn::pool::MaxPool2dConfig::from(self).init())
    }
}

impl From<&MaxPool2dConfig> for burn::nn::pool::MaxPool2dConfig {
    fn from(config: &MaxPool2dConfig) -> Self {
        Self {
            kernel_size: config.kernel_size,
            strides: config.strides,
            padding: config.padding.clone(),
            dilation: config.dilation,
            ceil_mode: config.ceil_mode,
        }
    }
}

/// Burn's [`burn::nn::pool::MaxPool2d`], whose [`forward`](Self::forward) runs on burn-towers'
/// flex kernels where they apply.
#[derive(Clone, Debug)]
pub struct MaxPool2d {
    inner: burn::nn::pool::MaxPool2d,
}

wrapped_module!(MaxPool2d, burn::nn::pool::MaxPool2d);

impl MaxPool2d {
    /// `[n, c, h, w]` to `[n, c, oh, ow]`, as Burn's `MaxPool2d::forward`.
    pub fn forward(&self, input: Tensor<4>) -> Tensor<4> {
        max_pool2d(&self.inner, input)
    }
}
