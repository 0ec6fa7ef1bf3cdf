//! Local response normalization across channels on `[n, c, h, w]` f32 tensors, and its
//! backward pass, image by image over rayon's threads.
//!
//! The model's formulation (`towers_models::Lrn`) is a band matrix product and `powf` per element;
//! on flex the power alone took most of the layer (`powf` is a libm call per value). Here the
//! window sums are a few vectorized passes over each channel's plane, the power at the
//! tutorial's β = 0.75 (and 0.5) is square roots, and the backward pass reuses the forward's
//! sums instead of differentiating the product and the power op by op.

use burn::tensor::TensorData;
use burn_flex::FlexTensor;
use multiversion::multiversion;

use crate::flex::memory::buffers::{contiguous, zeroed_chunks, zeroed_chunks_of};
use crate::flex::memory::dims4;

/// `tf.nn.lrn`'s parameters: `y = x / (bias + alpha · Σ_{|c' - c| ≤ radius} x[c']²) ^ beta`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct LrnParams {
    pub radius: usize,
    pub bias: f32,
    pub alpha: f32,
    pub beta: f32,
}

impl LrnParams {
    pub(crate) fn new(radius: usize, bias: f32, alpha: f32, beta: f32) -> Self {
        Self {
            radius,
            bias,
            alpha,
            beta,
        }
    }
}

/// What the forward pass leaves for the backward one: the denominators' bases
/// `s = bias + alpha · Σ x²` and their powers `s^-beta`, laid out as the input.
#[derive(Clone, Debug)]
pub(crate) struct LrnSaved {
    pub sums: FlexTensor,
    pub scales: FlexTensor,
}

/// The normalized tensor and what its backward pass needs.
pub(crate) fn lrn_forward(x: FlexTensor, p: LrnParams) -> (FlexTensor, LrnSaved) {
    let x = contiguous(x);
    let dims = dims4(&x);
    let [_, c, h, w] = dims;
    let image = c * h * w;
    let data: &[f32] = x.storage();
    // Each image's three outputs zeroed just before it writes them, in cache.
    let [y, sums, scales] = zeroed_chunks_of(data.len(), image, |i, outputs| {
        forward_image(&data[i * image..][..image], c, p, outputs)
    });
    let tensor = |v: Vec<f32>| FlexTensor::from_data(TensorData::new(v, dims));
    let saved = LrnSaved {
        sums: tensor(sums),
        scales: tensor(scales),
    };
    (tensor(y), saved)
}

/// The input gradient: `dx[c] = dy[c]·q[c] − 2·alpha·beta·x[c]·Σ_{|c' - c| ≤ radius}
/// dy[c']·x[c']·q[c']/s[c']`, with `s` and `q = s^-beta` from the forward pass.
pub(crate) fn lrn_backward(
    x: FlexTensor,
    grad: FlexTensor,
    saved: &LrnSaved,
    p: LrnParams,
) -> FlexTensor {
    let (x, grad) = (contiguous(x), contiguous(grad));
    let dims = dims4(&x);
    let [_, c, h, w] = dims;
    let image = (c * h * w).max(1);
    let (x, dy): (&[f32], &[f32]) = (x.storage(), grad.storage());
    let (s, q): (&[f32], &[f32]) = (saved.sums.storage(), saved.scales.storage());
    let dx = zeroed_chunks(x.len(), image, |i, dx| {
        let [x, dy, s, q] = [x, dy, s, q].map(|values| &values[i * image..][..image]);
        backward_image([x, dy, s, q], c, p, dx)
    });
    FlexTensor::from_data(TensorData::new(dx, dims))
}

/// One image's output `y`, sums `s` and scales `q` (see [`LrnSaved`]) from its `x`.
/// Compiled for AVX-512 and AVX2 as well (chosen at run time), as the functions it inlines.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn forward_image(x: &[f32], c: usize, p: LrnParams, [y, s, q]: [&mut [f32]; 3]) {
    let squares: Vec<f32> = x.iter().map(|v| v * v).collect();
    window_sums(&squares, c, p.radius, s);
    for (s, q) in s.iter_mut().zip(q.iter_mut()) {
        *s = p.bias + p.alpha * *s;
        *q = *s;
    }
    neg_pow(q, p.beta);
    for ((y, &x), &q) in y.iter_mut().zip(x).zip(q.iter()) {
        *y = x * q;
    }
}

/// One image's input gradient `dx` from its `x`, output gradient `dy` and the forward's `s`
/// and `q`; compiled as [`forward_image`] is.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn backward_image([x, dy, s, q]: [&[f32]; 4], c: usize, p: LrnParams, dx: &mut [f32]) {
    let factor = 2.0 * p.alpha * p.beta;
    let terms: Vec<f32> = (dy.iter().zip(x))
        .zip(q.iter().zip(s))
        .map(|((dy, x), (q, s))| dy * x * q / s)
        .collect();
    window_sums(&terms, c, p.radius, dx);
    for ((dx, (&dy, &x)), &q) in dx.iter_mut().zip(dy.iter().zip(x)).zip(q) {
        *dx = dy * q - factor * x * *dx;
    }
}

/// `out[c] = Σ_{|c' - c| ≤ radius} values[c']` for one image's `channels` planes, plane by
/// plane (each a vectorized pass over the plane).
#[inline(always)]
fn window_sums(values: &[f32], channels: usize, radius: usize, out: &mut [f32]) {
    let plane = values.len() / channels.max(1);
    for (ch, out) in out.chunks_exact_mut(plane.max(1)).enumerate() {
        out.fill(0.0);
        for k in ch.saturating_sub(radius)..=(ch + radius).min(channels - 1) {
            for (o, v) in out.iter_mut().zip(&values[k * plane..][..plane]) {
                *o += v;
            }
        }
    }
}

/// `s ← s^-beta` in place: square roots where beta is 0.75 or 0.5 (vectorized), `powf`
/// otherwise.
#[inline(always)]
fn neg_pow(s: &mut [f32], beta: f32) {
    if beta == 0.75 {
        s.iter_mut()
            .for_each(|v| *v = 1.0 / (v.sqrt() * v.sqrt().sqrt()));
    } else if beta == 0.5 {
        s.iter_mut().for_each(|v| *v = 1.0 / v.sqrt());
    } else {
        s.iter_mut().for_each(|v| *v = v.powf(-beta));
    }
}
