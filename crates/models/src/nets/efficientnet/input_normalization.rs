//! [`InputNormalization`]: the first layers of keras.applications' EfficientNet, which take
//! raw pixels: `Rescaling(1/255)`, `Normalization` by the mean and variance kept in the
//! weights file, and, in a network built for the ImageNet weights, a second `Rescaling`.

use burn::config::Config;
use burn::module::{Module, RunningState};
use burn::tensor::{Device, Tensor};

/// ImageNet's per-channel deviations of RGB values in `[0, 1]`: keras.applications divides
/// once more by their square roots in a network built with `weights="imagenet"`, since the
/// ImageNet file's `Normalization` holds these deviations as variances (TF issue 49930).
const IMAGENET_STDDEV_RGB: [f64; 3] = [0.229, 0.224, 0.225];

/// Keras's `backend.epsilon()`: the least deviation `Normalization` divides by.
const KERAS_EPSILON: f64 = 1e-7;

/// [`InputNormalization`]'s shape.
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct InputNormalizationConfig {
    /// The channels of the images (3).
    #[config(default = 3)]
    pub channels: usize,
    /// Whether the network was built for the ImageNet weights (`weights="imagenet"`), which
    /// adds the division by `√IMAGENET_STDDEV_RGB`; Keras's files of weights only do not say
    /// which (its files with a configuration do: `KerasConfig::channel_scales`).
    #[config(default = true)]
    pub imagenet_rescaling: bool,
}

impl InputNormalizationConfig {
    /// A new [`InputNormalization`] of mean 0 and variance 1, as Keras builds an unadapted
    /// `Normalization`.
    pub fn init(&self, device: &Device) -> InputNormalization {
        assert!(
            !self.imagenet_rescaling || self.channels == IMAGENET_STDDEV_RGB.len(),
            "the ImageNet rescaling is of RGB images, not of {} channels",
            self.channels
        );
        InputNormalization {
            adapted_mean: RunningState::new(Tensor::zeros([self.channels], device)),
            adapted_var: RunningState::new(Tensor::ones([self.channels], device)),
            imagenet_rescaling: self.imagenet_rescaling,
        }
    }
}

/// `(x / 255 - mean) / max(√variance, 1e-7)` per channel of `[n, c, h, w]`, then divided by
/// `√IMAGENET_STDDEV_RGB` where the network was built for the ImageNet weights. The mean and
/// variance are statistics of data (Keras's `adapt`), loaded with the weights, never trained.
#[derive(Module, Debug)]
pub struct InputNormalization {
    /// The mean per channel of the `[0, 1]` images (Keras's `normalization/mean`).
    pub adapted_mean: RunningState<Tensor<1>>,
    /// Their variance per channel (`normalization/variance`).
    pub adapted_var: RunningState<Tensor<1>>,
    imagenet_rescaling: bool,
}

impl InputNormalization {
    /// Raw pixels `[n, c, h, w]` in `[0, 255]` to the network's first convolution's input.
    pub fn forward(&self, images: Tensor<4>) -> Tensor<4> {
        let mean = self.adapted_mean.value();
        let channels = mean.dims()[0];
        let per_channel = |t: Tensor<1>| t.reshape([1, channels, 1, 1]);
        let mean = per_channel(mean);
        let mut scale = self
            .adapted_var
            .value()
            .sqrt()
            .clamp_min(KERAS_EPSILON)
            .recip();
        if let Some(rescaling) = self.channel_scales() {
            let rescaling = rescaling.map(|factor| factor as f32);
            scale = scale * Tensor::from_floats(rescaling, &images.device());
        }
        (images.div_scalar(255.0) - mean) * per_channel(scale)
    }

    /// The factors, one a channel, by which it multiplies the normalized input: `1 /
    /// √IMAGENET_STDDEV_RGB` in a network built for the ImageNet weights, else `None`.
    pub fn channel_scales(&self) -> Option<[f64; 3]> {
        let rescaling = IMAGENET_STDDEV_RGB.map(|deviation| 1.0 / deviation.sqrt());
        self.imagenet_rescaling.then_some(rescaling)
    }
}
