//! A convolution's input and weight gradients on flex, without flex's transposed convolution
//! (gemm, then a col2im scatter) or its weight-gradient convolution (a gemm as wide as the
//! kernel has places: 25 columns for a 5x5 kernel).

use burn::backend::Flex;
use burn::backend::ops::{ConvOptions, FloatTensorOps, ModuleOps};
use burn::tensor::TensorData;
use burn_flex::FlexTensor;
use rayon::prelude::*;

use super::max_pool::dims4;

/// A convolution's stride and its zero padding, the same before and after.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ConvGeometry {
    pub stride: [usize; 2],
    pub padding: [usize; 2],
}

impl ConvGeometry {
    /// Burn's options for this geometry: no dilation, no groups.
    pub fn options(&self) -> ConvOptions<2> {
        ConvOptions::new(self.stride, self.padding, [1, 1], 1)
    }
}

/// The gradient of `x` in `y = conv(x, weight)`, given `grad = ∂L/∂y`. At stride 1 it is the
/// convolution of `grad` by the kernel flipped in both directions with inputs and outputs
/// swapped, padded by `k - 1 - p`: flex's forward path. Other strides go to Burn's formulation.
pub(crate) fn input_grad(
    x: FlexTensor,
    weight: FlexTensor,
    grad: FlexTensor,
    geometry: ConvGeometry,
) -> FlexTensor {
    let [_, _, kh, kw] = dims4(&weight);
    let [ph, pw] = geometry.padding;
    if geometry.stride != [1, 1] || ph >= kh || pw >= kw {
        return Flex::conv2d_x_backward(x, weight, grad, geometry.options());
    }
    let flipped = Flex::float_flip(Flex::float_swap_dims(weight, 0, 1), &[2, 3]);
    let padding = [kh - 1 - ph, kw - 1 - pw];
    Flex::conv2d(
        grad,
        flipped,
        None,
        ConvOptions::new([1, 1], padding, [1, 1], 1),
    )
}

/// The gradient of `weight` (`[out, in, kh, kw]`) in `y = conv(x, weight)`: per image, the
/// output gradient as an `[out, places]` matrix times the image's windows as a `[places,
/// in·kh·kw]` one, summed over the batch. Each thread takes a share of the images, builds one
/// image's windows at a time (a few megabytes at most, in cache for the gemm) and accumulates
/// into its own sum; the threads' sums are added at the end.
pub(crate) fn weight_grad(
    x: FlexTensor,
    grad: FlexTensor,
    kernel: [usize; 2],
    geometry: ConvGeometry,
) -> FlexTensor {
    let (x, grad) = (x.to_contiguous(), grad.to_contiguous());
    let [n, c, h, w] = dims4(&x);
    let [_, out, out_h, out_w] = dims4(&grad);
    let image = Im2Col {
        image: [c, h, w],
        kernel,
        geometry,
        out: [out_h, out_w],
    };
    let (x_data, grad_data): (&[f32], &[f32]) = (x.storage(), grad.storage());
    let taps = c * kernel[0] * kernel[1];
    let places = out_h * out_w;
    let threads = rayon::current_num_threads().clamp(1, n.max(1));
    let share = n.div_ceil(threads).max(1);
    let sums: Vec<Vec<f32>> = (0..threads)
        .into_par_iter()
        .map(|t| {
            let mut sum = vec![0f32; out * taps];
            let mut columns = vec![0f32; if image.is_copy() { 0 } else { taps * places }];
            for i in (t * share..(t + 1) * share).take_while(|&i| i < n) {
                let x = &x_data[i * c * h * w..(i + 1) * c * h * w];
                let windows = if image.is_copy() {
                    x
                } else {
                    image.fill(x, &mut columns);
                    &columns
                };
                let g = &grad_data[i * out * places..(i + 1) * out * places];
                accumulate_product(&mut sum, g, windows, [out, places, taps]);
            }
            sum
        })
        .collect();
    let total = sums
        .into_iter()
        .reduce(|mut a, b| {
            a.iter_mut().zip(&b).for_each(|(a, b)| *a += b);
            a
        })
        .unwrap_or_else(|| vec![0f32; out * taps]);
    let shape = [out, c, kernel[0], kernel[1]];
    FlexTensor::from_data(TensorData::new(total, shape))
}

