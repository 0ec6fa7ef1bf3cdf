//! Pillow's bilinear and bicubic resizes of 8-bit images (`Image.resize(size, Image.BILINEAR)`,
//! `Image.BICUBIC`; [`PilFilter`]), bit for bit: what torchvision's `Resize` and
//! `RandomResizedCrop` run on the PIL images its datasets load, and so what torchvision's
//! pretrained weights were trained and evaluated on (its EfficientNets evaluated after a
//! bicubic resize, the others after a bilinear one).
//!
//! Written by hand from Pillow's `libImaging/Resample.c` (its `precompute_coeffs`,
//! `normalize_coeffs_8bpc` and the two 8-bit passes): unlike TF's resize
//! ([`resize`](super::resize)), Pillow widens the filter by the scale when it shrinks (an
//! antialiasing filter), and it sums in fixed point, with coefficients of 22 fractional bits
//! and each pass rounded to bytes. Image crates (`image`, `fast_image_resize`) resample in
//! their own precision, a byte off here and there, which would make "as torchvision" untrue
//! and untestable.
//!
//! The order of the passes is Pillow 13's: the height first where it shrinks by more than
//! twice as many pixels as the width does (python-pillow/Pillow#9549), else the width first,
//! as every earlier Pillow always did. Where the order differs, so do some pixels, by one.

use std::borrow::Cow;
use std::ops::Range;

use super::Window;
use crate::image::Rgb8;

/// Pillow's `PRECISION_BITS`: the fractional bits of its fixed-point coefficients.
const PRECISION_BITS: u32 = 32 - 8 - 2;

/// `image` resized to `height` x `width` as Pillow's `resize((width, height), BILINEAR)`:
/// a pass along each side, in Pillow 13's order (see the module docs), each skipped where that
/// side keeps its size.
///
/// # Panics
/// If a side of `image` or of the output is 0.
pub fn pil_resize_bilinear(image: &Rgb8, height: usize, width: usize) -> Rgb8 {
    let whole = Window {
        top: 0,
        left: 0,
        height,
        width,
    };
    pil_resize_window(image, height, width, whole)
}

/// Pillow's resampling filters for 8-bit images (`libImaging/Resample.c`), as torchvision
/// names them in its presets' `interpolation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum PilFilter {
    /// `bilinear_filter`: a triangle of support 1 (torchvision's default).
    #[default]
    Bilinear,
    /// `bicubic_filter`: Keys' cubic with `a = -0.5`, of support 2 (the presets of
    /// torchvision's EfficientNet weights).
    Bicubic,
}

impl PilFilter {
    /// How far from an output's center the filter reaches, in input pixels, before it is
    /// widened by the scale of a shrink.
    fn support(self) -> f64 {
        match self {
            Self::Bilinear => 1.0,
            Self::Bicubic => 2.0,
        }
    }

    /// The filter's weight at `x` input pixels from the center.
    fn weight(self, x: f64) -> f64 {
        let x = x.abs();
        match self {
            Self::Bilinear if x < 1.0 => 1.0 - x,
            Self::Bicubic if x < 1.0 => (1.5 * x - 2.5) * x * x + 1.0,
            Self::Bicubic if x < 2.0 => (((x - 5.0) * x + 8.0) * x - 4.0) * -0.5,
            _ => 0.0,
        }
    }
}

/// `window` of [`pil_resize_bilinear`]'s output, computed alone: each output pixel depends on
/// its own taps only, so a crop after a resize costs (and takes memory for) the crop alone,
/// however long the resized image's other side (a 1x10000 image's shorter side resized to 256
/// would be 2.56 million columns).
///
/// # Panics
/// If a side of `image` or of `window` is 0, or `window` is outside the output.
pub fn pil_resize_window(image: &Rgb8, height: usize, width: usize, window: Window) -> Rgb8 {
    pil_resize_window_by(image, height, width, window, PilFilter::Bilinear)
}

