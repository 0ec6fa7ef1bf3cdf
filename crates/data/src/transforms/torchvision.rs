//! torchvision's ImageNet preprocessing, the input its pretrained weights (ResNet's among
//! them) expect: evaluation as the weights' own `transforms()` preset (`ImageClassification`:
//! resize, center crop, normalize) and training as torchvision's reference recipe
//! (`RandomResizedCrop`, `RandomHorizontalFlip`, normalize).
//!
//! As torchvision runs them on the PIL images its datasets load: JPEGs decoded as Pillow
//! decodes them ([`decode_rgb8_as_pillow`]: libjpeg's accurate integer DCT, Pillow's CMYK),
//! resized by Pillow's antialiased bilinear filter on bytes ([`pil_resize_bilinear`]), then
//! scaled to [0, 1] and normalized by ImageNet's mean and deviation in `f32`. The tests compare
//! against files torchvision wrote.
//!
//! Those values come from [`Transform::apply_encoded`], which decodes as Pillow does. An image
//! handed to [`Transform::apply`] was decoded already, by [`decode_image`] (TF's fast DCT, as
//! the Inception pipeline decodes), and its JPEG pixels may differ from Pillow's by a little.
//!
//! [`decode_image`]: crate::codec::decode_image

use rand::RngExt;

use super::inception_preprocessing::{planes_pool, with_decoded};
use super::pil_resize::{PilFilter, pil_resize_bilinear, pil_resize_window_by};
use super::{Rng, Transform, Window};
use crate::bounding_box::BoundingBox;
use crate::buffer_pool::BufferPool;
use crate::codec::decode_rgb8_as_pillow;
use crate::error::Cause;
use crate::image::{Image, Planes, Rgb8, unit};

/// torchvision's `Normalize`: each channel's value in [0, 1] becomes `(value - mean) / std`, in
/// `f32`; the planes come in BGR order where `reverse_channels` (Keras's "caffe" mode).
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Normalize {
    /// Each channel's mean (RGB).
    pub mean: [f32; 3],
    /// Each channel's standard deviation (RGB).
    pub std: [f32; 3],
    /// Whether the planes come out blue first, as Keras's ResNet50 takes them.
    pub reverse_channels: bool,
}

impl Normalize {
    /// ImageNet's statistics, as torchvision's presets normalize by them: Python's doubles
    /// rounded to `f32`, as `torch.tensor` rounds them.
    pub const IMAGENET: Self = Self {
        mean: [0.485f64 as f32, 0.456f64 as f32, 0.406f64 as f32],
        std: [0.229f64 as f32, 0.224f64 as f32, 0.225f64 as f32],
        reverse_channels: false,
    };

    /// Mean and deviation one half: values in [-1, 1]. What torchvision's Inception v3 weights
    /// see once its `transform_input` has undone ImageNet's statistics (to within an `f32`
    /// rounding), and the range of TF's Inception preprocessing.
    pub const SIGNED_UNIT: Self = Self {
        mean: [0.5; 3],
        std: [0.5; 3],
        reverse_channels: false,
    };

    /// Keras's "caffe" mode (`keras.applications.resnet50.preprocess_input`): BGR, ImageNet's
    /// mean pixel subtracted from values in 0-255, to within an `f32` rounding of the value
    /// (its division by 1/255; [`KerasImageNetEval`](super::KerasImageNetEval) subtracts
    /// exactly).
    pub const CAFFE: Self = Self {
        mean: [123.68 / 255.0, 116.779 / 255.0, 103.939 / 255.0],
        std: [1.0 / 255.0; 3],
        reverse_channels: true,
    };

    /// Mean 0 and deviation 1/255: the values in 0-255 (to within an `f32` rounding), which
    /// keras.applications' EfficientNets take and normalize themselves.
    pub const PIXELS: Self = Self {
        mean: [0.0; 3],
        std: [1.0 / 255.0; 3],
        reverse_channels: false,
    };

