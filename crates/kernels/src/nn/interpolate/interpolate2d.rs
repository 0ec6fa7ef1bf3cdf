//! [`Interpolate2d`] and [`Interpolate2dConfig`]: Burn's resizing of `[n, c, h, w]`, computed by
//! [`crate::interpolate`].

use burn::config::Config;
use burn::nn::interpolate::InterpolateMode;
use burn::tensor::Tensor;
use burn::tensor::ops::InterpolateOptions;

use crate::dispatch::interpolate;
use crate::nn::wrapped::wrapped_module;

/// [`burn::nn::interpolate::Interpolate2dConfig`], field for field, whose [`init`](Self::init)
/// makes this crate's [`Interpolate2d`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct Interpolate2dConfig {
    /// Output size of the interpolated tensor; exactly one of it and `scale_factor` set.
    #[config(default = "None")]
    pub output_size: Option<[usize; 2]>,
    /// Scale factor of the input's size: the output's is `floor(input_size · scale_factor)`.
    #[config(default = "None")]
    pub scale_factor: Option<[f32; 2]>,
    /// How the output values are computed.
    #[config(default = "InterpolateMode::Nearest")]
    pub mode: InterpolateMode,
    /// Whether the input and output are aligned by their corner pixels (else half-pixel
    /// centres).
    #[config(default = true)]
    pub align_corners: bool,
}

impl Interpolate2dConfig {
    /// A new [`Interpolate2d`].
    pub fn init(&self) -> Interpolate2d {
        Interpolate2d::from(burn::nn::interpolate::Interpolate2dConfig::from(self).init())
    }
}

impl From<&Interpolate2dConfig> for burn::nn::interpolate::Interpolate2dConfig {
    fn from(config: &Interpolate2dConfig) -> Self {
        Self {
            output_size: config.output_size,
            scale_factor: config.scale_factor,
            mode: config.mode.clone(),
            align_corners: config.align_corners,
        }
    }
}

/// Burn's [`burn::nn::interpolate::Interpolate2d`], whose [`forward`](Self::forward) resizes
/// bilinearly on burn-towers' flex kernel.
#[derive(Clone, Debug)]
pub struct Interpolate2d {
    inner: burn::nn::interpolate::Interpolate2d,
}

wrapped_module!(Interpolate2d, burn::nn::interpolate::Interpolate2d);

impl Interpolate2d {
    /// `[n, c, h, w]` to `[n, c, h', w']`, as Burn's `Interpolate2d::forward`.
    ///
    /// # Panics
    ///
    /// Unless exactly one of `output_size` and `scale_factor` is set, as Burn's.
    pub fn forward(&self, input: Tensor<4>) -> Tensor<4> {
        let layer = &self.inner;
        let mut options = InterpolateOptions::new(layer.mode.clone().into())
            .with_align_corners(layer.align_corners);
        options.output_size = layer.output_size;
        options.scale_factor = layer.scale_factor;
        interpolate(input, options)
    }
}
