//! Softmax (and Burn's quiet softmax) over the last dimension on flex, forward and backward in
//! one task per block of rows on rayon's threads, each row read while in cache.
//!
//! Burn's flex softmax is fused forward, but under autodiff Burn takes its default: a maximum,
//! a difference, an exponential, a sum and a quotient, each an op of its own with its own
//! backward pass: forward and backward of attention's `[8, 12, 256, 256]` scores 5.6x PyTorch's
//! on 2 cores (bench/HISTORY.md, "Attention").
//!
//! With `y = softmax(x)` over a row and `g = ∂L/∂y`: `∂L/∂x = y·(g - Σ g·y)`. Quiet softmax,
//! `e^x / (1 + Σ e^x)`, has the same Jacobian `diag(y) - y·yᵀ`, so the same backward pass.

use burn::tensor::TensorData;
use burn_flex::FlexTensor;
use multiversion::multiversion;

use crate::flex::exp::exp;
use crate::flex::memory::SUM_LANES;
use crate::flex::memory::buffers::{contiguous, zeroed_chunks};

/// Values of rows a task takes, at least a row.
const TASK: usize = 1 << 14;

/// `e^(x - max) / Σ e^(x - max)` of each row of the last dimension of `x`; with `quiet`,
/// `e^(x - max) / (e^(-max) + Σ e^(x - max))`, a row of all `-∞` giving zeros (as Burn's).
pub(crate) fn forward(x: FlexTensor, quiet: bool) -> FlexTensor {
    let x = contiguous(x);
    let shape = x.layout().shape().to_vec();
    let d = shape.last().copied().unwrap_or(1).max(1);
    let data: &[f32] = x.storage();
    let rows_per_task = (TASK / d).max(1);
    let y = zeroed_chunks(data.len(), rows_per_task * d, |task, out| {
        let rows = &data[task * rows_per_task * d..][..out.len()];
        for (row, out) in rows.chunks(d).zip(out.chunks_mut(d)) {
            softmax_row(row, out, quiet);
        }
    });
    FlexTensor::from_data(TensorData::new(y, shape))
}

/// The input's gradient given the output `y` and `grad = ∂L/∂y`, both of `y`'s shape.
pub(crate) fn backward(y: FlexTensor, grad: FlexTensor) -> FlexTensor {
    let (y, grad) = (contiguous(y), contiguous(grad));
    let shape = y.layout().shape().to_vec();
    let d = shape.last().copied().unwrap_or(1).max(1);
    let (y, grad): (&[f32], &[f32]) = (y.storage(), grad.storage());
    let rows_per_task = (TASK / d).max(1);
    let dx = zeroed_chunks(y.len(), rows_per_task * d, |task, out| {
        let at = task * rows_per_task * d..task * rows_per_task * d + out.len();
        let rows = y[at.clone()].chunks(d).zip(grad[at].chunks(d));
        for ((y, grad), out) in rows.zip(out.chunks_mut(d)) {
            softmax_row_gradient(y, grad, out);
        }
    });
    FlexTensor::from_data(TensorData::new(dx, shape))
}

/// One row of [`forward`], in three passes: the maximum, the exponentials and their sum, the
/// quotients. Sums and maxima in `SUM_LANES` lanes, so that each loop is vectorized.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn softmax_row(x: &[f32], out: &mut [f32], quiet: bool) {
    let mut max = row_max(x);
    if quiet && max == f32::NEG_INFINITY {
        max = 0.0;
    }
    let mut sums = [0.0f32; SUM_LANES];
    let ((xs, x_rest), (outs, out_rest)) =
        (x.as_chunks::<SUM_LANES>(), out.as_chunks_mut::<SUM_LANES>());
    for (x, out) in xs.iter().zip(outs) {
        for l in 0..SUM_LANES {
            out[l] = exp(x[l] - max);
            sums[l] += out[l];
        }
    }
    for (l, (&x, out)) in x_rest.iter().zip(out_rest).enumerate() {
        *out = exp(x - max);
        sums[l] += *out;
    }
    let mut sum: f32 = sums.iter().sum();
    if quiet {
        // The standard library's: this one exponential may overflow to infinity, as Burn's.
        sum += (-max).exp();
    }
    out.iter_mut().for_each(|y| *y /= sum);
}

/// The largest value of `x` (`-∞` for an empty row; NaN is passed over here and propagates
/// through the exponentials instead).
#[inline(always)]
pub(crate) fn row_max(x: &[f32]) -> f32 {
    let mut maxima = [f32::NEG_INFINITY; SUM_LANES];
    let (xs, rest) = x.as_chunks::<SUM_LANES>();
    for x in xs {
        for l in 0..SUM_LANES {
            maxima[l] = maxima[l].max(x[l]);
        }
    }
    for (l, &x) in rest.iter().enumerate() {
        maxima[l] = maxima[l].max(x);
    }
    maxima.into_iter().fold(f32::NEG_INFINITY, f32::max)
}

/// One row of [`backward`]: `out[j] = y[j]·(g[j] - Σ g·y)`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn softmax_row_gradient(y: &[f32], grad: &[f32], out: &mut [f32]) {
    let dot = lane_dot(y, grad);
    for ((out, &y), &g) in out.iter_mut().zip(y).zip(grad) {
        *out = y * (g - dot);
    }
}

/// `Σ a·b` over two rows of one length, in `SUM_LANES` lanes (vectorized where inlined into a
/// multiversioned loop).
#[inline(always)]
pub(crate) fn lane_dot(a: &[f32], b: &[f32]) -> f32 {
    let mut sums = [0.0f32; SUM_LANES];
    let ((a_lanes, a_rest), (b_lanes, b_rest)) =
        (a.as_chunks::<SUM_LANES>(), b.as_chunks::<SUM_LANES>());
    for (a, b) in a_lanes.iter().zip(b_lanes) {
        for l in 0..SUM_LANES {
            sums[l] += a[l] * b[l];
        }
    }
    for (l, (&a, &b)) in a_rest.iter().zip(b_rest).enumerate() {
        sums[l] += a * b;
    }
    sums.iter().sum()
}
