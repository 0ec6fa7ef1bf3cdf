//! The TF Inception trainer's preprocessing (`inception/image_processing.py`).
//!
//! Both transforms read the source image in place, 8-bit as decoded or `f32`: the crop is a
//! window the resize reads (no cropped copy, bytes converted to float only where a tap reads
//! them), the flip is the resize writing its columns in mirror order, and the colour ops run
//! on the CHW planes the batch takes (no layout change afterwards). The values are those of
//! the separate ops in TF's order (`crop`, `resize`, `flip_left_right`, `adjust_*`), as the
//! tests check, with the same draws from the generator.

use std::cell::{Cell, RefCell};

use rand::RngExt;

use super::color::{channel_means, contrast, contrast_planes_between};
use super::hsv::saturation_and_hue_planes_between;
use super::{
    DistortedBoxConfig, ResizeMethod, Rng, Source, Transform, Value, Window, central_window,
    resize_window, sample_distorted_box,
};
use crate::bounding_box::BoundingBox;
use crate::buffer_pool::BufferPool;
use crate::codec::decode_rgb8;
use crate::error::Cause;
use crate::image::{Image, Planes, Rgb8};

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
    /// The output planes' memory, back from the batches.
    buffers: BufferPool,
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
            buffers: planes_pool(),
        }
    }

    fn distort<P: Value>(
        &self,
        source: &Source<P>,
        height: usize,
        boxes: &[BoundingBox],
        rng: &mut Rng,
    ) -> Planes {
        let window = sample_distorted_box(height, source.width, boxes, &self.crop, rng);
        let method = ResizeMethod::ALL[rng.random_range(0..ResizeMethod::ALL.len())];
        let flip = rng.random_bool(0.5);
        let mut planes = resize_planes(source, window, self.size, method, flip, &self.buffers);
        self.distort_color(&mut planes, rng);
        planes
    }

    /// The colour half of the distortions, on resized planes in [0, 1]: brightness, then
    /// saturation and hue and contrast in one of TF's two orders, then clip and scale to
    /// [-1, 1], with TF's values and draws; fused into two or three passes over the planes
    /// (brightness and the clip ride along with the ops beside them).
    pub fn distort_color(&self, planes: &mut Planes, rng: &mut Rng) {
        let delta = rng.random_range(-self.max_brightness_delta..=self.max_brightness_delta);
        let bright = move |v: f32| v + delta;
        let finish = move |v: f32| signed_unit(v.clamp(0.0, 1.0));
        // TF's two orders both put saturation right before hue: one HSV round trip does both.
        // Closures over pixels spell out their three values: `[f32; 3]::map` stops the loops
        // from vectorizing.
        if rng.random_bool(0.5) {
            let (factor, hue) = self.draw_saturation_and_hue(rng);
            let brighten = move |[r, g, b]: [f32; 3]| [bright(r), bright(g), bright(b)];
            saturation_and_hue_planes_between(planes, factor, hue, brighten, |rgb| rgb);
            let contrast = rng.random_range(self.contrast.0..=self.contrast.1);
            contrast_planes_between(planes, contrast, |v| v, finish);
        } else {
            let factor = rng.random_range(self.contrast.0..=self.contrast.1);
            let [mr, mg, mb]: [f32; 3] = channel_means(planes, bright).try_into().expect("RGB");
            let (saturation, hue) = self.draw_saturation_and_hue(rng);
            let brighten_and_contrast = move |[r, g, b]: [f32; 3]| {
                [
                    contrast(bright(r), mr, factor),
                    contrast(bright(g), mg, factor),
                    contrast(bright(b), mb, factor),
                ]
            };
            let finish = move |[r, g, b]: [f32; 3]| [finish(r), finish(g), finish(b)];
            saturation_and_hue_planes_between(
                planes,
                saturation,
                hue,
                brighten_and_contrast,
                finish,
            );
        }
    }

    /// The saturation factor and hue delta, drawn in that order.
    fn draw_saturation_and_hue(&self, rng: &mut Rng) -> (f32, f32) {
        let factor = rng.random_range(self.saturation.0..=self.saturation.1);
        let delta = rng.random_range(-self.max_hue_delta..=self.max_hue_delta);
        (factor, delta)
    }
}

