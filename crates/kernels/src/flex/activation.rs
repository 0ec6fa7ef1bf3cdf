//! Activations forward and backward on flex in one pass each, on rayon's threads:
//!
//! - ReLU6, `min(max(x, 0), 6)` (MobileNet's). Burn's is a clamp: comparisons, then masked
//!   fills, forward and again backward, each a pass of its own on flex, not vectorized: 27% of
//!   MobileNetV2's training step (`perf`, batch 8, Intel Xeon, 2026-12-03).
//! - SiLU, `x · sigmoid(x)` (Keras's swish, EfficientNet's). Burn's is a sigmoid of scalar
//!   `expf` calls and a product forward, and four more passes backward: 28% of
//!   EfficientNet-B0's training step (`perf`, batch 8, Intel Xeon, 2026-12-04). Here the
//!   exponential is `exp.rs`'s, a polynomial the compiler vectorizes.
//! - Hard swish, `x · relu6(x + 3) / 6`, and hard sigmoid, `relu6(x + 3) / 6` (MobileNetV3's).
//!   Burn's are a clamp, a product and a scale, each a pass forward and more backward.
//! - GELU, `x · Φ(x)` (transformers'), and its tanh approximation. Burn's flex GELU is one
//!   pass, but of scalar `erf` calls on one thread: forward and backward 5.7x PyTorch's on a
//!   transformer's `[32, 256, 768]` (bench/HISTORY.md, "GELU"). Here `Φ` is [`normal_cdf`],
//!   vectorized as PyTorch's is.
//!
//! - Mish, `x · tanh(softplus(x))` (YOLOv4's): Burn's composes a thresholded softplus, a tanh
//!   of scalar calls and a product, each again backward: 8.8x PyTorch's on `[8, 128, 64, 64]`.
//! - Sigmoid, tanh and leaky ReLU (gates, older nets, GANs' discriminators). Burn's flex
//!   sigmoid and tanh are scalar calls on one thread, its leaky ReLU a comparison and a masked
//!   product, each again backward: forward and backward of `[8, 128, 64, 64]` 8.5x, 20.7x and
//!   11.8x PyTorch's on 2 cores (bench/HISTORY.md, "Sigmoid, tanh and leaky ReLU").
//!
//! SiLU, GELU, the hard ones, Mish, sigmoid, tanh and leaky ReLU are an [`Activation`] of the
//! input, whose backward pass keeps the input; ReLU6's keeps its output.

use burn::tensor::TensorData;
use burn_flex::FlexTensor;
use multiversion::multiversion;

use crate::flex::exp::{exp, sigmoid, tanh};
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
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Activation {
    /// `x · sigmoid(x)`; gradient `s · (1 + x · (1 - s))`, `s = sigmoid(x)` (computed again:
    /// cheaper than keeping it).
    Silu,
    /// `x · relu6(x + 3) / 6`; gradient 0 below -3, `x / 3 + 1/2` up to 3, 1 above (PyTorch's
    /// `hardswish_backward`, its ends included).
    HardSwish,
    /// `relu6(x + 3) / 6`; gradient `1/6` strictly between -3 and 3, else 0 (PyTorch's).
    HardSigmoid,
    /// `x · Φ(x)`, `Φ` the standard normal's distribution function; gradient `Φ(x) + x · φ(x)`,
    /// `φ` its density.
    Gelu,
    /// `x · (1 + tanh(u)) / 2`, `u = √(2/π) · (x + 0.044715 x³)` (GELU's tanh approximation);
    /// gradient `(1 + t) / 2 + x · (1 - t²) · u' / 2`, `t = tanh(u)`: both by `sigmoid(2u) = (1
    /// + t) / 2`.
    GeluTanh,
    /// `1 / (1 + e^-x)`; gradient `s · (1 - s)`.
    Sigmoid,
    /// `tanh(x)`; gradient `1 - t²`.
    Tanh,
    /// `x · tanh(softplus(x))` (YOLOv4's), softplus `x` itself above 20 (as Burn's and
    /// PyTorch's); gradient `t + x · (1 - t²) · sigmoid(x)`, `t = tanh(softplus(x))`.
    Mish,
    /// `x` where `x ≥ 0`, `slope · x` below; gradient 1 where `x ≥ 0` (at 0 too, as Burn's
    /// `leaky_relu`; PyTorch's takes `slope` there), `slope` below.
    LeakyRelu {
        /// The slope below 0.
        slope: f32,
    },
}

