//! The TF Inception trainer's preprocessing (`inception/image_processing.py`).

use rand::RngExt;

use super::{
    DistortedBoxConfig, ResizeMethod, Rng, Transform, adjust_brightness, central_crop, crop,
    random_contrast, random_flip_left_right, random_saturation_and_hue, resize,
    sample_distorted_box,
};
use crate::format::BoundingBox;
use crate::image::Image;

/// Training distortions, on an RGB image in [0, 1]: a distorted crop
/// ([`sample_distorted_box`]), resize to `size` x `size` with one of the four methods, random
/// left-right flip, colour distortion (brightness 32/255, saturation 0.5 to 1.5, hue 0.2,
/// contrast 0.5 to 1.5, in one of two orders), clip to [0, 1], scale to [-1, 1].
///
/// TF picks the resize method and the colour order by reader thread index; here they are
/// drawn per example from the seeded generator, the same choices in the same proportions,
/// but independent of the thread count so that runs repeat.
#[derive(Debug, Clone)]
pub struct InceptionTrain {
    /// Side of the output.
    pub size: usize,
    /// The distorted crop's constraints.
    pub crop: DistortedBoxConfig,
    /// Largest brightness change.
    pub max_brightness_delta: f32,
    /// Saturation factor range.
    pub saturation: (f32, f32),
    /// Largest hue rotation.
    pub max_hue_delta: f32,
    /// Contrast factor range.
    pub contrast: (f32, f32),
}

impl InceptionTrain {
    /// TF's settings for `size` x `size` outputs (299 for Inception v3).
    pub fn new(size: usize) -> Self {
        Self {
            size,
            crop: DistortedBoxConfig::default(),
            max_brightness_delta: 32.0 / 255.0,
            saturation: (0.5, 1.5),
            max_hue_delta: 0.2,
            contrast: (0.5, 1.5),
        }
    }

    fn distort_color(&self, image: Image, rng: &mut Rng) -> Image {
        let delta = rng.random_range(-self.max_brightness_delta..=self.max_brightness_delta);
        let image = adjust_brightness(image, delta);
        let contrast = self.contrast;
        // TF's two orders both put saturation right before hue: one HSV round trip does both.
        if rng.random_bool(0.5) {
            let image = random_saturation_and_hue(image, self.saturation, self.max_hue_delta, rng);
            random_contrast(image, contrast.0, contrast.1, rng)
        } else {
            let image = random_contrast(image, contrast.0, contrast.1, rng);
            random_saturation_and_hue(image, self.saturation, self.max_hue_delta, rng)
        }
    }
}

impl Transform for InceptionTrain {
    fn apply(&self, image: Image, boxes: &[BoundingBox], rng: &mut Rng) -> Result<Image, String> {
        let window = sample_distorted_box(image.height(), image.width(), boxes, &self.crop, rng);
        let image = crop(&image, window.top, window.left, window.height, window.width);
        let method = ResizeMethod::ALL[rng.random_range(0..ResizeMethod::ALL.len())];
        let image = resize(&image, self.size, self.size, method);
        let image = random_flip_left_right(image, rng);
        let image = self.distort_color(image, rng);
        Ok(to_signed_unit(image, true))
    }
}

/// Evaluation preprocessing: central crop of `central_fraction` (0.875) of each side,
/// bilinear resize to `size` x `size`, scale to [-1, 1].
#[derive(Debug, Clone)]
pub struct InceptionEval {
    /// Side of the output.
    pub size: usize,
    /// Fraction of each side kept by the central crop.
    pub central_fraction: f64,
}

impl InceptionEval {
    /// TF's settings for `size` x `size` outputs.
    pub fn new(size: usize) -> Self {
        Self {
            size,
            central_fraction: 0.875,
        }
    }
}

impl Transform for InceptionEval {
    fn apply(&self, image: Image, _: &[BoundingBox], _: &mut Rng) -> Result<Image, String> {
        let image = central_crop(&image, self.central_fraction);
        let image = resize(&image, self.size, self.size, ResizeMethod::Bilinear);
        Ok(to_signed_unit(image, false))
    }
}

/// `(x - 0.5) * 2`: [0, 1] to [-1, 1], clipping to [0, 1] first when asked.
fn to_signed_unit(mut image: Image, clip: bool) -> Image {
    for v in image.data_mut() {
        let x = if clip { v.clamp(0.0, 1.0) } else { *v };
        *v = (x - 0.5) * 2.0;
    }
    image
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn photo(h: usize, w: usize) -> Image {
        let data = (0..h * w * 3)
            .map(|i| ((i * 37) % 255) as f32 / 255.0)
            .collect();
        Image::from_hwc(data, h, w, 3)
    }

    #[test]
    fn train_output_is_sized_and_in_signed_unit_range() {
        let t = InceptionTrain::new(31);
        let mut rng = Rng::seed_from_u64(5);
        for _ in 0..20 {
            let out = t.apply(photo(40, 57), &[], &mut rng).unwrap();
            assert_eq!(out.shape(), [31, 31, 3]);
            assert!(out.data().iter().all(|v| (-1.0..=1.0).contains(v)));
        }
    }

    #[test]
    fn eval_is_central_crop_bilinear_resize_and_scaling() {
        let img = photo(16, 16);
        let out = InceptionEval::new(8)
            .apply(img.clone(), &[], &mut Rng::seed_from_u64(0))
            .unwrap();
        // 16 at 0.875: margin int(1.0) = 1 -> 14x14, then bilinear to 8x8.
        let want = resize(&crop(&img, 1, 1, 14, 14), 8, 8, ResizeMethod::Bilinear);
        let want: Vec<f32> = want.data().iter().map(|v| (v - 0.5) * 2.0).collect();
        assert_eq!(out.data(), want.as_slice());
    }

    #[test]
    fn seeded_like_every_transform() {
        let t = InceptionTrain::new(16);
        let a = t
            .apply(photo(30, 30), &[], &mut Rng::seed_from_u64(1))
            .unwrap();
        let b = t
            .apply(photo(30, 30), &[], &mut Rng::seed_from_u64(1))
            .unwrap();
        assert_eq!(a, b);
    }
}