    /// Another mean and deviation per channel (RGB, the planes in RGB order).
    pub fn new(mean: [f32; 3], std: [f32; 3]) -> Self {
        Self {
            mean,
            std,
            reverse_channels: false,
        }
    }
}

/// Evaluation preprocessing as torchvision's `ImageClassification` preset: the shorter side
/// resized to `resize_size` (the longer in proportion, truncated), the central `crop_size`
/// square, normalized ([`Normalize::IMAGENET`] unless set otherwise).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TorchvisionEval {
    /// The shorter side after the resize: 256 for a crop of 224, as the ResNet weights
    /// `IMAGENET1K_V1` (232 for `IMAGENET1K_V2`).
    pub resize_size: usize,
    /// Side of the output.
    pub crop_size: usize,
    /// The normalization of the values in [0, 1].
    pub normalize: Normalize,
    /// Pillow's filter of the resize: bilinear (torchvision's default), bicubic for its
    /// EfficientNet weights.
    pub interpolation: PilFilter,
    buffers: BufferPool,
}

impl TorchvisionEval {
    /// A crop of `crop_size` from a bilinear resize to `crop_size * 256 / 224` (256 for 224).
    pub fn new(crop_size: usize) -> Self {
        Self {
            resize_size: crop_size * 256 / 224,
            crop_size,
            normalize: Normalize::IMAGENET,
            interpolation: PilFilter::Bilinear,
            buffers: planes_pool(),
        }
    }

    /// The preset of torchvision's Inception v3 weights (`Inception_V3_Weights.IMAGENET1K_V1`)
    /// for `crop_size` (299 there): the shorter side resized to `crop_size * 342 / 299`, values
    /// in [-1, 1] ([`Normalize::SIGNED_UNIT`]), which is what its network sees after its
    /// `transform_input`.
    pub fn inception_v3(crop_size: usize) -> Self {
        Self::new(crop_size)
            .with_resize_size(crop_size * 342 / 299)
            .with_normalize(Normalize::SIGNED_UNIT)
    }

    /// Resizes the shorter side to `resize_size` instead.
    ///
    /// # Panics
    /// If `resize_size` is less than the crop.
    pub fn with_resize_size(mut self, resize_size: usize) -> Self {
        assert!(
            resize_size >= self.crop_size,
            "a resize to {resize_size} cannot give a crop of {}",
            self.crop_size
        );
        self.resize_size = resize_size;
        self
    }

    /// Normalizes by `normalize` instead (e.g. [`Normalize::SIGNED_UNIT`] for torchvision's
    /// Inception v3 weights, whose preset also resizes to 342 for a crop of 299).
    pub fn with_normalize(mut self, normalize: Normalize) -> Self {
        self.normalize = normalize;
        self
    }

    /// Resizes by Pillow's `interpolation` instead (`PilFilter::Bicubic` for torchvision's
    /// EfficientNet weights, whose presets resize so).
    pub fn with_interpolation(mut self, interpolation: PilFilter) -> Self {
        self.interpolation = interpolation;
        self
    }

    fn prepare(&self, image: &Rgb8) -> Planes {
        let (height, width) = shorter_side_to(image.height, image.width, self.resize_size);
        let window = center_window(height, width, self.crop_size);
        let cropped = pil_resize_window_by(image, height, width, window, self.interpolation);
        normalized(&cropped, false, self.normalize, &self.buffers)
    }
}

impl Transform for TorchvisionEval {
    /// `image`'s values are taken as bytes over 255 (what a decoder gives) and rounded back.
    fn apply(&self, image: Image, _: &[BoundingBox], _: &mut Rng) -> Result<Image, Cause> {
        Ok(self.prepare(&bytes_of(&image)?).to_image())
    }

    fn apply_encoded(
        &self,
        encoded: &[u8],
        _: &[BoundingBox],
        _: &mut Rng,
    ) -> Result<Planes, Cause> {
        with_decoded(encoded, decode_rgb8_as_pillow, |rgb| self.prepare(rgb))
    }
}