/// [`pil_resize_window`] by `filter`.
///
/// # Panics
/// If a side of `image` or of `window` is 0, or `window` is outside the output.
pub fn pil_resize_window_by(
    image: &Rgb8,
    height: usize,
    width: usize,
    window: Window,
    filter: PilFilter,
) -> Rgb8 {
    assert!(
        image.height > 0 && image.width > 0 && window.height > 0 && window.width > 0,
        "a {window:?} of a {}x{} image resized to {height}x{width}",
        image.height,
        image.width
    );
    assert!(
        window.top + window.height <= height && window.left + window.width <= width,
        "{window:?} outside the {height}x{width} output"
    );
    let out_rows = window.top..window.top + window.height;
    let out_columns = window.left..window.left + window.width;
    // A side that keeps its size is not resampled (Pillow's `need_horizontal`, `need_vertical`).
    let taps = |from, to, outputs| Taps::new(from, to, outputs, filter);
    let rows = (height != image.height).then(|| taps(image.height, height, out_rows.clone()));
    let columns = (width != image.width).then(|| taps(image.width, width, out_columns.clone()));
    let whole = Part {
        pixels: Cow::Borrowed(image),
        top: 0,
        left: 0,
    };
    // Each pass computes only what the next one, or the window, reads.
    let part = match (&rows, &columns) {
        (None, None) => whole.crop(out_rows, out_columns),
        (Some(rows), None) => whole.height_pass(rows, out_columns),
        (None, Some(columns)) => whole.width_pass(out_rows, columns),
        (Some(rows), Some(columns)) if height_first(image, height, width) => whole
            .height_pass(rows, columns.inputs())
            .width_pass(out_rows, columns),
        (Some(rows), Some(columns)) => whole
            .width_pass(rows.inputs(), columns)
            .height_pass(rows, out_columns),
    };
    part.pixels.into_owned()
}

/// Whether Pillow 13 resizes the height first: where it shrinks by more than twice as many
/// pixels as the width.
fn height_first(image: &Rgb8, height: usize, width: usize) -> bool {
    let shrinks = |from: usize, to: usize| from as i64 - to as i64;
    height < image.height && shrinks(image.height, height) > 2 * shrinks(image.width, width)
}

/// The pixels of one stage of a resize on a rectangle of it: rows from `top`, columns from
/// `left`, in that stage's coordinates (the input's before a pass along a side, the output's
/// after it).
struct Part<'a> {
    pixels: Cow<'a, Rgb8>,
    top: usize,
    left: usize,
}

impl Part<'_> {
    /// The bytes of row `y`, columns `columns`, in this stage's coordinates.
    fn row(&self, y: usize, columns: Range<usize>) -> &[u8] {
        let start = (y - self.top) * self.pixels.width + columns.start - self.left;
        &self.pixels.pixels[start * 3..(start + columns.len()) * 3]
    }

    /// The rows `rows`, each resampled along its width to `columns`' outputs.
    fn width_pass(&self, rows: Range<usize>, columns: &Taps) -> Part<'static> {
        let width = columns.start.len();
        let inputs = columns.inputs();
        let mut pixels = Vec::with_capacity(rows.len() * width * 3);
        for y in rows.clone() {
            let row = self.row(y, inputs.clone());
            for i in 0..width {
                let (first, weights) = columns.taps(i);
                let mut sums = [ROUNDING; 3];
                let pixels_read = row[(first - inputs.start) * 3..].chunks_exact(3);
                for (pixel, &w) in pixels_read.zip(weights) {
                    for (sum, &v) in sums.iter_mut().zip(pixel) {
                        *sum += i32::from(v) * w;
                    }
                }
                pixels.extend(sums.map(to_byte));
            }
        }
        part(pixels, rows.len(), width, rows.start, columns.first_output)
    }

    /// The columns `columns`, each resampled along its height to `rows`' outputs: a row of sums
    /// at a time, each input row weighed whole.
    fn height_pass(&self, rows: &Taps, columns: Range<usize>) -> Part<'static> {
        let height = rows.start.len();
        let mut pixels = Vec::with_capacity(height * columns.len() * 3);
        let mut sums = vec![0; columns.len() * 3];
        for i in 0..height {
            let (first, weights) = rows.taps(i);
            sums.fill(ROUNDING);
            for (y, &w) in (first..).zip(weights) {
                for (sum, &v) in sums.iter_mut().zip(self.row(y, columns.clone())) {
                    *sum += i32::from(v) * w;
                }
            }
            pixels.extend(sums.iter().map(|&sum| to_byte(sum)));
        }
        part(
            pixels,
            height,
            columns.len(),
            rows.first_output,
            columns.start,
        )
    }

    fn crop(&self, rows: Range<usize>, columns: Range<usize>) -> Part<'static> {
        let mut pixels = Vec::with_capacity(rows.len() * columns.len() * 3);
        for y in rows.clone() {
            pixels.extend_from_slice(self.row(y, columns.clone()));
        }
        part(pixels, rows.len(), columns.len(), rows.start, columns.start)
    }
}

