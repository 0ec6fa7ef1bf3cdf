//! Batch norm with an offset (on the batch's statistics or given ones), ReLU, then max pooling
//! without padding (Inception v3's stem: Conv2d_2b then MaxPool_3a, Conv2d_4a then MaxPool_5a),
//! with fewer passes over the activations than the two kernels apart.
//!
//! The normalization `(x - mean)·r + β` (`r = 1/√(var + ε) > 0`, no scale) and the ReLU are
//! monotone, so the largest of their outputs over a window is their output at the window's
//! largest `x`: the pool runs on `x`, and only the pooled values (a quarter at stride 2) are
//! normalized. The full-size normalized map is never written, nor read back by the pool, and
//! backward never writes the full-size gradient of the pool's input for the batch norm to read.
//!
//! Backward, with `g` the pooled output's gradient masked where that output was not positive
//! and `G` the full-size one (`g` added at each window's maximum): the batch norm's sums `ΣG`
//! and `ΣG·(x - mean)` are `g`'s over the pooled values, which are `x` at those maxima, and
//! `∂L/∂x = r·G - b - c·(x - mean)` (`batch_norm.rs`) is written in one pass, then `r·g` added at
//! the maxima. Ties in `x` go to the first maximum, as the pool's do.

use std::sync::Arc;

use burn::tensor::TensorData;
use burn_flex::FlexTensor;
use multiversion::multiversion;

use crate::flex::memory::buffers::contiguous;
use crate::flex::memory::dims4;
use crate::flex::norm::batch_norm::{
    Channel, Statistics, channel_sums, channels, gradient_terms, masked_sums, moments, normalize,
    per_plane,
};
use crate::flex::pool::max_pool::{MaxPoolShape, max_pool_forward};

/// What the backward pass needs of the forward's pooling: the pooled `x` (each window's
/// maximum) and where in its plane each maximum lies.
#[derive(Clone, Debug)]
pub(crate) struct Maxima {
    values: FlexTensor,
    argmax: Arc<Vec<u32>>,
}

/// `max_pool(relu((x - mean)/√(var + ε) + β))` per channel, on `given` `[2, c]` moments or,
/// without them, on the batch's; the moments it used, `[2, c]` (mean, biased variance); and the
/// pool's [`Maxima`].
pub(crate) fn forward(
    x: FlexTensor,
    (beta, given): (&FlexTensor, Option<FlexTensor>),
    epsilon: f64,
    shape: MaxPoolShape,
) -> (FlexTensor, FlexTensor, Maxima) {
    let x = contiguous(x);
    let [n, c, _, _] = dims4(&x);
    let moments = given.unwrap_or_else(|| moments(&x));
    let channels = channels(&moments, beta, epsilon);
    let (values, argmax) = max_pool_forward(x, shape);
    let [_, _, out_h, out_w] = dims4(&values);
    let pooled = out_h * out_w;
    let maxima: &[f32] = values.storage();
    // SAFETY: `normalize` writes every value of `out`.
    let y = unsafe {
        per_plane(maxima.len(), c, pooled, |first, ch, out| {
            normalize(&maxima[first..first + pooled], out, channels[ch]);
        })
    };
    let y = FlexTensor::from_data(TensorData::new(y, [n, c, out_h, out_w]));
    let argmax = Arc::new(argmax);
    (y, moments, Maxima { values, argmax })
}

/// The gradients of `x` and `β` given `x`, `β`, the forward's moments (and where they came
/// from) and maxima, and `grad = ∂L/∂y` (pooled).
pub(crate) fn backward(
    x: FlexTensor,
    beta: &FlexTensor,
    (moments, statistics, maxima): (&FlexTensor, Statistics, &Maxima),
    epsilon: f64,
    grad: FlexTensor,
) -> (FlexTensor, FlexTensor) {
    let (x, grad) = (contiguous(x), contiguous(grad));
    let [n, c, h, w] = dims4(&x);
    let [_, _, out_h, out_w] = dims4(&grad);
    let (places, pooled) = (h * w, out_h * out_w);
    let channels = channels(moments, beta, epsilon);
    let (x_data, g_data, x_max): (&[f32], &[f32], &[f32]) =
        (x.storage(), grad.storage(), maxima.values.storage());
    // Σg and Σg·(x - mean) per channel over the pooled values, g masked by y > 0.
    let sums = channel_sums(n, c, pooled, |first, ch| {
        let at = first..first + pooled;
        masked_sums(&x_max[at.clone()], &g_data[at], channels[ch])
    });
    let terms = gradient_terms(&sums, &channels, n * places, statistics);
    // SAFETY: `spread_gradient` writes every value of `out`.
    let dx = unsafe {
        per_plane(x_data.len(), c, places, |first, ch, out| {
            let plane = first / places.max(1);
            let at = plane * pooled..(plane + 1) * pooled;
            let pooled = [&x_max[at.clone()], &g_data[at.clone()]];
            let x = &x_data[first..first + places];
            spread_gradient(x, pooled, &maxima.argmax[at], out, channels[ch], terms[ch]);
        })
    };
    let beta_grad: Vec<f32> = sums.iter().map(|s| s.0 as f32).collect();
    (
        FlexTensor::from_data(TensorData::new(dx, [n, c, h, w])),
        FlexTensor::from_data(TensorData::new(beta_grad, [c])),
    )
}

/// A plane's input gradient into `out`: `-b - c·(x - mean)` everywhere, then `a·g` added at
/// each pooled value's maximum, `g` masked where its output was not positive; `[a, b, c]` the
/// channel's terms.
fn spread_gradient(
    x: &[f32],
    [x_max, g]: [&[f32]; 2],
    argmax: &[u32],
    out: &mut [std::mem::MaybeUninit<f32>],
    channel: Channel,
    [a, b, c]: [f32; 3],
) {
    let out = centred(x, out, channel.mean, [b, c]);
    for ((&x_max, &g), &at) in x_max.iter().zip(g).zip(argmax) {
        if channel.normalized(x_max) > 0.0 {
            out[at as usize] += a * g;
        }
    }
}

/// `-b - c·(x - mean)` of a plane into `out`, returned initialized.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn centred<'a>(
    x: &[f32],
    out: &'a mut [std::mem::MaybeUninit<f32>],
    mean: f32,
    [b, c]: [f32; 2],
) -> &'a mut [f32] {
    assert_eq!(x.len(), out.len());
    for (out, &x) in out.iter_mut().zip(x) {
        out.write(-b - c * (x - mean));
    }
    // SAFETY: every value was just written; `MaybeUninit<f32>` has `f32`'s layout.
    unsafe { &mut *(out as *mut [std::mem::MaybeUninit<f32>] as *mut [f32]) }
}
