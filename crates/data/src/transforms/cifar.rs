//! The TF CIFAR-10 tutorial's preprocessing (`cifar10_input.distorted_inputs` / `inputs`).

use super::{
    Rng, Transform, crop_or_pad_center, per_image_standardization, random_brightness,
    random_contrast, random_crop, random_flip_left_right,
};
use crate::bounding_box::BoundingBox;
use crate::error::Cause;
use crate::image::Image;

/// Training distortions: random crop to `size` x `size` (24), random left-right flip, random
/// brightness (max delta 63 on the 0..255 scale), random contrast (0.2 to 1.8), per-image
/// standardization.
#[derive(Debug, Clone)]
pub struct CifarTrain {
    /// Side of the square crop.
    pub size: usize,
    /// Largest brightness change, on the input's scale.
    pub max_brightness_delta: f32,
    /// Contrast factor range.
    pub contrast: (f32, f32),
}

impl Default for CifarTrain {
    fn default() -> Self {
        Self {
            size: 24,
            max_brightness_delta: 63.0,
            contrast: (0.2, 1.8),
        }
    }
}

impl Transform for CifarTrain {
    fn apply(&self, image: Image, _: &[BoundingBox], rng: &mut Rng) -> Result<Image, Cause> {
        let image = random_crop(&image, self.size, self.size, rng)?;
        let image = random_flip_left_right(image, rng);
        let image = random_brightness(image, self.max_brightness_delta, rng);
        let image = random_contrast(image, self.contrast.0, self.contrast.1, rng);
        Ok(per_image_standardization(image))
    }
}

/// Evaluation preprocessing: central crop to `size` x `size` (24), per-image standardization.
#[derive(Debug, Clone)]
pub struct CifarEval {
    /// Side of the square crop.
    pub size: usize,
}

impl Default for CifarEval {
    fn default() -> Self {
        Self { size: 24 }
    }
}

impl Transform for CifarEval {
    fn apply(&self, image: Image, _: &[BoundingBox], _: &mut Rng) -> Result<Image, Cause> {
        Ok(per_image_standardization(crop_or_pad_center(
            &image, self.size, self.size,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn ramp() -> Image {
        Image::from_hwc(
            (0..32 * 32 * 3).map(|v| (v % 256) as f32).collect(),
            32,
            32,
            3,
        )
    }

    #[test]
    fn train_output_is_standardized_24x24() {
        let out = CifarTrain::default()
            .apply(ramp(), &[], &mut Rng::seed_from_u64(3))
            .unwrap();
        assert_eq!(out.shape(), [24, 24, 3]);
        let n = out.data().len() as f32;
        let mean = out.data().iter().sum::<f32>() / n;
        let var = out.data().iter().map(|v| (v - mean).powi(2)).sum::<f32>() / n;
        assert!(
            mean.abs() < 1e-4 && (var - 1.0).abs() < 1e-3,
            "mean {mean} var {var}"
        );
    }

    #[test]
    fn same_seed_same_distortion() {
        let t = CifarTrain::default();
        let a = t.apply(ramp(), &[], &mut Rng::seed_from_u64(9)).unwrap();
        let b = t.apply(ramp(), &[], &mut Rng::seed_from_u64(9)).unwrap();
        let c = t.apply(ramp(), &[], &mut Rng::seed_from_u64(10)).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn eval_is_center_crop_then_standardization() {
        let img = ramp();
        let out = CifarEval::default()
            .apply(img.clone(), &[], &mut Rng::seed_from_u64(0))
            .unwrap();
        let want = per_image_standardization(crate::transforms::crop(&img, 4, 4, 24, 24));
        assert_eq!(out, want);
    }
}
