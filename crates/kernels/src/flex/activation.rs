//! ReLU6, `min(max(x, 0), 6)` (MobileNet's activation), forward and backward on flex in one
//! pass each. Burn's is a clamp: comparisons, then masked fills, forward and again backward,
//! each a pass of its own on flex, not vectorized: 27% of MobileNetV2's training step (`perf`,
//! batch 8, Intel Xeon, 2026-12-03).

use burn::tensor::TensorData;
use burn_flex::FlexTensor;
use multiversion::multiversion;
use rayon::prelude::*;

use crate::flex::memory::buffers::contiguous;

/// Values per task on rayon's threads.
const CHUNK: usize = 1 << 14;

/// `min(max(x, 0), 6)` of every value (NaN stays NaN, as in Burn's clamp).
pub(crate) fn relu6_forward(x: FlexTensor) -> FlexTensor {
    let x = contiguous(x);
    let shape = x.layout().shape().to_vec();
    let mut y: Vec<f32> = x.storage::<f32>().to_vec();
    y.par_chunks_mut(CHUNK).for_each(clamp);
    FlexTensor::from_data(TensorData::new(y, shape))
}

/// The input's gradient given the output `y` and `grad = ∂L/∂y`: `grad` where `0 < y < 6`
/// (where the input was inside the range: TF's `relu6` gradient), zero elsewhere.
pub(crate) fn relu6_backward(y: FlexTensor, grad: FlexTensor) -> FlexTensor {
    let (y, grad) = (contiguous(y), contiguous(grad));
    let shape = grad.layout().shape().to_vec();
    let mut dx: Vec<f32> = grad.storage::<f32>().to_vec();
    dx.par_chunks_mut(CHUNK)
        .zip(y.storage::<f32>().par_chunks(CHUNK))
        .for_each(|(dx, y)| pass_inside(dx, y));
    FlexTensor::from_data(TensorData::new(dx, shape))
}

#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn clamp(values: &mut [f32]) {
    for v in values {
        *v = v.clamp(0.0, 6.0);
    }
}

#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn pass_inside(grad: &mut [f32], y: &[f32]) {
    for (g, &y) in grad.iter_mut().zip(y) {
        if !(y > 0.0 && y < 6.0) {
            *g = 0.0;
        }
    }
}
