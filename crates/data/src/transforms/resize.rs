//! `tf.image.resize_images` as TF 1.x computes it (`align_corners=False`, no half-pixel
//! centers): output pixel `i` samples input coordinate `i * in / out`.
//!
//! Every method is separable, so each is a list of (input index, weight) taps per output
//! row and per output column, applied along the width, then along the height.

use crate::image::Image;

/// Interpolation methods, in TF's `ResizeMethod` order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResizeMethod {
    /// Linear between the two nearest inputs.
    Bilinear,
    /// The input at the floor of the sampled coordinate.
    NearestNeighbor,
    /// Keys' cubic convolution with a = -0.75 over four inputs (TF's legacy kernel).
    Bicubic,
    /// The average over the input area the output pixel covers.
    Area,
}

impl ResizeMethod {
    /// All four, in TF's order (the Inception trainer picks one per reader by index).
    pub const ALL: [ResizeMethod; 4] = [
        Self::Bilinear,
        Self::NearestNeighbor,
        Self::Bicubic,
        Self::Area,
    ];
}

/// Resizes `image` to `height` x `width`.
pub fn resize(image: &Image, height: usize, width: usize, method: ResizeMethod) -> Image {
    let rows = taps(image.height(), height, method);
    let cols = taps(image.width(), width, method);
    let c = image.channels();
    // Along the width: [in_h, width, c]
    let mut wide = vec![0.0f32; image.height() * width * c];
    for y in 0..image.height() {
        let src = &image.data()[y * image.width() * c..(y + 1) * image.width() * c];
        let dst = &mut wide[y * width * c..(y + 1) * width * c];
        for (x, col) in cols.iter().enumerate() {
            for &(i, w) in col {
                for ch in 0..c {
                    dst[x * c + ch] += w * src[i * c + ch];
                }
            }
        }
    }
    // Along the height: [height, width, c]
    let row_len = width * c;
    let mut out = vec![0.0f32; height * row_len];
    for (y, row) in rows.iter().enumerate() {
        let dst = &mut out[y * row_len..(y + 1) * row_len];
        for &(i, w) in row {
            let src = &wide[i * row_len..(i + 1) * row_len];
            dst.iter_mut().zip(src).for_each(|(d, s)| *d += w * s);
        }
    }
    Image::from_hwc(out, height, width, c)
}

/// For each of `out` output positions, the input indices and weights that make it.
fn taps(size: usize, out: usize, method: ResizeMethod) -> Vec<Vec<(usize, f32)>> {
    let scale = size as f64 / out as f64;
    let last = size - 1;
    (0..out)
        .map(|o| {
            let at = o as f64 * scale;
            let lo = at.floor() as usize;
            let t = (at - at.floor()) as f32;
            match method {
                ResizeMethod::NearestNeighbor => vec![(lo.min(last), 1.0)],
                ResizeMethod::Bilinear => vec![(lo.min(last), 1.0 - t), ((lo + 1).min(last), t)],
                ResizeMethod::Bicubic => {
                    let w = cubic_weights(t);
                    (0..4)
                        .map(|k| ((lo + k).saturating_sub(1).min(last), w[k]))
                        .collect()
                }
                ResizeMethod::Area => {
                    let (start, end) = (at, at + scale);
                    let mut taps: Vec<(usize, f32)> = (start.floor() as usize..end.ceil() as usize)
                        .map(|i| {
                            let overlap = end.min(i as f64 + 1.0) - start.max(i as f64);
                            (i.min(last), (overlap / scale) as f32)
                        })
                        .collect();
                    taps.retain(|&(_, w)| w > 0.0);
                    taps
                }
            }
        })
        .collect()
}

/// Keys' cubic convolution weights (a = -0.75) for the inputs at offsets -1, 0, 1, 2 from the
/// floor of the sampled coordinate, `t` being its fractional part.
fn cubic_weights(t: f32) -> [f32; 4] {
    const A: f32 = -0.75;
    let near = |x: f32| ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0; // |x| <= 1
    let far = |x: f32| ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A; // 1 < |x| < 2
    [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One row, one channel.
    fn row(values: &[f32]) -> Image {
        Image::from_hwc(values.to_vec(), 1, values.len(), 1)
    }

    fn close(a: &[f32], b: &[f32]) {
        assert!(
            a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-5),
            "{a:?} vs {b:?}"
        );
    }

    #[test]
    fn bilinear_upscale_samples_at_i_times_scale() {
        // 4 -> 8: scale 0.5, inputs at 0, .5, 1, 1.5, 2, 2.5, 3, 3.5 (the last clamps).
        let out = resize(&row(&[0.0, 10.0, 20.0, 40.0]), 1, 8, ResizeMethod::Bilinear);
        close(out.data(), &[0.0, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 40.0]);
    }

    #[test]
    fn nearest_takes_the_floor() {
        // 5 -> 2: scale 2.5, inputs at 0 and 2.5 -> 2.
        let out = resize(
            &row(&[1.0, 2.0, 3.0, 4.0, 5.0]),
            1,
            2,
            ResizeMethod::NearestNeighbor,
        );
        close(out.data(), &[1.0, 3.0]);
    }

    #[test]
    fn area_averages_the_covered_inputs() {
        // 3 -> 2: scale 1.5; out 0 covers [0, 1.5): (1*1 + 2*0.5) / 1.5; out 1 covers [1.5, 3).
        let out = resize(&row(&[1.0, 2.0, 4.0]), 1, 2, ResizeMethod::Area);
        close(out.data(), &[(1.0 + 1.0) / 1.5, (2.0 * 0.5 + 4.0) / 1.5]);
    }

    #[test]
    fn bicubic_weights_are_keys_kernel() {
        // At t = 0.5 Keys (a=-0.75) gives -0.09375, 0.59375, 0.59375, -0.09375.
        close(&cubic_weights(0.5), &[-0.09375, 0.59375, 0.59375, -0.09375]);
        close(&cubic_weights(0.0), &[0.0, 1.0, 0.0, 0.0]);
        // 2 -> 4 on [0, 8]: out 1 samples 0.5 with taps at -1 (clamped to 0), 0, 1, 2 (clamped to 1).
        let out = resize(&row(&[0.0, 8.0]), 1, 4, ResizeMethod::Bicubic);
        let w = cubic_weights(0.5);
        close(&out.data()[1..2], &[8.0 * (w[2] + w[3])]);
    }

    #[test]
    fn every_method_keeps_a_constant_image_and_works_in_2d() {
        let img = Image::from_hwc(vec![0.5; 7 * 5 * 3], 7, 5, 3);
        for method in ResizeMethod::ALL {
            let out = resize(&img, 4, 9, method);
            assert_eq!(out.shape(), [4, 9, 3]);
            assert!(
                out.data().iter().all(|v| (v - 0.5).abs() < 1e-5),
                "{method:?}"
            );
        }
        // 2x2 -> 4x4 bilinear, pixel (1, 1) samples (0.5, 0.5): the mean of the four corners.
        let img = Image::from_hwc(vec![0.0, 1.0, 2.0, 3.0], 2, 2, 1);
        assert!((resize(&img, 4, 4, ResizeMethod::Bilinear).get(1, 1, 0) - 1.5).abs() < 1e-6);
    }
}
