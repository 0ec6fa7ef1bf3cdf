//! Average pooling at any stride (with padding before and after, ceil mode, either divisor) and
//! adaptive average pooling of `[n, c, h, w]` on flex, forward and backward: a window's mean
//! is a mean over its rows of a mean over its columns, so each output row is one vectorized sum
//! of input rows, then each output a sum of that row's columns; backward the same transposed.
//!
//! Flex's own pooling reads every window's values one at a time with bounds checks, and its
//! backward scatters each gradient the same way: DenseNet's 2x2/2 transition of `[16, 128, 56,
//! 56]` took 48–65 ms forward and backward on 2 cores, 11–14 here, PyTorch's 20–31
//! (bench/README.md, "Drop-in layers").
//! Stride 1 without ceil mode has its own kernel, [`super::avg_pool`].
//!
//! The windows and divisors are Burn's (burn-flex's pooling; PyTorch's too): a window
//! reads the input places it covers; its divisor counts those places, or (`counts_padding`,
//! PyTorch's `count_include_pad`) every place it covers up to the end of the trailing padding.
//! Adaptive windows run from `⌊o · in / out⌋` to `⌈(o + 1) · in / out⌉`.

use burn::tensor::TensorData;
use burn_flex::FlexTensor;

use crate::flex::memory::buffers::{contiguous, map_planes};
use crate::flex::memory::{add_scaled, dims4};
use crate::flex::pool::output_size::pooled_size;

/// Which windows a mean pooling averages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MeanWindows {
    /// Burn's `avg_pool2d`: `kernel` windows at `stride`, `padding` before and after each
    /// axis.
    Strided {
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        counts_padding: bool,
        ceil_mode: bool,
    },
    /// Burn's `adaptive_avg_pool2d` to this output size.
    Adaptive([usize; 2]),
}

impl MeanWindows {
    /// The windows of the rows and of the columns of an `[h, w]` plane.
    fn axes(&self, plane: [usize; 2]) -> [Vec<Window>; 2] {
        [0, 1].map(|axis| match *self {
            Self::Strided {
                kernel,
                stride,
                padding,
                counts_padding,
                ceil_mode,
            } => {
                let side = Side {
                    size: plane[axis],
                    kernel: kernel[axis],
                    stride: stride[axis],
                    padding: padding[axis],
                };
                side.windows(counts_padding, ceil_mode)
            }
            Self::Adaptive(output) => adaptive_windows(plane[axis], output[axis]),
        })
    }
}

/// One axis of a strided pooling.
struct Side {
    size: usize,
    kernel: usize,
    stride: usize,
    padding: usize,
}

impl Side {
    /// Each output's window along this axis, as Burn's pooling places and divides it.
    fn windows(&self, counts_padding: bool, ceil_mode: bool) -> Vec<Window> {
        let Self {
            size,
            kernel,
            stride,
            padding,
        } = *self;
        let outputs = pooled_size(size, kernel, padding, stride, ceil_mode);
        (0..outputs)
            .map(|o| {
                // The window's first place, counting the leading padding.
                let first = o * stride;
                let start = first.saturating_sub(padding).min(size);
                let end = (first + kernel)
                    .saturating_sub(padding)
                    .min(size)
                    .max(start);
                let divisor = match counts_padding {
                    true => kernel.min(size + 2 * padding - first),
                    false => end - start,
                };
                Window::new(start..end, divisor)
            })
            .collect()
    }
}

/// Each output's window along an axis of `input` places pooled to `output`.
fn adaptive_windows(input: usize, output: usize) -> Vec<Window> {
    (0..output)
        .map(|o| {
            let (start, end) = (o * input / output, ((o + 1) * input).div_ceil(output));
            Window::new(start..end, end - start)
        })
        .collect()
}

/// The input places an output averages along one axis, and the reciprocal of its share of the
/// divisor.
#[derive(Clone, Debug, PartialEq)]
struct Window {
    start: usize,
    end: usize,
    scale: f32,
}

impl Window {
    fn new(places: std::ops::Range<usize>, divisor: usize) -> Self {
        Self {
            start: places.start,
            end: places.end,
            scale: 1.0 / divisor.max(1) as f32,
        }
    }
}

/// Both axes' windows for `[h, w]` planes.
struct Means {
    rows: Vec<Window>,
    cols: Vec<Window>,
    in_plane: usize,
    in_w: usize,
}

impl Means {
    fn new(windows: MeanWindows, [h, w]: [usize; 2]) -> Self {
        let [rows, cols] = windows.axes([h, w]);
        Self {
            rows,
            cols,
            in_plane: h * w,
            in_w: w,
        }
    }

    fn out_plane(&self) -> usize {
        self.rows.len() * self.cols.len()
    }

    /// The one window of each row where it covers the whole row (global pooling, ResNet's
    /// head): its outputs then average runs of whole rows, one contiguous run each.
    fn whole_rows(&self) -> Option<&Window> {
        let [col] = &self.cols[..] else {
            return None;
        };
        (col.start == 0 && col.end == self.in_w).then_some(col)
    }