impl Transform for InceptionTrain {
    fn apply(&self, image: Image, boxes: &[BoundingBox], rng: &mut Rng) -> Result<Image, Cause> {
        let planes = self.distort(&source_of(&image), image.height(), boxes, rng);
        Ok(planes.to_image())
    }

    fn apply_encoded(
        &self,
        encoded: &[u8],
        boxes: &[BoundingBox],
        rng: &mut Rng,
    ) -> Result<Planes, Cause> {
        with_decoded(encoded, decode_rgb8, |rgb| {
            self.distort(&source_of_rgb8(rgb), rgb.height, boxes, rng)
        })
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
    /// The output planes' memory, back from the batches.
    buffers: BufferPool,
}

impl InceptionEval {
    /// TF's settings for `size` x `size` outputs.
    pub fn new(size: usize) -> Self {
        Self {
            size,
            central_fraction: 0.875,
            buffers: planes_pool(),
        }
    }

    fn prepare<P: Value>(&self, source: &Source<P>, height: usize) -> Planes {
        let window = central_window(height, source.width, self.central_fraction);
        let bilinear = ResizeMethod::Bilinear;
        let mut planes = resize_planes(source, window, self.size, bilinear, false, &self.buffers);
        planes
            .data_mut()
            .iter_mut()
            .for_each(|v| *v = signed_unit(*v));
        planes
    }
}

impl Transform for InceptionEval {
    fn apply(&self, image: Image, _: &[BoundingBox], _: &mut Rng) -> Result<Image, Cause> {
        Ok(self.prepare(&source_of(&image), image.height()).to_image())
    }

    fn apply_encoded(
        &self,
        encoded: &[u8],
        _: &[BoundingBox],
        _: &mut Rng,
    ) -> Result<Planes, Cause> {
        with_decoded(encoded, decode_rgb8, |rgb| {
            self.prepare(&source_of_rgb8(rgb), rgb.height)
        })
    }
}

fn source_of(image: &Image) -> Source<'_, f32> {
    Source {
        values: image.data(),
        width: image.width(),
        channels: image.channels(),
    }
}

fn source_of_rgb8(rgb: &Rgb8) -> Source<'_, u8> {
    Source {
        values: &rgb.pixels,
        width: rgb.width,
        channels: 3,
    }
}

thread_local! {
    /// Each reader thread's decoded image, reused from image to image.
    static DECODED: RefCell<Rgb8> = RefCell::default();
    /// Each reader thread's resize scratch (the width pass), reused likewise.
    static SCRATCH: Cell<Vec<f32>> = Cell::default();
}

/// Decodes `encoded` by `decode` into this thread's buffer and runs `f` on it.
pub(super) fn with_decoded(
    encoded: &[u8],
    decode: fn(&[u8], &mut Rgb8) -> Result<(), Cause>,
    f: impl FnOnce(&Rgb8) -> Planes,
) -> Result<Planes, Cause> {
    DECODED.with_borrow_mut(|rgb| {
        decode(encoded, rgb)?;
        Ok(f(rgb))
    })
}

/// A pool for the output planes of one transform: as many spare planes as a large batch has
/// images, since the batcher hands back a batch's planes at once (64 at 299x299: 69 MB).
pub(super) fn planes_pool() -> BufferPool {
    BufferPool::new(64)
}