impl Activation {
    /// The activation of every value of `x`.
    pub(crate) fn forward(self, x: FlexTensor) -> FlexTensor {
        match self {
            Self::Silu => map(x, swish),
            Self::HardSwish => map(x, hard_swish),
            Self::HardSigmoid => map(x, hard_sigmoid),
            Self::Gelu => map(x, gelu),
            Self::GeluTanh => map(x, gelu_tanh),
            Self::Sigmoid => map(x, logistic),
            Self::Tanh => map(x, hyperbolic_tangent),
            Self::Mish => map(x, mish),
            Self::LeakyRelu { slope } => map(x, |out, x| leaky_relu(out, x, slope)),
        }
    }

    /// The input's gradient given the input `x` and `grad = ∂L/∂y`.
    pub(crate) fn backward(self, x: FlexTensor, grad: FlexTensor) -> FlexTensor {
        match self {
            Self::Silu => map_backward(x, grad, swish_gradient),
            Self::HardSwish => map_backward(x, grad, hard_swish_gradient),
            Self::HardSigmoid => map_backward(x, grad, hard_sigmoid_gradient),
            Self::Gelu => map_backward(x, grad, gelu_gradient),
            Self::GeluTanh => map_backward(x, grad, gelu_tanh_gradient),
            Self::Sigmoid => map_backward(x, grad, logistic_gradient),
            Self::Tanh => map_backward(x, grad, hyperbolic_tangent_gradient),
            Self::Mish => map_backward(x, grad, mish_gradient),
            Self::LeakyRelu { slope } => map_backward(x, grad, |out, grad, x| {
                leaky_relu_gradient(out, grad, x, slope)
            }),
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

/// `out[i] = x[i] · Φ(x[i])`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn gelu(out: &mut [f32], x: &[f32]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = v * normal_cdf(v);
    }
}

/// `out[i] = grad[i] · (Φ(x[i]) + x[i] · φ(x[i]))`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn gelu_gradient(out: &mut [f32], grad: &[f32], x: &[f32]) {
    // 1 / √(2π).
    const DENSITY: f32 = 0.398_942_3;
    for ((o, &g), &v) in out.iter_mut().zip(grad).zip(x) {
        *o = g * (normal_cdf(v) + v * DENSITY * exp(-0.5 * v * v));
    }
}

/// `√(2/π)` and the cube's coefficient of GELU's tanh approximation.
const TANH_SCALE: f32 = 0.797_884_6;
const TANH_CUBE: f32 = 0.044_715;

/// `out[i] = x · (1 + tanh(u)) / 2`, `u = √(2/π) · (x + 0.044715 x³)`, as `x · sigmoid(2u)`:
/// the same, without `1 + tanh` cancelling to nothing for a large negative `x`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn gelu_tanh(out: &mut [f32], x: &[f32]) {
    for (o, &v) in out.iter_mut().zip(x) {
        let u = TANH_SCALE * (v + TANH_CUBE * v * v * v);
        *o = v / (1.0 + exp(-2.0 * u));
    }
}

