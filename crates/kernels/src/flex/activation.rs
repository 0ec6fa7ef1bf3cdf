//! Activations forward and backward on flex in one pass each, on rayon's threads:
//!
//! - ReLU6, `min(max(x, 0), 6)` (MobileNet's). Burn's is a clamp: comparisons, then masked
//!   fills, forward and again backward, each a pass of its own on flex, not vectorized: 27% of
//!   MobileNetV2's training step (`perf`, batch 8, Intel Xeon, 2026-12-03).
//! - SiLU, `x · sigmoid(x)` (Keras's swish, EfficientNet's). Burn's is a sigmoid of scalar
//!   `expf` calls and a product forward, and four more passes backward: 28% of
//!   EfficientNet-B0's training step (`perf`, batch 8, Intel Xeon, 2026-12-04). Here the
//!   exponential is [`exp`], a polynomial the compiler vectorizes.
//! - Hard swish, `x · relu6(x + 3) / 6`, and hard sigmoid, `relu6(x + 3) / 6` (MobileNetV3's).
//!   Burn's are a clamp, a product and a scale, each a pass forward and more backward.
//!
//! SiLU and the hard ones are an [`Activation`] of the input, whose backward pass keeps the
//! input; ReLU6's keeps its output.

use burn::tensor::TensorData;
use burn_flex::FlexTensor;
use multiversion::multiversion;

use crate::flex::memory::buffers::{contiguous, zeroed_chunks};

/// Values per task on rayon's threads, each zeroed and written while in cache.
const CHUNK: usize = 1 << 14;

/// `y` of the shape of `x`, each chunk of it written by `write(y_chunk, x_chunk)`.
fn map(x: FlexTensor, write: impl Fn(&mut [f32], &[f32]) + Sync) -> FlexTensor {
    let x = contiguous(x);
    let shape = x.layout().shape().to_vec();
    let x: &[f32] = x.storage();
    let y = zeroed_chunks(x.len(), CHUNK, |index, out| {
        write(out, &x[index * CHUNK..][..out.len()]);
    });
    FlexTensor::from_data(TensorData::new(y, shape))
}

/// `dx` of the shape of `grad`, each chunk of it written by `write(dx_chunk, grad_chunk,
/// saved_chunk)`, `saved` the tensor the backward pass kept (of `grad`'s shape).
fn map_backward(
    saved: FlexTensor,
    grad: FlexTensor,
    write: impl Fn(&mut [f32], &[f32], &[f32]) + Sync,
) -> FlexTensor {
    let (saved, grad) = (contiguous(saved), contiguous(grad));
    let shape = grad.layout().shape().to_vec();
    let (saved, grad): (&[f32], &[f32]) = (saved.storage(), grad.storage());
    let dx = zeroed_chunks(grad.len(), CHUNK, |index, out| {
        let at = index * CHUNK..index * CHUNK + out.len();
        write(out, &grad[at.clone()], &saved[at]);
    });
    FlexTensor::from_data(TensorData::new(dx, shape))
}

/// `min(max(x, 0), 6)` of every value (NaN stays NaN, as in Burn's clamp).
pub(crate) fn relu6_forward(x: FlexTensor) -> FlexTensor {
    map(x, clamp)
}

/// The input's gradient given the output `y` and `grad = ∂L/∂y`: `grad` where `0 < y < 6`
/// (where the input was inside the range: TF's `relu6` gradient), zero elsewhere.
pub(crate) fn relu6_backward(y: FlexTensor, grad: FlexTensor) -> FlexTensor {
    map_backward(y, grad, pass_inside)
}

/// An activation whose backward pass keeps its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Activation {
    /// `x · sigmoid(x)`; gradient `s · (1 + x · (1 - s))`, `s = sigmoid(x)` (computed again:
    /// cheaper than keeping it).
    Silu,
    /// `x · relu6(x + 3) / 6`; gradient 0 below -3, `x / 3 + 1/2` up to 3, 1 above (PyTorch's
    /// `hardswish_backward`, its ends included).
    HardSwish,
    /// `relu6(x + 3) / 6`; gradient `1/6` strictly between -3 and 3, else 0 (PyTorch's).
    HardSigmoid,
}

impl Activation {
    /// The activation of every value of `x`.
    pub(crate) fn forward(self, x: FlexTensor) -> FlexTensor {
        match self {
            Self::Silu => map(x, swish),
            Self::HardSwish => map(x, hard_swish),
            Self::HardSigmoid => map(x, hard_sigmoid),
        }
    }

    /// The input's gradient given the input `x` and `grad = ∂L/∂y`.
    pub(crate) fn backward(self, x: FlexTensor, grad: FlexTensor) -> FlexTensor {
        match self {
            Self::Silu => map_backward(x, grad, swish_gradient),
            Self::HardSwish => map_backward(x, grad, hard_swish_gradient),
            Self::HardSigmoid => map_backward(x, grad, hard_sigmoid_gradient),
        }
    }
}

/// `out[i] = min(max(x[i], 0), 6)`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn clamp(out: &mut [f32], x: &[f32]) {
    for (o, v) in out.iter_mut().zip(x) {
        *o = v.clamp(0.0, 6.0);
    }
}

/// `out[i] = grad[i]` where `0 < y[i] < 6`, else 0 (`out` holds zeros on entry).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn pass_inside(out: &mut [f32], grad: &[f32], y: &[f32]) {
    for ((o, &g), &y) in out.iter_mut().zip(grad).zip(y) {
        if y > 0.0 && y < 6.0 {
            *o = g;
        }
    }
}

/// `out[i] = x[i] / (1 + exp(-x[i]))`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn swish(out: &mut [f32], x: &[f32]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = v / (1.0 + exp(-v));
    }
}