/// `window` of `source` resized to `size` x `size` planes from `buffers`, with this thread's
/// scratch.
fn resize_planes<P: Value>(
    source: &Source<P>,
    window: Window,
    size: usize,
    method: ResizeMethod,
    flip: bool,
    buffers: &BufferPool,
) -> Planes {
    let mut planes = Planes::reused_in(buffers, source.channels, size, size);
    let mut scratch = SCRATCH.take();
    resize_window(source, window, method, flip, &mut planes, &mut scratch);
    SCRATCH.set(scratch);
    planes
}

/// `(x - 0.5) * 2`: [0, 1] to [-1, 1].
fn signed_unit(x: f32) -> f32 {
    (x - 0.5) * 2.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transforms::{crop, resize};
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

    /// The distortions as separate ops on the decoded image, each pinned by its own tests,
    /// drawing from the generator in TF's order.
    fn separate_ops(
        t: &InceptionTrain,
        image: &Image,
        boxes: &[BoundingBox],
        rng: &mut Rng,
    ) -> Image {
        use crate::transforms::*;
        let w = sample_distorted_box(image.height(), image.width(), boxes, &t.crop, rng);
        let image = crop(image, w.top, w.left, w.height, w.width);
        let method = ResizeMethod::ALL[rng.random_range(0..4)];
        let image = resize(&image, t.size, t.size, method);
        let image = random_flip_left_right(image, rng);
        let image = random_brightness(image, t.max_brightness_delta, rng);
        let (lo, hi) = t.contrast;
        let image = if rng.random_bool(0.5) {
            let image = random_saturation_and_hue(image, t.saturation, t.max_hue_delta, rng);
            random_contrast(image, lo, hi, rng)
        } else {
            let image = random_contrast(image, lo, hi, rng);
            random_saturation_and_hue(image, t.saturation, t.max_hue_delta, rng)
        };
        let data = image
            .data()
            .iter()
            .map(|v| (v.clamp(0.0, 1.0) - 0.5) * 2.0)
            .collect();
        Image::from_hwc(data, t.size, t.size, 3)
    }

    fn worst_difference(a: &[f32], b: &[f32]) -> f32 {
        assert_eq!(a.len(), b.len());
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f32::max)
    }

    #[test]
    fn train_equals_the_separate_ops_in_tf_order() {
        // Both colour orders, all four resize methods, flips, up- and downscaling: 40 seeds.
        let t = InceptionTrain::new(23);
        let object = BoundingBox {
            ymin: 0.2,
            xmin: 0.1,
            ymax: 0.9,
            xmax: 0.6,
        };
        for seed in 0..40 {
            let image = photo(30 + seed as usize % 7, 41);
            let want = separate_ops(&t, &image, &[object], &mut Rng::seed_from_u64(seed));
            let got = t
                .apply(image, &[object], &mut Rng::seed_from_u64(seed))
                .unwrap();
            // The contrast means are summed in another order: last-bit differences only.
            let worst = worst_difference(got.data(), want.data());
            assert!(worst < 1e-5, "seed {seed}: {worst}");
        }
    }

    #[test]
    fn encoded_input_gives_what_the_decoded_image_gives() {
        let image = photo(37, 52);
        let png = crate::codec::encode_png(&image);
        let jpeg = crate::codec::encode_jpeg(&image, 90);
        for t in [
            &InceptionTrain::new(29) as &dyn Transform,
            &InceptionEval::new(29),
        ] {
            for bytes in [&png, &jpeg] {
                let decoded = crate::codec::decode_image(bytes).unwrap();
                let want = t.apply(decoded, &[], &mut Rng::seed_from_u64(3)).unwrap();
                let got = t
                    .apply_encoded(bytes, &[], &mut Rng::seed_from_u64(3))
                    .unwrap();
                assert_eq!(got.shape(), [3, 29, 29]);
                assert_eq!(got.data(), Planes::from(want).data());
            }
        }
        let err =
            InceptionTrain::new(8).apply_encoded(&jpeg[..40], &[], &mut Rng::seed_from_u64(0));
        assert!(err.unwrap_err().to_string().contains("corrupt image"));
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
