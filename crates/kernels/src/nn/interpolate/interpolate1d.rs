//! [`Interpolate1d`] and [`Interpolate1dConfig`]: Burn's resizing of `[n, c, length]`,
//! computed by [`crate::interpolate`] as an image one row high.

use burn::config::Config;
use burn::nn::interpolate::InterpolateMode;
use burn::tensor::Tensor;
use burn::tensor::ops::InterpolateOptions;

use crate::dispatch::interpolate;
use crate::nn::wrapped::wrapped_module;

/// [`burn::nn::interpolate::Interpolate1dConfig`], field for field, whose [`init`](Self::init)
/// makes this crate's [`Interpolate1d`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct Interpolate1dConfig {
    /// Output length; exactly one of it and `scale_factor` set.
    #[config(default = "None")]
    pub output_size: Option<usize>,
    /// Scale factor of the input's length: the output's is `floor(length · scale_factor)`.
    #[config(default = "None")]
    pub scale_factor: Option<f32>,
    /// How the output values are computed.
    #[config(default = "InterpolateMode::Nearest")]
    pub mode: InterpolateMode,
    /// Whether the input and output are aligned by their end values (else half-step centres).
    #[config(default = true)]
    pub align_corners: bool,
}

impl Interpolate1dConfig {
    /// A new [`Interpolate1d`].
    pub fn init(&self) -> Interpolate1d {
        Interpolate1d::from(burn::nn::interpolate::Interpolate1dConfig::from(self).init())
    }
}

impl From<&Interpolate1dConfig> for burn::nn::interpolate::Interpolate1dConfig {
    fn from(config: &Interpolate1dConfig) -> Self {
        Self {
            output_size: config.output_size,
            scale_factor: config.scale_factor,
            mode: config.mode.clone(),
            align_corners: config.align_corners,
        }
    }
}

/// Burn's [`burn::nn::interpolate::Interpolate1d`], whose [`forward`](Self::forward) resizes
/// linearly on burn-towers' flex kernel.
#[derive(Clone, Debug)]
pub struct Interpolate1d {
    inner: burn::nn::interpolate::Interpolate1d,
}

wrapped_module!(Interpolate1d, burn::nn::interpolate::Interpolate1d);

impl Interpolate1d {
    /// `[n, c, length]` to `[n, c, length']`, as Burn's `Interpolate1d::forward`.
    ///
    /// # Panics
    ///
    /// Unless exactly one of `output_size` and `scale_factor` is set, as Burn's.
    pub fn forward(&self, input: Tensor<3>) -> Tensor<3> {
        let layer = &self.inner;
        let mut options = InterpolateOptions::new(layer.mode.clone().into())
            .with_align_corners(layer.align_corners);
        options.output_size = layer.output_size.map(|size| [1, size]);
        options.scale_factor = layer.scale_factor.map(|scale| [1.0, scale]);
        interpolate(input.unsqueeze_dim(2), options).squeeze_dims(&[2])
    }
}