/// `out[i] = grad[i] · ((1 + t) / 2 + x · (1 - t²) · u' / 2)`, `t = tanh(u)`, `u' = √(2/π) ·
/// (1 + 3 · 0.044715 x²)`, as `s + 2x · s · (1 - s) · u'` of `s = sigmoid(2u)`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn gelu_tanh_gradient(out: &mut [f32], grad: &[f32], x: &[f32]) {
    for ((o, &g), &v) in out.iter_mut().zip(grad).zip(x) {
        let u = TANH_SCALE * (v + TANH_CUBE * v * v * v);
        let e = exp(-2.0 * u);
        // `1 - s` as `e · s`, not a difference that cancels for a large `x`.
        let s = 1.0 / (1.0 + e);
        let slope = TANH_SCALE * (1.0 + 3.0 * TANH_CUBE * v * v);
        *o = g * (s + 2.0 * v * s * (e * s) * slope);
    }
}

/// `out[i] = sigmoid(x[i])` (`exp.rs`'s; named apart from it).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn logistic(out: &mut [f32], x: &[f32]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = sigmoid(v);
    }
}

/// `out[i] = grad[i] · s · (1 - s)`, `s = sigmoid(x[i])`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn logistic_gradient(out: &mut [f32], grad: &[f32], x: &[f32]) {
    for ((o, &g), &v) in out.iter_mut().zip(grad).zip(x) {
        let s = sigmoid(v);
        *o = g * s * (1.0 - s);
    }
}

/// `out[i] = tanh(x[i])` (`exp.rs`'s, within a few ulp).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn hyperbolic_tangent(out: &mut [f32], x: &[f32]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = tanh(v);
    }
}

/// `out[i] = grad[i] · (1 - t²)`, `t = tanh(x[i])`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn hyperbolic_tangent_gradient(out: &mut [f32], grad: &[f32], x: &[f32]) {
    for ((o, &g), &v) in out.iter_mut().zip(grad).zip(x) {
        let t = tanh(v);
        *o = g * (1.0 - t * t);
    }
}

/// Softplus's threshold: above it `softplus(x)` is `x` (and `tanh` of it 1 in f32).
const SOFTPLUS_THRESHOLD: f32 = 20.0;

/// `tanh(softplus(x))` and `n + 2`, from `e = e^x`: `((1 + e)² - 1) / ((1 + e)² + 1) = n / (n +
/// 2)`, `n = e · (e + 2)`, without the difference of a `tanh` near 1; 1 above the threshold.
#[inline(always)]
fn tanh_softplus(x: f32, e: f32) -> (f32, f32) {
    let n = e * (e + 2.0);
    let t = if x > SOFTPLUS_THRESHOLD {
        1.0
    } else {
        n / (n + 2.0)
    };
    (t, n + 2.0)
}

/// `out[i] = x[i] · tanh(softplus(x[i]))`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn mish(out: &mut [f32], x: &[f32]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = v * tanh_softplus(v, exp(v)).0;
    }
}

/// `out[i] = grad[i] · (t + x · (1 - t²) · sigmoid(x))`, `1 - t² = 4(n + 1) / (n + 2)²` (no
/// difference near 1), 0 above the threshold.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn mish_gradient(out: &mut [f32], grad: &[f32], x: &[f32]) {
    for ((o, &g), &v) in out.iter_mut().zip(grad).zip(x) {
        let e = exp(v);
        let (t, n2) = tanh_softplus(v, e);
        let slope = 4.0 * (n2 - 1.0) / (n2 * n2) * (e / (1.0 + e));
        let slope = if v > SOFTPLUS_THRESHOLD { 0.0 } else { slope };
        *o = g * (t + v * slope);
    }
}

/// `out[i] = x[i]` where `x[i] ≥ 0`, else `slope · x[i]`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
pub(crate) fn leaky_relu(out: &mut [f32], x: &[f32], slope: f32) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = if v < 0.0 { slope * v } else { v };
    }
}

