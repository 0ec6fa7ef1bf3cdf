//! [`KerasImageNetEval`]: the preprocessing keras.applications' documentation gives its ImageNet
//! networks: `keras.utils.load_img(path, target_size=(size, size))`, then the network's
//! `preprocess_input` ([`KerasInputMode`]: "caffe" for ResNet50, "tf" for ResNet50V2, none for
//! the EfficientNets).

use super::inception_preprocessing::{planes_pool, with_decoded};
use super::torchvision::bytes_of;
use super::{Rng, Transform};
use crate::bounding_box::BoundingBox;
use crate::buffer_pool::BufferPool;
use crate::codec::decode_rgb8_as_pillow;
use crate::error::Cause;
use crate::image::{Image, Planes, Rgb8};

/// ImageNet's mean pixel in 0-255, in the BGR order "caffe" mode subtracts it in
/// (Keras's `keras/src/applications/imagenet_utils.py`).
const CAFFE_MEAN_BGR: [f32; 3] = [103.939, 116.779, 123.68];

/// The `mode` of Keras's `preprocess_input` (`keras/src/applications/imagenet_utils.py`): what
/// a network's weights expect of the values in 0-255.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KerasInputMode {
    /// "caffe" (`keras.applications.resnet50.preprocess_input`): the channels reversed to BGR,
    /// ImageNet's mean pixel subtracted.
    Caffe,
    /// "tf" (`keras.applications.resnet_v2.preprocess_input`, also InceptionV3's): `x / 127.5
    /// - 1`, in [-1, 1], RGB.
    Tf,
    /// None (`keras.applications.efficientnet.preprocess_input` passes its input through):
    /// the values in 0-255, RGB, which the EfficientNets normalize themselves.
    Pixels,
}

impl KerasInputMode {
    /// Plane `c` of the network's input from `pixel`, an RGB pixel's bytes, as `f32`
    /// arithmetic in Keras's order of operations.
    fn value(self, pixel: &[u8], c: usize) -> f32 {
        match self {
            // Plane `c` is BGR's `c`: RGB's `2 - c`.
            Self::Caffe => f32::from(pixel[2 - c]) - CAFFE_MEAN_BGR[c],
            Self::Tf => f32::from(pixel[c]) / 127.5 - 1.0,
            Self::Pixels => f32::from(pixel[c]),
        }
    }
}

/// Evaluation preprocessing as Keras's ResNet50 example: the whole image resized to `size` x
/// `size` by Pillow's nearest neighbour (`load_img`'s default interpolation; no crop, the
/// aspect ratio not kept), then the values in 0-255 as [`KerasInputMode`] says, in `f32`
/// (`preprocess_input`). In "caffe" mode, the default, the network's first channel is blue:
/// keras.applications' ResNet50 weights expect that.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct KerasImageNetEval {
    /// Side of the output.
    pub size: usize,
    /// What is done to the values.
    pub mode: KerasInputMode,
    buffers: BufferPool,
}

impl KerasImageNetEval {
    /// Resizes to `size` x `size` (224 for ResNet50), in "caffe" mode (ResNet50's).
    pub fn new(size: usize) -> Self {
        Self {
            size,
            mode: KerasInputMode::Caffe,
            buffers: planes_pool(),
        }
    }

    /// The values as `mode` says instead ([`KerasInputMode::Tf`] for ResNet50V2).
    pub fn with_mode(self, mode: KerasInputMode) -> Self {
        Self { mode, ..self }
    }

    fn prepare(&self, image: &Rgb8) -> Planes {
        let rows = nearest_indices(image.height, self.size);
        let columns = nearest_indices(image.width, self.size);
        let mut planes = Planes::reused_in(&self.buffers, 3, self.size, self.size);
        for (c, plane) in planes.rgb_mut().into_iter().enumerate() {
            for (out_row, &y) in plane.chunks_exact_mut(self.size).zip(&rows) {
                let row = &image.pixels[y * image.width * 3..(y + 1) * image.width * 3];
                for (out, &x) in out_row.iter_mut().zip(&columns) {
                    *out = self.mode.value(&row[x * 3..x * 3 + 3], c);
                }
            }
        }
        planes
    }
}