/// Training preprocessing as torchvision's reference recipe: a random crop of 8% to 100% of
/// the area with an aspect ratio from 3/4 to 4/3 (drawn as `RandomResizedCrop` draws it, from
/// this crate's generator), resized to `size` x `size`, flipped left-right with probability
/// one half, normalized ([`Normalize::IMAGENET`] unless set otherwise).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TorchvisionTrain {
    /// Side of the output.
    pub size: usize,
    /// The crop's share of the image's area, drawn uniformly from this range.
    pub scale: (f64, f64),
    /// The crop's width over its height, drawn log-uniformly from this range.
    pub ratio: (f64, f64),
    /// The normalization of the values in [0, 1].
    pub normalize: Normalize,
    buffers: BufferPool,
}

impl TorchvisionTrain {
    /// torchvision's defaults for `size` x `size` outputs.
    pub fn new(size: usize) -> Self {
        Self {
            size,
            scale: (0.08, 1.0),
            ratio: (3.0 / 4.0, 4.0 / 3.0),
            normalize: Normalize::IMAGENET,
            buffers: planes_pool(),
        }
    }

    /// Normalizes by `normalize` instead (e.g. [`Normalize::CAFFE`] to fine-tune Keras's
    /// ResNet50).
    pub fn with_normalize(mut self, normalize: Normalize) -> Self {
        self.normalize = normalize;
        self
    }

    fn prepare(&self, image: &Rgb8, rng: &mut Rng) -> Planes {
        let window = random_resized_window(image.height, image.width, self, rng);
        let resized = resized_crop(image, window, self.size, self.size);
        let flip = rng.random::<f64>() < 0.5;
        normalized(&resized, flip, self.normalize, &self.buffers)
    }
}

impl Transform for TorchvisionTrain {
    /// `image`'s values are taken as bytes over 255 (what a decoder gives) and rounded back.
    fn apply(&self, image: Image, _: &[BoundingBox], rng: &mut Rng) -> Result<Image, Cause> {
        Ok(self.prepare(&bytes_of(&image)?, rng).to_image())
    }

    fn apply_encoded(
        &self,
        encoded: &[u8],
        _: &[BoundingBox],
        rng: &mut Rng,
    ) -> Result<Planes, Cause> {
        with_decoded(encoded, decode_rgb8_as_pillow, |rgb| self.prepare(rgb, rng))
    }
}

/// The size of a `height` x `width` image whose shorter side is resized to `short`, as
/// torchvision's `Resize(int)`: the longer side `int(short * long / short_side)`.
pub fn shorter_side_to(height: usize, width: usize, short: usize) -> (usize, usize) {
    let long_of = |long: usize, short_side: usize| (short * long) as f64 / short_side as f64;
    match width <= height {
        true => (long_of(height, width) as usize, short),
        false => (short, long_of(width, height) as usize),
    }
}

/// torchvision's `center_crop` window of `side` x `side`: offsets `round((size - side) / 2)`,
/// rounded half to even as Python's `round`.
///
/// # Panics
/// If the image is smaller than the crop.
pub fn center_window(height: usize, width: usize, side: usize) -> Window {
    assert!(
        side <= height && side <= width,
        "a {side}x{side} crop of a {height}x{width} image"
    );
    let offset = |size: usize| ((size - side) as f64 / 2.0).round_ties_even() as usize;
    Window {
        top: offset(height),
        left: offset(width),
        height: side,
        width: side,
    }
}