/// A stage of `height` x `width` pixels from row `top` and column `left`.
fn part(pixels: Vec<u8>, height: usize, width: usize, top: usize, left: usize) -> Part<'static> {
    let pixels = Cow::Owned(Rgb8 {
        pixels,
        height,
        width,
    });
    Part { pixels, top, left }
}

/// For each output pixel of a range along one side, the input pixels it sums and their
/// fixed-point weights (Pillow's `bounds` and normalized `kk`).
struct Taps {
    /// The first output pixel of the range.
    first_output: usize,
    /// The first input pixel of each output pixel.
    start: Vec<usize>,
    /// How many input pixels each output pixel sums.
    len: Vec<usize>,
    /// `weights_per_output` weights per output pixel, the first `len` of them used.
    weights: Vec<i32>,
    weights_per_output: usize,
}

impl Taps {
    /// Pillow's `precompute_coeffs` for the whole side (`in0` = 0, `in1` = `in_size`) and
    /// `filter`, then `normalize_coeffs_8bpc`, for the output pixels `outputs` of `out_size`.
    fn new(in_size: usize, out_size: usize, outputs: Range<usize>, filter: PilFilter) -> Self {
        let scale = in_size as f64 / out_size as f64;
        let filter_scale = scale.max(1.0);
        let support = filter.support() * filter_scale;
        let weights_per_output = support.ceil() as usize * 2 + 1;
        let mut taps = Self {
            first_output: outputs.start,
            start: Vec::with_capacity(outputs.len()),
            len: Vec::with_capacity(outputs.len()),
            weights: vec![0; outputs.len() * weights_per_output],
            weights_per_output,
        };
        // Pillow multiplies by the reciprocal (`ss`): dividing would round differently.
        let reciprocal = 1.0 / filter_scale;
        let mut k = vec![0.0f64; weights_per_output];
        for (i, out) in outputs.enumerate() {
            let center = (out as f64 + 0.5) * scale;
            // C's `(int)` conversion truncates toward zero, and Pillow clamps after it.
            let first = ((center - support + 0.5) as i64).max(0) as usize;
            let end = ((center + support + 0.5) as i64).min(in_size as i64) as usize;
            let len = end - first;
            let mut sum = 0.0;
            for (x, w) in k[..len].iter_mut().enumerate() {
                *w = filter.weight((x as f64 + first as f64 - center + 0.5) * reciprocal);
                sum += *w;
            }
            let row = &mut taps.weights[i * weights_per_output..][..len];
            for (fixed, &w) in row.iter_mut().zip(&k[..len]) {
                let w = if sum != 0.0 { w / sum } else { w };
                *fixed = to_fixed(w);
            }
            taps.start.push(first);
            taps.len.push(len);
        }
        taps
    }

    /// The input pixels the outputs read, from the first's first to the last's last.
    fn inputs(&self) -> Range<usize> {
        let last = self.start.len() - 1;
        self.start[0]..self.start[last] + self.len[last]
    }

    /// The `i`th output pixel's first input pixel and the weights of its input pixels.
    fn taps(&self, i: usize) -> (usize, &[i32]) {
        let weights = &self.weights[i * self.weights_per_output..][..self.len[i]];
        (self.start[i], weights)
    }
}

/// A sum's start: one half in fixed point, so that the shift in [`to_byte`] rounds.
const ROUNDING: i32 = 1 << (PRECISION_BITS - 1);

