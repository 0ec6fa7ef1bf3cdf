//! `tf.image.resize_images` as TF 1.x computes it (`align_corners=False`, no half-pixel
//! centers): output pixel `i` samples input coordinate `i * in / out`.
//!
//! Every method is separable, so each is a list of (input index, weight) taps per output
//! row and per output column, applied along the width, then along the height.
//! [`resize_window`] is the general form the Inception distortions use: it reads a window of
//! 8-bit or `f32` pixels in place (no cropped copy, bytes converted as read), can mirror the
//! output left-right as it goes, and writes CHW planes; [`resize`] is the plain op.

use super::Window;
use super::vectorized::vectorized;
use crate::image::{Image, Planes, unit};

/// Interpolation methods, in TF's `ResizeMethod` order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
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
    let source = Source {
        values: image.data(),
        width: image.width(),
        channels: image.channels(),
    };
    let whole = Window {
        top: 0,
        left: 0,
        height: image.height(),
        width: image.width(),
    };
    let mut out = Planes::zeros(image.channels(), height, width);
    resize_window(&source, whole, method, false, &mut out, &mut Vec::new());
    out.to_image()
}

/// HWC pixels a resize reads: `f32` values, or bytes read as `v / 255` (exactly the values
/// TF's `convert_image_dtype` would have given them).
pub struct Source<'a, P> {
    /// The values, row by row.
    pub values: &'a [P],
    /// Pixels per row.
    pub width: usize,
    /// Values per pixel.
    pub channels: usize,
}

/// A pixel value as a float.
pub trait Value: Copy {
    /// The value in the scale the transforms work in.
    fn get(self) -> f32;
}

impl Value for f32 {
    #[inline(always)]
    fn get(self) -> f32 {
        self
    }
}

impl Value for u8 {
    #[inline(always)]
    fn get(self) -> f32 {
        unit(self)
    }
}

/// Resizes `window` of `source` to the size of `out` (CHW planes with `source.channels`
/// channels), mirrored left-right when `flip`. The values equal [`crop`](super::crop) then
/// [`resize`] then [`flip_left_right`](super::flip_left_right), operation for operation.
/// `scratch` holds the width pass between calls.
pub fn resize_window<P: Value>(
    source: &Source<P>,
    window: Window,
    method: ResizeMethod,
    flip: bool,
    out: &mut Planes,
    scratch: &mut Vec<f32>,
) {
    let [c, height, width] = out.shape();
    assert_eq!(
        c, source.channels,
        "planes for {} channels",
        source.channels
    );
    let rows = Taps::new(window.height, height, method);
    let cols = Taps::new(window.width, width, method);
    // Along the width: CHW planes of [window.height, width], after one row of input as floats.
    let row_len = window.width * c;
    // Every value is written below: resizing keeps the last image's values (no zeroing).
    scratch.resize(row_len + c * window.height * width, 0.0);
    let (row, wide) = scratch.split_at_mut(row_len);
    vectorized(
        #[inline(always)]
        || match c {
            1 => width_pass::<P, 1>(source, window, &cols, flip, row, wide),
            3 => width_pass::<P, 3>(source, window, &cols, flip, row, wide),
            4 => width_pass::<P, 4>(source, window, &cols, flip, row, wide),
            _ => panic!("resize takes 1, 3 or 4 channels, not {c}"),
        },
    );
    vectorized(
        #[inline(always)]
        || height_pass(wide, window.height, &rows, out),
    );
}

/// Resizes each of the `[rows, width]` planes of `wide` along the height into `out`.
#[inline(always)]
fn height_pass(wide: &[f32], rows: usize, taps: &Taps, out: &mut Planes) {
    let [_, height, width] = out.shape();
    let plane = rows * width;
    for (ch, dst) in out.data_mut().chunks_exact_mut(height * width).enumerate() {
        let wide = &wide[ch * plane..(ch + 1) * plane];
        for (y, dst) in dst.chunks_exact_mut(width).enumerate() {
            dst.fill(0.0);
            for &(i, w) in taps.of(y) {
                let src = &wide[i * width..(i + 1) * width];
                dst.iter_mut().zip(src).for_each(|(d, s)| *d += w * s);
            }
        }
    }
}