/// `RandomResizedCrop.get_params`: up to 10 draws of an area share and a log aspect ratio,
/// the first whose rounded sides fit taken at a uniform position; else the whole image,
/// cropped to the nearest allowed ratio, centered.
pub fn random_resized_window(
    height: usize,
    width: usize,
    train: &TorchvisionTrain,
    rng: &mut Rng,
) -> Window {
    let area = (height * width) as f64;
    let (log_lo, log_hi) = (train.ratio.0.ln(), train.ratio.1.ln());
    for _ in 0..10 {
        let target_area = area * rng.random_range(train.scale.0..=train.scale.1);
        let aspect = rng.random_range(log_lo..=log_hi).exp();
        let w = (target_area * aspect).sqrt().round_ties_even() as usize;
        let h = (target_area / aspect).sqrt().round_ties_even() as usize;
        if (1..=width).contains(&w) && (1..=height).contains(&h) {
            let top = rng.random_range(0..=height - h);
            let left = rng.random_range(0..=width - w);
            return Window {
                top,
                left,
                height: h,
                width: w,
            };
        }
    }
    let in_ratio = width as f64 / height as f64;
    let (lo, hi) = train.ratio;
    let (h, w) = if in_ratio < lo.min(hi) {
        (
            (width as f64 / lo.min(hi)).round_ties_even() as usize,
            width,
        )
    } else if in_ratio > lo.max(hi) {
        (
            height,
            (height as f64 * lo.max(hi)).round_ties_even() as usize,
        )
    } else {
        (height, width)
    };
    Window {
        top: (height - h) / 2,
        left: (width - w) / 2,
        height: h,
        width: w,
    }
}

/// `window` of `image` resized to `height` x `width`, as torchvision's `F.resized_crop` on a
/// PIL image: cropped first, so that the filter reads nothing outside the window.
pub fn resized_crop(image: &Rgb8, window: Window, height: usize, width: usize) -> Rgb8 {
    pil_resize_bilinear(&crop_bytes(image, window), height, width)
}

/// `window` of `image`, copied.
fn crop_bytes(image: &Rgb8, window: Window) -> Rgb8 {
    assert!(
        window.top + window.height <= image.height && window.left + window.width <= image.width,
        "{window:?} outside a {}x{} image",
        image.height,
        image.width
    );
    let row_bytes = window.width * 3;
    let mut pixels = Vec::with_capacity(window.height * row_bytes);
    for y in window.top..window.top + window.height {
        let start = (y * image.width + window.left) * 3;
        pixels.extend_from_slice(&image.pixels[start..start + row_bytes]);
    }
    Rgb8 {
        pixels,
        height: window.height,
        width: window.width,
    }
}

/// `image` as CHW planes from `buffers`, mirrored left-right if `flip`, each value
/// `(byte / 255 - mean) / std` in `f32`, in torchvision's order of operations; BGR where
/// `normalize` reverses the channels.
fn normalized(image: &Rgb8, flip: bool, normalize: Normalize, buffers: &BufferPool) -> Planes {
    let width = image.width;
    let mut planes = Planes::reused_in(buffers, 3, image.height, width);
    for (plane_index, plane) in planes.rgb_mut().into_iter().enumerate() {
        let c = match normalize.reverse_channels {
            true => 2 - plane_index,
            false => plane_index,
        };
        let (mean, std) = (normalize.mean[c], normalize.std[c]);
        let rows = plane
            .chunks_exact_mut(width)
            .zip(image.pixels.chunks_exact(width * 3));
        for (out_row, row) in rows {
            for (x, out) in out_row.iter_mut().enumerate() {
                let from = if flip { width - 1 - x } else { x };
                *out = (unit(row[from * 3 + c]) - mean) / std;
            }
        }
    }
    planes
}