/// `sum[out × taps] += g[out × places] · columnsᵀ`, where `columns` is `[taps × places]`;
/// gemm reads the transposed operand through its strides, on the calling thread.
fn accumulate_product(sum: &mut [f32], g: &[f32], columns: &[f32], [m, k, n]: [usize; 3]) {
    assert!(sum.len() == m * n && g.len() == m * k && columns.len() == n * k);
    // SAFETY: the asserted lengths cover every index the strides below reach: the destination
    // is m×n row-major, the left operand m×k row-major, the right operand k×n read from the
    // n×k row-major `columns` (row stride 1, column stride k).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            sum.as_mut_ptr(),
            1,
            n as isize,
            true,
            g.as_ptr(),
            1,
            k as isize,
            columns.as_ptr(),
            k as isize,
            1,
            1.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

/// One image's windows as a `[in·kh·kw, out_h·out_w]` matrix: row `(channel, ky, kx)` holds,
/// for each output place, the input value under that kernel tap (zero in the padding).
struct Im2Col {
    image: [usize; 3],
    kernel: [usize; 2],
    geometry: ConvGeometry,
    out: [usize; 2],
}

impl Im2Col {
    /// Whether the windows are the image itself (a 1x1 kernel at stride 1, no padding), read
    /// in place rather than copied.
    fn is_copy(&self) -> bool {
        self.kernel == [1, 1] && self.geometry.stride == [1, 1] && self.geometry.padding == [0, 0]
    }

    fn fill(&self, image: &[f32], columns: &mut [f32]) {
        let [c, h, w] = self.image;
        let [kh, kw] = self.kernel;
        let [out_h, out_w] = self.out;
        let mut rows = columns.chunks_exact_mut(out_h * out_w);
        for plane in image.chunks_exact(h * w).take(c) {
            for ky in 0..kh {
                for kx in 0..kw {
                    let row = rows.next().expect("one row per kernel tap");
                    for (oy, dst) in row.chunks_exact_mut(out_w).enumerate() {
                        match self.input_row(oy, ky) {
                            Some(y) => self.fill_row(&plane[y * w..(y + 1) * w], kx, dst),
                            None => dst.fill(0.0),
                        }
                    }
                }
            }
        }
    }

    /// The input row under kernel row `ky` at output row `oy`; `None` in the padding.
    fn input_row(&self, oy: usize, ky: usize) -> Option<usize> {
        let y = (oy * self.geometry.stride[0] + ky).checked_sub(self.geometry.padding[0])?;
        (y < self.image[1]).then_some(y)
    }

    /// One output row of tap column `kx`: contiguous at stride 1, gathered otherwise.
    fn fill_row(&self, src: &[f32], kx: usize, dst: &mut [f32]) {
        let (sw, pw, w) = (self.geometry.stride[1], self.geometry.padding[1], src.len());
        let column = |ox: usize| (ox * sw + kx).checked_sub(pw).filter(|&x| x < w);
        if sw == 1 {
            let first = pw.saturating_sub(kx).min(dst.len());
            let end = (w + pw).saturating_sub(kx).clamp(first, dst.len());
            dst[..first].fill(0.0);
            if end > first {
                let start = first + kx - pw;
                dst[first..end].copy_from_slice(&src[start..start + end - first]);
            }
            dst[end..].fill(0.0);
        } else {
            for (ox, d) in dst.iter_mut().enumerate() {
                *d = column(ox).map_or(0.0, |x| src[x]);
            }
        }
    }
}