    /// One plane pooled: `plane` (`[h, w]`) into `out`, `sum` a row's scratch.
    fn plane(&self, plane: &[f32], out: &mut [f32], sum: &mut [f32]) {
        if let Some(col) = self.whole_rows() {
            // Rows of 7 (ResNet's head) are too short for a vector pass per row.
            for (row, out) in self.rows.iter().zip(out) {
                let run = &plane[row.start * self.in_w..row.end * self.in_w];
                *out = row.scale * col.scale * run.iter().sum::<f32>();
            }
            return;
        }
        for (row, out) in self.rows.iter().zip(out.chunks_exact_mut(self.cols.len())) {
            sum.fill(0.0);
            for y in row.start..row.end {
                add_scaled(sum, &plane[y * self.in_w..][..self.in_w], row.scale);
            }
            for (col, out) in self.cols.iter().zip(out) {
                *out = col.scale * sum[col.start..col.end].iter().sum::<f32>();
            }
        }
    }

    /// One plane's input gradient: `grad` (`[out_h, out_w]`) back through [`Self::plane`] into
    /// `out` (`[h, w]`, zeros), `spread` a row's scratch.
    fn plane_gradient(&self, grad: &[f32], out: &mut [f32], spread: &mut [f32]) {
        if let Some(col) = self.whole_rows() {
            for (row, &g) in self.rows.iter().zip(grad) {
                let run = &mut out[row.start * self.in_w..row.end * self.in_w];
                run.iter_mut().for_each(|d| *d += row.scale * col.scale * g);
            }
            return;
        }
        for (row, grad) in self.rows.iter().zip(grad.chunks_exact(self.cols.len())) {
            spread.fill(0.0);
            for (col, &g) in self.cols.iter().zip(grad) {
                let g = col.scale * g;
                spread[col.start..col.end].iter_mut().for_each(|s| *s += g);
            }
            for y in row.start..row.end {
                add_scaled(&mut out[y * self.in_w..][..self.in_w], spread, row.scale);
            }
        }
    }
}

/// `x` (`[n, c, h, w]`) pooled by `windows` to `[n, c, out_h, out_w]`.
pub(crate) fn forward(x: FlexTensor, windows: MeanWindows) -> FlexTensor {
    let x = contiguous(x);
    let [n, c, h, w] = dims4(&x);
    let means = Means::new(windows, [h, w]);
    let sizes = [n * c, means.in_plane, means.out_plane()];
    let y = map_planes(x.storage(), sizes, w, |plane, y, sum| {
        means.plane(plane, y, sum)
    });
    let out = [n, c, means.rows.len(), means.cols.len()];
    FlexTensor::from_data(TensorData::new(y, out.to_vec()))
}

/// The gradient of [`forward`]'s input `[n, c, h, w]` (`input`) given `grad = ∂L/∂y`.
pub(crate) fn backward(input: [usize; 4], grad: FlexTensor, windows: MeanWindows) -> FlexTensor {
    let grad = contiguous(grad);
    let [n, c, h, w] = input;
    let means = Means::new(windows, [h, w]);
    let sizes = [n * c, means.out_plane(), means.in_plane];
    let dx = map_planes(grad.storage(), sizes, w, |grad, dx, spread| {
        means.plane_gradient(grad, dx, spread)
    });
    FlexTensor::from_data(TensorData::new(dx, input.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Windows and divisors as PyTorch's `avg_pool2d` (`AvgPoolKernel.cpp`: `hstart = oh · sH -
    /// padH`, `hend = min(hstart + kH, H + padH)`, the divisor `hend - hstart` before clipping
    /// to the input, or after it without `count_include_pad`) and `adaptive_avg_pool2d`
    /// (`start_index`, `end_index`) give them.
    #[test]
    fn windows_follow_pytorchs() {
        let window = |start, end, divisor: usize| Window::new(start..end, divisor);
        let side = Side {
            size: 6,
            kernel: 3,
            stride: 2,
            padding: 1,
        };
        // Ceil mode: 4 windows, the last from place 5 running past the padding's end.
        let counting = side.windows(true, true);
        assert_eq!(
            counting,
            [
                window(0, 2, 3),
                window(1, 4, 3),
                window(3, 6, 3),
                window(5, 6, 2)
            ]
        );
        let not_counting = side.windows(false, false);
        assert_eq!(
            not_counting,
            [window(0, 2, 2), window(1, 4, 3), window(3, 6, 3)]
        );
        assert_eq!(
            adaptive_windows(7, 3),
            [window(0, 3, 3), window(2, 5, 3), window(4, 7, 3)]
        );
        assert_eq!(
            adaptive_windows(2, 3),
            [window(0, 1, 1), window(0, 2, 2), window(1, 2, 1)]
        );
    }
}
