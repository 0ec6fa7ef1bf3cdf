//! [`Conv3d`] and [`Conv3dConfig`]: Burn's 3D convolution (video and volumetric models),
//! computed by [`crate::conv3d`].

use burn::config::Config;
use burn::nn::{Initializer, PaddingConfig3d};
use burn::tensor::{Device, Tensor};

use crate::dispatch::conv3d;
use crate::nn::wrapped::wrapped_module;

/// [`burn::nn::conv::Conv3dConfig`], field for field (a config saved from either loads as the
/// other), whose [`init`](Self::init) makes this crate's [`Conv3d`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct Conv3dConfig {
    /// The number of input and output channels.
    pub channels: [usize; 2],
    /// The size of the kernel (depth, rows, columns).
    pub kernel_size: [usize; 3],
    /// The stride of the convolution.
    #[config(default = "[1, 1, 1]")]
    pub stride: [usize; 3],
    /// Spacing between kernel elements.
    #[config(default = "[1, 1, 1]")]
    pub dilation: [usize; 3],
    /// Controls the connections between input and output channels.
    #[config(default = "1")]
    pub groups: usize,
    /// The padding configuration.
    #[config(default = "PaddingConfig3d::Valid")]
    pub padding: PaddingConfig3d,
    /// If bias should be added to the output.
    #[config(default = true)]
    pub bias: bool,
    /// The function that initializes the parameters (Burn's default).
    #[config(default = "Initializer::KaimingUniform{gain:1.0/3.0f64.sqrt(),fan_out_only:false}")]
    pub initializer: Initializer,
}

impl Conv3dConfig {
    /// A new [`Conv3d`], initialized as Burn's `Conv3dConfig::init` initializes it.
    pub fn init(&self, device: &Device) -> Conv3d {
        Conv3d::from(burn::nn::conv::Conv3dConfig::from(self).init(device))
    }
}

impl From<&Conv3dConfig> for burn::nn::conv::Conv3dConfig {
    fn from(config: &Conv3dConfig) -> Self {
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

/// Burn's [`burn::nn::conv::Conv3d`] (the same parameters, names and records), whose
/// [`forward`](Self::forward) runs on burn-towers' kernels as one 2D convolution of the
/// input's depth windows side by side.
#[derive(Clone, Debug)]
pub struct Conv3d {
    inner: burn::nn::conv::Conv3d,
}

wrapped_module!(Conv3d, burn::nn::conv::Conv3d);

impl Conv3d {
    /// `[n, in, d, h, w]` to `[n, out, od, oh, ow]`, as Burn's `Conv3d::forward`, its products
    /// in this thread's [`Precision`](crate::Precision) ([`crate::conv3d`]).
    pub fn forward(&self, input: Tensor<5>) -> Tensor<5> {
        conv3d(&self.inner, input)
    }
}
