//! [`Conv2d`] and [`Conv2dConfig`]: Burn's 2D convolution, computed by [`crate::conv2d`].

use burn::config::Config;
use burn::nn::{Initializer, PaddingConfig2d};
use burn::tensor::{Device, Tensor};

use crate::dispatch::conv2d;
use crate::nn::wrapped::wrapped_module;

/// [`burn::nn::conv::Conv2dConfig`], field for field (a config saved from either loads as the
/// other), whose [`init`](Self::init) makes this crate's [`Conv2d`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct Conv2dConfig {
    /// The number of channels, `[in, out]`.
    pub channels: [usize; 2],
    /// The size of the kernel.
    pub kernel_size: [usize; 2],
    /// The stride of the convolution.
    #[config(default = "[1, 1]")]
    pub stride: [usize; 2],
    /// Spacing between kernel elements.
    #[config(default = "[1, 1]")]
    pub dilation: [usize; 2],
    /// Controls the connections between input and output channels.
    #[config(default = "1")]
    pub groups: usize,
    /// The padding configuration.
    #[config(default = "PaddingConfig2d::Valid")]
    pub padding: PaddingConfig2d,
    /// If bias should be added to the output.
    #[config(default = true)]
    pub bias: bool,
    /// The function that initializes the parameters (Burn's default).
    #[config(default = "Initializer::KaimingUniform{gain:1.0/3.0f64.sqrt(),fan_out_only:false}")]
    pub initializer: Initializer,
}

impl Conv2dConfig {
    /// A new [`Conv2d`], initialized as Burn's `Conv2dConfig::init` initializes it.
    pub fn init(&self, device: &Device) -> Conv2d {
        Conv2d::from(burn::nn::conv::Conv2dConfig::from(self).init(device))
    }
}

impl From<&Conv2dConfig> for burn::nn::conv::Conv2dConfig {
    fn from(config: &Conv2dConfig) -> Self {
        Self {
            channels: config.channels,
            kernel_size: config.kernel_size,
            stride: config.stride,
            dilation: config.dilation,
            groups: config.groups,
            padding: config.padding.clone(),
            bias: config.bias,
            initializer: config.initializer.clone(),
        }
    }
}

/// Burn's [`burn::nn::conv::Conv2d`] (the same parameters, names and records), whose
/// [`forward`](Self::forward) runs on burn-towers' flex kernels where they apply.
#[derive(Clone, Debug)]
pub struct Conv2d {
    inner: burn::nn::conv::Conv2d,
}

wrapped_module!(Conv2d, burn::nn::conv::Conv2d);

impl Conv2d {
    /// `[n, in, h, w]` to `[n, out, oh, ow]`, as Burn's `Conv2d::forward`, its products in this
    /// thread's [`Precision`](crate::Precision) ([`crate::conv2d`]).
    pub fn forward(&self, input: Tensor<4>) -> Tensor<4> {
        conv2d(&self.inner, input)
    }
}
