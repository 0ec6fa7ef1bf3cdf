//! [`Conv1d`] and [`Conv1dConfig`]: Burn's 1D convolution (sequences: audio, signals, text),
//! computed by [`crate::conv1d`].

use burn::config::Config;
use burn::nn::{Initializer, PaddingConfig1d};
use burn::tensor::{Device, Tensor};

use crate::dispatch::conv1d;
use crate::nn::wrapped::wrapped_module;

/// [`burn::nn::conv::Conv1dConfig`], field for field (a config saved from either loads as the
/// other), whose [`init`](Self::init) makes this crate's [`Conv1d`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct Conv1dConfig {
    /// The number of input channels.
    pub channels_in: usize,
    /// The number of output channels.
    pub channels_out: usize,
    /// The size of the kernel.
    pub kernel_size: usize,
    /// The stride of the convolution.
    #[config(default = "1")]
    pub stride: usize,
    /// Spacing between kernel elements.
    #[config(default = "1")]
    pub dilation: usize,
    /// Controls the connections between input and output channels.
    #[config(default = "1")]
    pub groups: usize,
    /// The padding configuration.
    #[config(default = "PaddingConfig1d::Valid")]
    pub padding: PaddingConfig1d,
    /// If bias should be added to the output.
    #[config(default = true)]
    pub bias: bool,
    /// The function that initializes the parameters (Burn's default).
    #[config(default = "Initializer::KaimingUniform{gain:1.0/3.0f64.sqrt(),fan_out_only:false}")]
    pub initializer: Initializer,
}

impl Conv1dConfig {
    /// A new [`Conv1d`], initialized as Burn's `Conv1dConfig::init` initializes it.
    pub fn init(&self, device: &Device) -> Conv1d {
        Conv1d::from(burn::nn::conv::Conv1dConfig::from(self).init(device))
    }
}

impl From<&Conv1dConfig> for burn::nn::conv::Conv1dConfig {
    fn from(config: &Conv1dConfig) -> Self {
        Self {
            channels_in: config.channels_in,
            channels_out: config.channels_out,
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

/// Burn's [`burn::nn::conv::Conv1d`] (the same parameters, names and records), whose
/// [`forward`](Self::forward) runs on burn-towers' kernels as a 2D convolution of one row.
#[derive(Clone, Debug)]
pub struct Conv1d {
    inner: burn::nn::conv::Conv1d,
}

wrapped_module!(Conv1d, burn::nn::conv::Conv1d);

impl Conv1d {
    /// `[n, in, len]` to `[n, out, out_len]`, as Burn's `Conv1d::forward`, its products in this
    /// thread's [`Precision`](crate::Precision) ([`crate::conv1d`]).
    pub fn forward(&self, input: Tensor<3>) -> Tensor<3> {
        conv1d(&self.inner, input)
    }
}
