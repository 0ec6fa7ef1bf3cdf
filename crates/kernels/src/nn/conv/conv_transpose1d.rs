//! [`ConvTranspose1d`] and [`ConvTranspose1dConfig`]: Burn's 1D transposed convolution (audio
//! decoders and vocoders' upsampling), computed by [`crate::conv_transpose1d`].

use burn::config::Config;
use burn::nn::Initializer;
use burn::tensor::{Device, Tensor};

use crate::dispatch::conv_transpose1d;
use crate::nn::wrapped::wrapped_module;

/// [`burn::nn::conv::ConvTranspose1dConfig`], field for field (a config saved from either loads
/// as the other), whose [`init`](Self::init) makes this crate's [`ConvTranspose1d`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct ConvTranspose1dConfig {
    /// The number of input and output channels.
    pub channels: [usize; 2],
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
    /// The padding taken from both ends of the output.
    #[config(default = "0")]
    pub padding: usize,
    /// Values added to one end of the output's length.
    #[config(default = "0")]
    pub padding_out: usize,
    /// If bias should be added to the output.
    #[config(default = true)]
    pub bias: bool,
    /// The function that initializes the parameters (Burn's default).
    #[config(default = "Initializer::KaimingUniform{gain:1.0/3.0f64.sqrt(),fan_out_only:false}")]
    pub initializer: Initializer,
}

impl ConvTranspose1dConfig {
    /// A new [`ConvTranspose1d`], initialized as Burn's `ConvTranspose1dConfig::init`
    /// initializes it.
    pub fn init(&self, device: &Device) -> ConvTranspose1d {
        let config = burn::nn::conv::ConvTranspose1dConfig::from(self);
        ConvTranspose1d::from(config.init(device))
    }
}

impl From<&ConvTranspose1dConfig> for burn::nn::conv::ConvTranspose1dConfig {
    fn from(config: &ConvTranspose1dConfig) -> Self {
        Self {
            channels: config.channels,
            kernel_size: config.kernel_size,
            stride: config.stride,
            dilation: config.dilation,
            groups: config.groups,
            padding: config.padding,
            padding_out: config.padding_out,
            bias: config.bias,
            initializer: config.initializer.clone(),
        }
    }
}

/// Burn's [`burn::nn::conv::ConvTranspose1d`] (the same parameters, names and records), whose
/// [`forward`](Self::forward) runs on burn-towers' kernels as a 2D transposed convolution of
/// one row.
#[derive(Clone, Debug)]
pub struct ConvTranspose1d {
    inner: burn::nn::conv::ConvTranspose1d,
}

wrapped_module!(ConvTranspose1d, burn::nn::conv::ConvTranspose1d);

impl ConvTranspose1d {
    /// `[n, in, len]` to `[n, out, out_len]`, as Burn's `ConvTranspose1d::forward`, its
    /// products in this thread's [`Precision`](crate::Precision)
    /// ([`crate::conv_transpose1d`]).
    pub fn forward(&self, input: Tensor<3>) -> Tensor<3> {
        conv_transpose1d(&self.inner, input)
    }
}