/// Resizes each row of `window` to `cols.len()` columns (mirrored when `flip`) into `C`
/// planes of `[window.height, cols.len()]`. Each row is first converted to floats in `row`
/// (one vectorized pass, rather than a conversion per tap); the channel count is a constant
/// so that a pixel's channels are summed together, unrolled.
#[inline(always)]
fn width_pass<P: Value, const C: usize>(
    source: &Source<P>,
    window: Window,
    cols: &Taps,
    flip: bool,
    row: &mut [f32],
    planes: &mut [f32],
) {
    let width = cols.len();
    let plane = window.height * width;
    for y in 0..window.height {
        let start = ((window.top + y) * source.width + window.left) * C;
        let src = &source.values[start..start + window.width * C];
        row.iter_mut().zip(src).for_each(|(r, v)| *r = v.get());
        for x in 0..width {
            let mut sums = [0.0f32; C];
            for &(i, w) in cols.of(if flip { width - 1 - x } else { x }) {
                let pixel: &[f32; C] = row[i * C..(i + 1) * C].try_into().expect("C values");
                for (sum, v) in sums.iter_mut().zip(pixel) {
                    *sum += w * v;
                }
            }
            for (ch, sum) in sums.into_iter().enumerate() {
                planes[ch * plane + y * width + x] = sum;
            }
        }
    }
}

/// For each of `out` output positions, the input indices and weights that make it.
struct Taps {
    /// Output `o`'s taps are `taps[bounds[o]..bounds[o + 1]]`.
    bounds: Vec<usize>,
    taps: Vec<(usize, f32)>,
}

impl Taps {
    fn new(size: usize, out: usize, method: ResizeMethod) -> Self {
        let scale = size as f64 / out as f64;
        let last = size - 1;
        let mut taps = Vec::with_capacity(out * 4);
        let mut bounds = Vec::with_capacity(out + 1);
        bounds.push(0);
        for o in 0..out {
            let at = o as f64 * scale;
            let lo = at.floor() as usize;
            let t = (at - at.floor()) as f32;
            match method {
                ResizeMethod::NearestNeighbor => taps.push((lo.min(last), 1.0)),
                ResizeMethod::Bilinear => {
                    taps.extend([(lo.min(last), 1.0 - t), ((lo + 1).min(last), t)]);
                }
                ResizeMethod::Bicubic => {
                    let w = cubic_weights(t);
                    taps.extend((0..4).map(|k| ((lo + k).saturating_sub(1).min(last), w[k])));
                }
                ResizeMethod::Area => {
                    let (start, end) = (at, at + scale);
                    taps.extend(
                        (start.floor() as usize..end.ceil() as usize)
                            .map(|i| {
                                let overlap = end.min(i as f64 + 1.0) - start.max(i as f64);
                                (i.min(last), (overlap / scale) as f32)
                            })
                            .filter(|&(_, w)| w > 0.0),
                    );
                }
            }
            bounds.push(taps.len());
        }
        Self { bounds, taps }
    }

    /// The number of outputs.
    fn len(&self) -> usize {
        self.bounds.len() - 1
    }

    #[inline(always)]
    fn of(&self, o: usize) -> &[(usize, f32)] {
        &self.taps[self.bounds[o]..self.bounds[o + 1]]
    }
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
    fn a_window_of_bytes_resizes_as_crop_resize_flip() {
        use crate::image::Rgb8;
        use crate::transforms::{crop, flip_left_right};
        let rgb = Rgb8 {
            pixels: (0..23 * 31 * 3).map(|i| (i * 97 % 256) as u8).collect(),
            height: 23,
            width: 31,
        };
        let source = Source {
            values: &rgb.pixels[..],
            width: 31,
            channels: 3,
        };
        let window = Window {
            top: 3,
            left: 5,
            height: 17,
            width: 20,
        };
        let cropped = crop(&rgb.to_image(), 3, 5, 17, 20);
        let mut scratch = Vec::new();
        for method in ResizeMethod::ALL {
            // Up along one side, down along the other.
            let want = resize(&cropped, 11, 26, method);
            for flip in [false, true] {
                let mut out = Planes::zeros(3, 11, 26);
                resize_window(&source, window, method, flip, &mut out, &mut scratch);
                let want = if flip {
                    flip_left_right(&want)
                } else {
                    want.clone()
                };
                assert_eq!(out.to_image(), want, "{method:?}, flip {flip}");
            }
        }
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