/// A fixed-point sum as a byte, clamped as Pillow's `clip8` does.
fn to_byte(sum: i32) -> u8 {
    (sum >> PRECISION_BITS).clamp(0, 255) as u8
}

/// A weight in fixed point, rounded half away from zero as `normalize_coeffs_8bpc` does.
fn to_fixed(w: f64) -> i32 {
    let scaled = w * f64::from(1u32 << PRECISION_BITS);
    if w < 0.0 {
        (scaled - 0.5) as i32
    } else {
        (scaled + 0.5) as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(height: usize, width: usize) -> Rgb8 {
        let pixels = (0..height * width * 3)
            .map(|i| (i * 37 % 251) as u8)
            .collect();
        Rgb8 {
            pixels,
            height,
            width,
        }
    }

    /// Halving `[0, 100, 200, 255]`: the filter is two input pixels wide each side of an
    /// output's center. The first (center 1.0) weighs pixels 0 to 2 by 0.75, 0.75 and 0.25,
    /// over their sum 1.75: 500 / 7 = 71.43, rounded to 71. The second (center 3.0) weighs
    /// pixels 1 to 3 by 0.25, 0.75 and 0.75: 366.25 / 1.75 = 209.29, rounded to 209.
    #[test]
    fn a_shrinking_filter_is_widened_by_the_scale() {
        let row = Rgb8 {
            pixels: [0u8, 100, 200, 255].iter().flat_map(|&v| [v; 3]).collect(),
            height: 1,
            width: 4,
        };
        let out = pil_resize_bilinear(&row, 1, 2);
        assert_eq!(out.pixels, [71, 71, 71, 209, 209, 209]);
    }

    /// Pillow 13's own resizes of `image(23, 31)` to seven sizes, by either filter
    /// (`scripts/torch_fixtures/pil_resize_filters.py`): the same bytes.
    #[test]
    fn both_filters_give_pillows_bytes() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/pil_resize_filters.txt"
        );
        let original = image(23, 31);
        let text = std::fs::read_to_string(path).unwrap();
        for line in text.lines() {
            let [filter, height, width, hex] = line.split('\t').collect::<Vec<_>>()[..] else {
                panic!("{line}");
            };
            let filter = match filter {
                "bilinear" => PilFilter::Bilinear,
                _ => PilFilter::Bicubic,
            };
            let (height, width) = (height.parse().unwrap(), width.parse().unwrap());
            let pillows: Vec<u8> = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            let whole = Window {
                top: 0,
                left: 0,
                height,
                width,
            };
            let ours = pil_resize_window_by(&original, height, width, whole, filter);
            assert_eq!(ours.pixels, pillows, "{filter:?} to {height}x{width}");
        }
        assert_eq!(text.lines().count(), 14);
    }

    #[test]
    fn the_same_size_is_the_same_image() {
        let original = image(7, 5);
        assert_eq!(pil_resize_bilinear(&original, 7, 5), original);
    }

    #[test]
    fn a_window_of_the_output_is_computed_as_the_whole() {
        let original = image(23, 31);
        // Each pass alone, width first (shrinking or growing) and height first.
        for (height, width) in [(23, 12), (9, 31), (40, 17), (9, 20), (11, 64), (5, 28)] {
            let whole = pil_resize_bilinear(&original, height, width);
            for window in [
                Window {
                    top: 0,
                    left: 0,
                    height,
                    width,
                },
                Window {
                    top: 1,
                    left: 2,
                    height: height - 3,
                    width: width - 5,
                },
                Window {
                    top: height - 1,
                    left: width / 2,
                    height: 1,
                    width: 1,
                },
            ] {
                let part = pil_resize_window(&original, height, width, window);
                let rows = whole.pixels.chunks_exact(width * 3).skip(window.top);
                let expected: Vec<u8> = (rows.take(window.height))
                    .flat_map(|row| &row[window.left * 3..(window.left + window.width) * 3])
                    .copied()
                    .collect();
                assert_eq!(part.pixels, expected, "{window:?} of {height}x{width}");
            }
        }
    }
}