impl Transform for KerasImageNetEval {
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

/// The source index of each of `output` positions resized from `input` by Pillow's nearest
/// neighbour (`Image.resize` with `NEAREST`, `ImagingScaleAffine` in its
/// `libImaging/Geometry.c`): the centre of output pixel `k` maps to `(k + 0.5) * input /
/// output`, truncated, summed step by step in `f64` as Pillow sums it (a product would round
/// differently at some boundaries).
fn nearest_indices(input: usize, output: usize) -> Vec<usize> {
    let scale = input as f64 / output as f64;
    let mut at = scale * 0.5;
    (0..output)
        .map(|_| {
            // Below `input` but for a rounding of the sum; Pillow would leave such a pixel 0.
            let index = (at as usize).min(input - 1);
            at += scale;
            index
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_indices_are_pillows() {
        // Pillow 13: `Image.resize((n, 1), Image.NEAREST)` of a row 0, 1, 2, ... (an `I`
        // image). Its indices matched these for every input of 1 to 1199 to 1, 3, 4, 7, 224,
        // 299 and 331 (2026-12-03); `(k + 0.5) * scale` as one product differs in 697 of those,
        // as in the last two rows here (product: 0, 0, 0, 1, ... and 0, 1, 2, 4, ...).
        assert_eq!(nearest_indices(4, 2), [1, 3]);
        assert_eq!(nearest_indices(2, 4), [0, 0, 1, 1]);
        assert_eq!(nearest_indices(5, 3), [0, 2, 4]);
        assert_eq!(nearest_indices(7, 1), [3]);
        assert_eq!(nearest_indices(2, 7), [0, 0, 0, 0, 1, 1, 1]);
        assert_eq!(nearest_indices(8, 7), [0, 1, 2, 3, 5, 6, 7]);
    }

    /// A 2x2 image to 4x4: each pixel four times, BGR, less the mean.
    #[test]
    fn planes_are_bgr_less_the_mean() {
        let image = Rgb8 {
            pixels: vec![10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120],
            height: 2,
            width: 2,
        };
        let planes = KerasImageNetEval::new(4).prepare(&image).to_image();
        let blue = [30.0, 60.0, 90.0, 120.0].map(|b: f32| b - 103.939);
        let red = [10.0, 40.0, 70.0, 100.0].map(|r: f32| r - 123.68);
        let at = |c, y, x| planes.get(y, x, c);
        assert_eq!(at(0, 0, 0), blue[0]);
        assert_eq!(at(0, 3, 3), blue[3]);
        assert_eq!(at(0, 1, 2), blue[1]);
        assert_eq!(at(2, 2, 1), red[2]);
        assert_eq!(at(1, 0, 0), 20.0 - 116.779);
    }

    /// "tf" mode: RGB, `x / 127.5 - 1`, as numpy computes it in `float32` (`x /= 127.5; x -=
    /// 1.0`): 0 is -1, 255 is 1, and 10 is `10 / 127.5 - 1` rounded twice.
    #[test]
    fn tf_mode_planes_are_rgb_in_minus_one_to_one() {
        let image = Rgb8 {
            pixels: vec![0, 10, 255, 128, 64, 1],
            height: 1,
            width: 2,
        };
        let eval = KerasImageNetEval::new(2).with_mode(KerasInputMode::Tf);
        let planes = eval.prepare(&image).to_image();
        let at = |c, x| planes.get(0, x, c);
        assert_eq!(
            [at(0, 0), at(1, 0), at(2, 0)],
            [-1.0, 10.0 / 127.5 - 1.0, 1.0]
        );
        assert_eq!(at(0, 1), 128.0f32 / 127.5 - 1.0);
        // numpy: np.float32(1) / np.float32(127.5) - np.float32(1).
        assert_eq!(at(2, 1), -0.99215686);
    }

    /// EfficientNet's: the bytes as they are, RGB.
    #[test]
    fn pixels_mode_planes_are_the_bytes() {
        let image = Rgb8 {
            pixels: vec![0, 10, 255, 128, 64, 1],
            height: 1,
            width: 2,
        };
        let eval = KerasImageNetEval::new(2).with_mode(KerasInputMode::Pixels);
        let planes = eval.prepare(&image).to_image();
        let values: Vec<f32> = (0..2)
            .flat_map(|x| (0..3).map(move |c| (x, c)))
            .map(|(x, c)| planes.get(0, x, c))
            .collect();
        assert_eq!(values, [0.0, 10.0, 255.0, 128.0, 64.0, 1.0]);
    }
}