/// `out[i] = grad[i] · s · (1 + x[i] · (1 - s))`, `s = sigmoid(x[i])`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn swish_gradient(out: &mut [f32], grad: &[f32], x: &[f32]) {
    for ((o, &g), &v) in out.iter_mut().zip(grad).zip(x) {
        let s = 1.0 / (1.0 + exp(-v));
        *o = g * s * (1.0 + v * (1.0 - s));
    }
}

/// `out[i] = x[i] · min(max(x[i] + 3, 0), 6) / 6`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn hard_swish(out: &mut [f32], x: &[f32]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = v * (v + 3.0).clamp(0.0, 6.0) / 6.0;
    }
}

/// `out[i] = grad[i] · (0 below -3, x / 3 + 1/2 up to 3, 1 above)`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn hard_swish_gradient(out: &mut [f32], grad: &[f32], x: &[f32]) {
    for ((o, &g), &v) in out.iter_mut().zip(grad).zip(x) {
        let slope = if v > 3.0 { 1.0 } else { v / 3.0 + 0.5 };
        *o = if v < -3.0 { 0.0 } else { g * slope };
    }
}

/// `out[i] = min(max(x[i] + 3, 0), 6) / 6`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn hard_sigmoid(out: &mut [f32], x: &[f32]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = (v + 3.0).clamp(0.0, 6.0) / 6.0;
    }
}

/// `out[i] = grad[i] / 6` where `-3 < x[i] < 3`, else 0.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn hard_sigmoid_gradient(out: &mut [f32], grad: &[f32], x: &[f32]) {
    for ((o, &g), &v) in out.iter_mut().zip(grad).zip(x) {
        *o = if v > -3.0 && v < 3.0 { g / 6.0 } else { 0.0 };
    }
}

/// `e^x` within 2 ulp of `f32::exp` where that is normal (Cephes' `expf`: `2^n · p(r)`, `r` the
/// remainder of `x` over `ln 2`, `p` a polynomial of degree 7), 0 below about -87.7 and
/// `e^88.38` (finite) above 88.38 rather than subnormals and infinity: what `sigmoid` needs. Written here
/// because `f32::exp` is a call the compiler does not vectorize, and the vector `exp`s of the
/// SIMD crates (`wide`) pick their width when they are compiled, not at run time as these
/// kernels do (`multiversion`); inlined into the loops above, this one is vectorized for each.
#[inline(always)]
fn exp(x: f32) -> f32 {
    const LOG2_E: f32 = std::f32::consts::LOG2_E;
    // ln 2 in two parts, the first exact in few bits, so that `x - n·ln 2` loses nothing.
    const LN2_HIGH: f32 = 0.693_359_4;
    const LN2_LOW: f32 = -2.121_944_4e-4;
    const P: [f32; 6] = [
        1.987_569_1e-4,
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        0.166_666_65,
        0.5,
    ];
    let x = x.clamp(-88.376_26, 88.376_26);
    let n = (x * LOG2_E + 0.5).floor().clamp(-127.0, 127.0);
    let r = x - n * LN2_HIGH - n * LN2_LOW;
    let p = P.iter().fold(0.0, |p, &c| p * r + c);
    let e_r = p * r * r + r + 1.0;
    // 2^n by its exponent bits, `n + 127` in 0..=254 (0: the bits of 0). Its integer is read
    // from the low bits of `n + 127 + 2^23`: `as i32` saturates, which the compiler does not
    // vectorize.
    let biased = (n + 127.0 + 8_388_608.0).to_bits() & 0x7f_ffff;
    e_r * f32::from_bits(biased << 23)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// At and an ulp beside each bend, the gradients are PyTorch's (`hardtanh_backward`,
    /// `hardsigmoid_backward` and `hardswish_backward` in ATen's `Activation.cpp`): ReLU6 and
    /// hard sigmoid pass nothing at their ends, hard swish takes its middle piece's slope at
    /// both.
    #[test]
    fn gradients_at_the_bends_are_pytorchs() {
        let below_3 = f32::from_bits(3f32.to_bits() - 1);
        let above_3 = f32::from_bits(3f32.to_bits() + 1);
        let grad = [6.0; 6];
        let mut out = [0.0; 6];
        let y = [
            0.0,
            f32::MIN_POSITIVE,
            6.0,
            f32::from_bits(6f32.to_bits() - 1),
            -1.0,
            7.0,
        ];
        pass_inside(&mut out, &grad, &y);
        assert_eq!(out, [0.0, 6.0, 0.0, 6.0, 0.0, 0.0]);
        let x = [-above_3, -3.0, -below_3, below_3, 3.0, above_3];
        let mut out = [0.0; 6];
        hard_sigmoid_gradient(&mut out, &grad, &x);
        assert_eq!(out, [0.0, 0.0, 1.0, 1.0, 0.0, 0.0]);
        hard_swish_gradient(&mut out, &grad, &x);
        let middle = |v: f32| 6.0 * (v / 3.0 + 0.5);
        assert_eq!(
            out,
            [0.0, -3.0, middle(-below_3), middle(below_3), 9.0, 6.0]
        );
    }

    /// Within 2 ulp of the standard library's `exp` across its normal range, at a million
    /// points, and the clamped ends.
    #[test]
    fn exp_is_within_two_ulp_of_the_standard_librarys() {
        let mut worst = 0f32;
        for i in 0..=1_000_000 {
            let x = -87.0 + 175.0 * i as f32 / 1e6;
            let (got, want) = (exp(x), x.exp());
            let spacing = f32::from_bits(want.to_bits() + 1) - want;
            worst = worst.max((got - want).abs() / spacing);
        }
        assert!(worst <= 2.0, "{worst} ulp");
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-200.0), 0.0);
        assert!(exp(200.0).is_finite() && exp(200.0) > 2e38);
    }
}
