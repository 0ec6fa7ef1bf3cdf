//! [`KerasImageNetEval`]: the preprocessing keras.applications' documentation gives its ResNet50
//! for ImageNet: `keras.utils.load_img(path, target_size=(size, size))`, then
//! `keras.applications.resnet50.preprocess_input` ("caffe" mode).

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

/// Evaluation preprocessing as Keras's ResNet50 example: the whole image resized to `size` x
/// `size` by Pillow's nearest neighbour (`load_img`'s default interpolation; no crop, the
/// aspect ratio not kept), its channels reversed to BGR, and ImageNet's mean pixel subtracted
/// from the values in 0-255, in `f32` (`preprocess_input`). The network's first channel is
/// blue: keras.applications' ResNet50 weights expect that.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct KerasImageNetEval {
    /// Side of the output.
    pub size: usize,
    buffers: BufferPool,
}

impl KerasImageNetEval {
    /// Resizes to `size` x `size` (224 for ResNet50).
    pub fn new(size: usize) -> Self {
        Self {
            size,
            buffers: planes_pool(),
        }
    }

    fn prepare(&self, image: &Rgb8) -> Planes {
        let rows = nearest_indices(image.height, self.size);
        let columns = nearest_indices(image.width, self.size);
        let mut planes = Planes::reused_in(&self.buffers, 3, self.size, self.size);
        for (c, plane) in planes.rgb_mut().into_iter().enumerate() {
            // Plane `c` is BGR's `c`: RGB's `2 - c`.
            let (from, mean) = (2 - c, CAFFE_MEAN_BGR[c]);
            for (out_row, &y) in plane.chunks_exact_mut(self.size).zip(&rows) {
                let row = &image.pixels[y * image.width * 3..(y + 1) * image.width * 3];
                for (out, &x) in out_row.iter_mut().zip(&columns) {
                    *out = f32::from(row[x * 3 + from]) - mean;
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
}
