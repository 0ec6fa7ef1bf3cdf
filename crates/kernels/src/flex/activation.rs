//! ReLU6, `min(max(x, 0), 6)` (MobileNet's activation), forward and backward on flex in one
//! pass each. Burn's is a clamp: comparisons, then masked fills, forward and again backward,
//! each a pass of its own on flex, not vectorized: 27% of MobileNetV2's training step (`perf`,
//! batch 8, Intel Xeon, 2026-12-03).

use burn::tensor::TensorData;
use burn_flex::FlexTensor;
use multiversion::multiversion;

use crate::flex::memory::buffers::{contiguous, zeroed_chunks};

/// Values per task on rayon's threads, each zeroed and written while in cache.
const CHUNK: usize = 1 << 14;

/// `min(max(x, 0), 6)` of every value (NaN stays NaN, as in Burn's clamp).
pub(crate) fn relu6_forward(x: FlexTensor) -> FlexTensor {
    let x = contiguous(x);
    let shape = x.layout().shape().to_vec();
    let x: &[f32] = x.storage();
    let y = zeroed_chunks(x.len(), CHUNK, |index, out| {
        clamp(out, &x[index * CHUNK..][..out.len()]);
    });
    FlexTensor::from_data(TensorData::new(y, shape))
}

/// The input's gradient given the output `y` and `grad = ∂L/∂y`: `grad` where `0 < y < 6`
/// (where the input was inside the range: TF's `relu6` gradient), zero elsewhere.
pub(crate) fn relu6_backward(y: FlexTensor, grad: FlexTensor) -> FlexTensor {
    let (y, grad) = (contiguous(y), contiguous(grad));
    let shape = grad.layout().shape().to_vec();
    let (y, grad): (&[f32], &[f32]) = (y.storage(), grad.storage());
    let dx = zeroed_chunks(grad.len(), CHUNK, |index, out| {
        let at = index * CHUNK..index * CHUNK + out.len();
        pass_inside(out, &grad[at.clone()], &y[at]);
    });
    FlexTensor::from_data(TensorData::new(dx, shape))
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