/// An image in [0, 1] back to the bytes it was decoded from.
pub(super) fn bytes_of(image: &Image) -> Result<Rgb8, Cause> {
    if image.channels() != 3 {
        return Err(format!("an image of {} channels, not RGB", image.channels()).into());
    }
    Ok(Rgb8 {
        pixels: image.to_bytes(),
        height: image.height(),
        width: image.width(),
    })
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    /// Python's `round` takes halves to the even side: a margin of 16.5 is 16, of 17.5 is 18.
    /// Keras's "caffe" values, BGR, to within an `f32` rounding.
    #[test]
    fn caffe_normalization_is_bgr_less_the_mean_pixel() {
        let image = Rgb8 {
            pixels: vec![10, 20, 30, 250, 0, 128],
            height: 1,
            width: 2,
        };
        let planes = normalized(&image, false, Normalize::CAFFE, &planes_pool()).to_image();
        let want = [
            [30.0 - 103.939, 128.0 - 103.939],
            [20.0 - 116.779, 0.0 - 116.779],
            [10.0 - 123.68, 250.0 - 123.68],
        ];
        for (c, row) in want.iter().enumerate() {
            for (x, &want) in row.iter().enumerate() {
                let got = planes.get(0, x, c);
                assert!((got - want).abs() < 2e-5, "{c} {x}: {got} {want}");
            }
        }
    }

    #[test]
    fn a_center_crop_rounds_half_margins_to_even() {
        let window = center_window(97, 99, 64);
        assert_eq!((window.top, window.left), (16, 18));
    }

    /// torchvision's Inception v3 preset: a resize to 342 for 299, values in [-1, 1] (white
    /// 1, black -1).
    #[test]
    fn the_inception_preset_resizes_to_342_and_scales_to_signed_unit() {
        let eval = TorchvisionEval::inception_v3(299);
        assert_eq!((eval.resize_size, eval.crop_size), (342, 299));
        let (height, width) = (400, 300);
        let pixels = (0..height * width * 3)
            .map(|i| if i / 3 % width < width / 2 { 0 } else { 255 })
            .collect();
        let image = Rgb8 {
            pixels,
            height,
            width,
        };
        let planes = eval.prepare(&image);
        let row = &planes.data()[..299];
        assert_eq!((row[0], row[298]), (-1.0, 1.0));
    }

    /// A 10x1000 strip has no crop of 8% or more of its area with a ratio up to 4/3 and a
    /// height of at most 10, so every draw fails: the fallback is the strip's whole height,
    /// `round(10 * 4/3)` = 13 columns wide, centered (`(1000 - 13) // 2`).
    #[test]
    fn a_crop_that_never_fits_falls_back_to_the_nearest_ratio_centered() {
        let train = TorchvisionTrain::new(8);
        let mut rng = Rng::seed_from_u64(1);
        let window = random_resized_window(10, 1000, &train, &mut rng);
        assert_eq!(
            (window.top, window.left, window.height, window.width),
            (0, 493, 10, 13)
        );
    }

    #[test]
    fn random_crops_stay_inside_with_the_drawn_area_and_ratio() {
        let train = TorchvisionTrain::new(8);
        let mut rng = Rng::seed_from_u64(2);
        let (height, width) = (375, 500);
        for _ in 0..1000 {
            let w = random_resized_window(height, width, &train, &mut rng);
            assert!(
                w.top + w.height <= height && w.left + w.width <= width,
                "{w:?}"
            );
            let share = (w.height * w.width) as f64 / (height * width) as f64;
            let ratio = w.width as f64 / w.height as f64;
            // Rounding the sides moves both a little from what was drawn.
            assert!((0.07..=1.0).contains(&share), "{w:?}: {share}");
            assert!((0.7..=1.4).contains(&ratio), "{w:?}: {ratio}");
        }
    }

    /// Training output: the size asked for, and flipped about half the time (an image that
    /// darkens to the right: whether a row's first value is below its last tells).
    #[test]
    fn training_flips_about_half_the_crops() {
        let (height, width) = (60, 80);
        let pixels = (0..height * width)
            .flat_map(|i| [(255 - (i % width) * 3) as u8; 3])
            .collect();
        let image = Rgb8 {
            pixels,
            height,
            width,
        };
        let train = TorchvisionTrain::new(16);
        let mut rng = Rng::seed_from_u64(3);
        let mut flipped = 0;
        for _ in 0..200 {
            let planes = train.prepare(&image, &mut rng);
            assert_eq!(planes.shape(), [3, 16, 16]);
            let row = &planes.data()[..16];
            flipped += usize::from(row[0] < row[15]);
        }
        assert!((70..=130).contains(&flipped), "{flipped} of 200 flipped");
    }
}
