//! [`ConvTranspose2d`] and [`ConvTranspose2dConfig`]: Burn's 2D transposed convolution (a
//! decoder's or a GAN generator's upsampling), computed by [`crate::conv_transpose2d`].

use burn::config::Config;
use burn::nn::Initializer;
use burn::tensor::{Device, Tensor};

use crate::dispatch::conv_transpose2d;
use crate::nn::wrapped::wrapped_module;

/// [`burn::nn::conv::ConvTranspose2dConfig`], field for field (a config saved from either loads
/// as the other), whose [`init`](Self::init) makes this crate's [`ConvTranspose2d`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct ConvTranspose2dConfig {
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
    /// The padding, taken from both sides of the output.
    #[config(default = "[0, 0]")]
    pub padding: [usize; 2],
    /// The rows and columns added after the output (PyTorch's `output_padding`).
    #[config(default = "[0, 0]")]
    pub padding_out: [usize; 2],
    /// If bias should be added to the output.
    #[config(default = true)]
    pub bias: bool,
    /// The function that initializes the parameters (Burn's default).
    #[config(default = "Initializer::KaimingUniform{gain:1.0/3.0f64.sqrt(),fan_out_only:false}")]
    pub initializer: Initializer,
}

impl ConvTranspose2dConfig {
    /// A new [`ConvTranspose2d`], initialized as Burn's `ConvTranspose2dConfig::init`
    /// initializes it.
    pub fn init(&self, device: &Device) -> ConvTranspose2d {
        let config = burn::nn::conv::ConvTranspose2dConfig::from(self);
        ConvTranspose2d::from(config.init(device))
    }
}

impl From<&ConvTranspose2dConfig> for burn::nn::conv::ConvTranspose2dConfig {
    fn from(config: &ConvTranspose2dConfig) -> Self {
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

/// Burn's [`burn::nn::conv::ConvTranspose2d`] (the same parameters, names and records), whose
/// [`forward`](Self::forward) runs on burn-towers' flex kernels where they apply.
#[derive(Clone, Debug)]
pub struct ConvTranspose2d {
    inner: burn::nn::conv::ConvTranspose2d,
}

wrapped_module!(ConvTranspose2d, burn::nn::conv::ConvTranspose2d);

impl ConvTranspose2d {
    /// `[n, in, h, w]` to `[n, out, oh, ow]`, as Burn's `ConvTranspose2d::forward`, its
    /// products in this thread's [`Precision`](crate::Precision)
    /// ([`crate::conv_transpose2d`]).
    pub fn forward(&self, input: Tensor<4>) -> Tensor<4> {
        conv_transpose2d(&self.inner, input)
    }
}