/// `out[i] = grad[i]` where `x[i] ≥ 0`, else `slope · grad[i]`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn leaky_relu_gradient(out: &mut [f32], grad: &[f32], x: &[f32], slope: f32) {
    for ((o, &g), &v) in out.iter_mut().zip(grad).zip(x) {
        *o = if v < 0.0 { slope * g } else { g };
    }
}

/// `Φ(x) = (1 + erf(x / √2)) / 2` within 1.5e-7 (Abramowitz and Stegun's 7.1.26 for `erf`, as
/// PyTorch's vectorized `erf` computes it), taken as the lower tail `erfc(|x| / √2) / 2` and,
/// for `x ≥ 0`, one less it: the tail of a large negative `x` is not `1 + erf` cancelling.
#[inline(always)]
fn normal_cdf(x: f32) -> f32 {
    const P: f32 = 0.327_591_1;
    const A: [f32; 5] = [
        1.061_405_4,
        -1.453_152,
        1.421_413_7,
        -0.284_496_72,
        0.254_829_6,
    ];
    let z = x.abs() * std::f32::consts::FRAC_1_SQRT_2;
    let t = 1.0 / (1.0 + P * z);
    let polynomial = A.iter().fold(0.0, |p, &a| p * t + a) * t;
    let tail = 0.5 * polynomial * exp(-z * z);
    if x < 0.0 { tail } else { 1.0 - tail }
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

    /// GELU and its tanh approximation, values and gradients, against PyTorch's in f64
    /// (`torch.nn.functional.gelu(x, approximate=...)` and autograd, PyTorch 2.15): within
    /// 3e-7 (erf's 1.5e-7, times `x`; relative above 1, where f32's spacing grows), and within
    /// 5% where the lower tail is far below that (at -6: 5.9e-9), where `1 + erf` would have
    /// cancelled to nothing.
    #[test]
    fn gelu_is_pytorchs() {
        let x = [-6.0, -3.5, -1.0, -0.25, 0.0, 0.5, 1.5, 4.0];
        type Cases = [(
            fn(&mut [f32], &[f32]),
            fn(&mut [f32], &[f32], &[f32]),
            [[f64; 8]; 2],
        ); 2];
        let cases: Cases = [
            (
                gelu,
                gelu_gradient,
                [
                    [
                        -5.919_525_87e-9,
                        -0.000_814_201_777,
                        -0.158_655_254,
                        -0.100_323_419,
                        0.0,
                        0.345_731_231,
                        1.399_789_2,
                        3.999_873_32,
                    ],
                    [
                        -3.546_870_95e-8,
                        -0.002_821_760_35,
                        -0.083_315_470_6,
                        0.304_626_645,
                        0.5,
                        0.867_495_125,
                        1.127_469_19,
                        1.000_503_65,
                    ],
                ],
            ),
            (
                gelu_tanh,
                gelu_tanh_gradient,
                [
                    [
                        -8.439_648_98e-11,
                        -0.000_616_197_655,
                        -0.158_808_009,
                        -0.100_324_649,
                        0.0,
                        0.345_714_01,
                        1.399_571_58,
                        3.999_929_75,
                    ],
                    [
                        -7.709_976_01e-10,
                        -0.002_422_643_76,
                        -0.082_964_083_8,
                        0.304_645_905,
                        0.5,
                        0.867_369_904,
                        1.127_710_79,
                        1.000_335_12,
                    ],
                ],
            ),
        ];
        for (forward, backward, [values, gradients]) in cases {
            let (mut y, mut dx) = ([0.0; 8], [0.0; 8]);
            forward(&mut y, &x);
            backward(&mut dx, &[1.0; 8], &x);
            for (got, want) in y.iter().zip(values).chain(dx.iter().zip(gradients)) {
                let error = (f64::from(*got) - want).abs();
                let bound = 3e-7 * want.abs().max(1.0);
                let close = error <= bound && (want.abs() > 1e-6 || error <= 0.05 * want.abs());
                assert!(close, "{got} against PyTorch's {want}");
            }
        }
    }
}
