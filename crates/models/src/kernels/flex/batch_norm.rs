//! Batch normalization on batch statistics with an offset, then ReLU, on flex: forward in two
//! passes (the channels' moments, then the output) and backward in two (the channels' sums of
//! the masked output gradient and of its product with the normalized input, then the input
//! gradient). Burn composes the same from a dozen elementwise ops and reductions, each a pass
//! over the activations with a new tensor; in Inception v3 (a batch norm and a ReLU after each
//! of its 94 convolutions) they cost more than the bf16 convolutions themselves.
//!
//! With `x̂ = (x - mean)·r`, `r = 1/√(var + ε)`, `y = relu(x̂ + β)` and `g` the output gradient
//! masked by `y > 0`, over the `m` values of a channel:
//! `∂L/∂β = Σg` and `∂L/∂x = r·(g - Σg/m - x̂·Σ(g·x̂)/m)` (the batch statistics depend on `x`).

use burn::tensor::TensorData;
use burn_flex::FlexTensor;
use rayon::prelude::*;

use super::{collect_planes, dims4};

/// Each channel's mean and biased variance over batch and places, `[2, c]`, summed in f64.
pub(crate) fn moments(x: FlexTensor) -> FlexTensor {
    let x = x.to_contiguous();
    let [n, c, h, w] = dims4(&x);
    let places = h * w;
    let sums = channel_sums(x.storage(), c, places, |x, _| {
        (x as f64, (x as f64) * (x as f64))
    });
    let m = (n * places).max(1) as f64;
    let mean: Vec<f64> = sums.iter().map(|s| s.0 / m).collect();
    let var = sums
        .iter()
        .zip(&mean)
        .map(|(s, mean)| (s.1 / m - mean * mean).max(0.0));
    let values: Vec<f32> = mean
        .iter()
        .map(|&v| v as f32)
        .chain(var.map(|v| v as f32))
        .collect();
    FlexTensor::from_data(TensorData::new(values, [2, c]))
}

/// `relu((x - mean)/√(var + ε) + β)` per channel, with `moments` from [`moments`].
pub(crate) fn forward(
    x: FlexTensor,
    beta: FlexTensor,
    moments: FlexTensor,
    epsilon: f64,
) -> FlexTensor {
    let x = x.to_contiguous();
    let [n, c, h, w] = dims4(&x);
    let (shift, scale) = normalization(&moments, epsilon);
    let beta = beta.to_contiguous();
    let beta: &[f32] = beta.storage();
    let places = h * w;
    let x_data: &[f32] = x.storage();
    let y = collect_planes(x_data.len(), places, |plane| {
        let ch = plane % c;
        let (m, r, b) = (shift[ch], scale[ch], beta[ch]);
        x_data[plane * places..(plane + 1) * places]
            .iter()
            .map(move |&x| {
                let v = (x - m) * r + b;
                if v <= 0.0 { 0.0 } else { v }
            })
    });
    FlexTensor::from_data(TensorData::new(y, [n, c, h, w]))
}

/// The gradients of `x` and `β` given the output `y`, `moments` and `grad = ∂L/∂y`.
pub(crate) fn backward(
    x: FlexTensor,
    y: &FlexTensor,
    moments: &FlexTensor,
    epsilon: f64,
    grad: FlexTensor,
) -> (FlexTensor, FlexTensor) {
    let (x, y, grad) = (x.to_contiguous(), y.to_contiguous(), grad.to_contiguous());
    let [n, c, h, w] = dims4(&x);
    let places = h * w;
    let (shift, scale) = normalization(moments, epsilon);
    let (x_data, y_data, g_data): (&[f32], &[f32], &[f32]) =
        (x.storage(), y.storage(), grad.storage());
    // Σg and Σg·x̂ per channel, g masked by y > 0.
    let masked = |i: usize| if y_data[i] > 0.0 { g_data[i] } else { 0.0 };
    let sums = channel_sums_indexed(x_data.len(), c, places, |i, ch| {
        let g = masked(i) as f64;
        (g, g * ((x_data[i] - shift[ch]) * scale[ch]) as f64)
    });
    let m = (n * places).max(1) as f64;
    let mean_g: Vec<f32> = sums.iter().map(|s| (s.0 / m) as f32).collect();
    let mean_gx: Vec<f32> = sums.iter().map(|s| (s.1 / m) as f32).collect();
    let dx = collect_planes(x_data.len(), places, |plane| {
        let ch = plane % c;
        let (mu, r, mean_g, mean_gx) = (shift[ch], scale[ch], mean_g[ch], mean_gx[ch]);
        (plane * places..(plane + 1) * places).map(move |at| {
            let xhat = (x_data[at] - mu) * r;
            r * (masked(at) - mean_g - xhat * mean_gx)
        })
    });
    let beta_grad: Vec<f32> = sums.iter().map(|s| s.0 as f32).collect();
    (
        FlexTensor::from_data(TensorData::new(dx, [n, c, h, w])),
        FlexTensor::from_data(TensorData::new(beta_grad, [c])),
    )
}

/// Each channel's mean and `1/√(var + ε)`.
fn normalization(moments: &FlexTensor, epsilon: f64) -> (Vec<f32>, Vec<f32>) {
    let moments = moments.to_contiguous();
    let values: &[f32] = moments.storage();
    let c = values.len() / 2;
    let scale = values[c..]
        .iter()
        .map(|&v| (1.0 / (v as f64 + epsilon).sqrt()) as f32)
        .collect();
    (values[..c].to_vec(), scale)
}

/// Per channel, the sums of the pairs `f(value, channel)` over `[n, c, places]` data.
fn channel_sums(
    data: &[f32],
    c: usize,
    places: usize,
    f: impl Fn(f32, usize) -> (f64, f64) + Sync,
) -> Vec<(f64, f64)> {
    channel_sums_indexed(data.len(), c, places, |i, ch| f(data[i], ch))
}

/// Per channel, the sums of the pairs `f(index, channel)` over the indices of `[n, c, places]`
/// data of `len` values, images in parallel.
fn channel_sums_indexed(
    len: usize,
    c: usize,
    places: usize,
    f: impl Fn(usize, usize) -> (f64, f64) + Sync,
) -> Vec<(f64, f64)> {
    let image = (c * places).max(1);
    (0..len / image)
        .into_par_iter()
        .map(|i| {
            (0..c)
                .map(|ch| {
                    let first = i * image + ch * places;
                    (first..first + places).fold((0.0, 0.0), |(a, b), at| {
                        let (da, db) = f(at, ch);
                        (a + da, b + db)
                    })
                })
                .collect::<Vec<_>>()
        })
        .reduce(
            || vec![(0.0, 0.0); c],
            |mut a, b| {
                a.iter_mut()
                    .zip(b)
                    .for_each(|(a, b)| *a = (a.0 + b.0, a.1 + b.1));
                a
            },
        )
}
