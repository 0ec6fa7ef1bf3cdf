//! Layer normalization (Burn's `LayerNorm`, a transformer's) on flex: each row of the last
//! dimension normalized by its own moments, then scaled and offset per feature. Forward in two
//! passes (the rows' moments, then the output), backward in two (each row's two sums with the
//! features' gradient sums of its task, then the input gradient), rows on rayon's threads.
//! Burn's flex forward is one pass, but its backward Burn's autodiff composes from a dozen ops.
//!
//! With `x̂ = (x - mean)·r`, `r = 1/√(var + ε)` of the row, `y = γ·x̂ + β` and `g = γ·∂L/∂y`,
//! over the `d` features of a row: `∂L/∂x = r·(g - Σg/d - x̂·Σ(g·x̂)/d)`; `∂L/∂γ = Σ(∂L/∂y·x̂)`
//! and `∂L/∂β = Σ∂L/∂y` per feature over the rows.
//!
//! RMS norm (Burn's `RmsNorm`, LLaMA's) is the same without the centering ([`RowNorm::Rms`]):
//! the mean taken as 0, `r = 1/√(mean(x²) + ε)`, no offset, and no `Σg/d` term in `∂L/∂x`.

use burn::tensor::TensorData;
use burn_flex::FlexTensor;
use multiversion::multiversion;
use rayon::prelude::*;

use super::batch_norm::shifted_sums;
use crate::flex::memory::SUM_LANES;
use crate::flex::memory::buffers::{contiguous, zeroed_chunks};

/// Values of rows a task takes, at least a row.
const TASK: usize = 1 << 14;

/// What a row is normalized by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RowNorm {
    /// Its mean and variance (layer norm).
    Layer,
    /// Its root mean square alone (RMS norm; the offset given is zeros).
    Rms,
}

/// `γ·(x - mean)/√(var + ε) + β` of each row of `x` (`[rows, d]`) (with [`RowNorm::Rms`], `γ·x/√(mean(x²) +
/// ε) + β`), and each row's mean (0 for RMS) and `r`, `[rows, 2]`.
pub(crate) fn forward(
    x: FlexTensor,
    [gamma, beta]: [&FlexTensor; 2],
    epsilon: f64,
    norm: RowNorm,
) -> (FlexTensor, FlexTensor) {
    let x = contiguous(x);
    let d = x.layout().shape()[1].max(1);
    let data: &[f32] = x.storage();
    let rows: Vec<[f32; 2]> = data
        .par_chunks(d)
        .map(|row| row_moments(row, epsilon, norm))
        .collect();
    let (gamma, beta): (&[f32], &[f32]) = (gamma.storage(), beta.storage());
    let rows_per_task = (TASK / d).max(1);
    let y = zeroed_chunks(data.len(), rows_per_task * d, |task, out| {
        let first = task * rows_per_task;
        for (i, out) in out.chunks_mut(d).enumerate() {
            let row = &data[(first + i) * d..][..d];
            normalize_row(row, out, rows[first + i], [gamma, beta]);
        }
    });
    let shape = x.layout().shape().to_vec();
    let moments: Vec<f32> = rows.concat();
    let rows = moments.len() / 2;
    let y = FlexTensor::from_data(TensorData::new(y, shape));
    (
        y,
        FlexTensor::from_data(TensorData::new(moments, [rows, 2])),
    )
}

/// A row's mean and `r = 1/√(var + ε)`, from sums shifted by its first value (no cancellation
/// whatever the row's offset); for RMS, 0 and `r = 1/√(mean(x²) + ε)`.
fn row_moments(row: &[f32], epsilon: f64, norm: RowNorm) -> [f32; 2] {
    let m = row.len().max(1) as f64;
    if norm == RowNorm::Rms {
        let (_, squares) = shifted_sums(row, 0.0);
        return [0.0, (1.0 / (squares / m + epsilon).sqrt()) as f32];
    }
    let shift = row.first().copied().unwrap_or(0.0);
    let (s, q) = shifted_sums(row, shift);
    let mean_shifted = s / m;
    let variance = (q / m - mean_shifted * mean_shifted).max(0.0);
    let r = 1.0 / (variance + epsilon).sqrt();
    [(shift as f64 + mean_shifted) as f32, r as f32]
}

/// `out[j] = (x[j] - mean)·r·γ[j] + β[j]`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn normalize_row(x: &[f32], out: &mut [f32], [mean, r]: [f32; 2], [gamma, beta]: [&[f32]; 2]) {
    for (((o, &x), &g), &b) in out.iter_mut().zip(x).zip(gamma).zip(beta) {
        *o = (x - mean) * r * g + b;
    }
}

/// The gradients of `x`, `γ` and `β` given `grad = ∂L/∂y` and the forward's `moments` (those
/// of the same `norm`).
pub(crate) fn backward(
    x: FlexTensor,
    gamma: &FlexTensor,
    moments: &FlexTensor,
    grad: FlexTensor,
    norm: RowNorm,
) -> [FlexTensor; 3] {
    let (x, grad) = (contiguous(x), contiguous(grad));
    let d = x.layout().shape()[1].max(1);
    let (data, dy, gamma): (&[f32], &[f32], &[f32]) =
        (x.storage(), grad.storage(), gamma.storage());
    let moments: &[f32] = moments.storage();
    let row_of = |i: usize| [moments[2 * i], moments[2 * i + 1]];
    let rows_per_task = (TASK / d).max(1);
    let tasks: Vec<TaskSums> = data
        .par_chunks(rows_per_task * d)
        .zip(dy.par_chunks(rows_per_task * d))
        .enumerate()
        .map(|(task, (x, dy))| {
            let first = task * rows_per_task;
            TaskSums::of(x, dy, gamma, |i| row_of(first + i))
        })
        .collect();
    let terms: Vec<[f32; 2]> = tasks
        .iter()
        .flat_map(|task| task.rows.iter().copied())
        .collect();
    let dx = zeroed_chunks(data.len(), rows_per_task * d, |task, out| {
        let first = task * rows_per_task;
        for (i, out) in out.chunks_mut(d).enumerate() {
            let at = (first + i) * d..(first + i + 1) * d;
            let (row, mut sums) = (row_of(first + i), terms[first + i]);
            if norm == RowNorm::Rms {
                // Nothing was centered: no mean to differentiate.
                sums[0] = 0.0;
            }
            input_gradient(&data[at.clone()], &dy[at], gamma, row, sums, out);
        }
    });
    let shape = x.layout().shape().to_vec();
    let [d_gamma, d_beta] = TaskSums::affine_gradients(&tasks, d);
    [
        FlexTensor::from_data(TensorData::new(dx, shape)),
        d_gamma,
        d_beta,
    ]
}

/// What a task's rows sum in the backward pass.
struct TaskSums {
    /// Each row's `[Σg/d, Σ(g·x̂)/d]`.
    rows: Vec<[f32; 2]>,
    /// Per feature, the rows' `∂L/∂y·x̂` and `∂L/∂y`.
    affine: [Vec<f32>; 2],
}

impl TaskSums {
    /// The sums of the rows of `x` and `dy` (row `i`'s mean and `r`: `row(i)`).
    fn of(x: &[f32], dy: &[f32], gamma: &[f32], row: impl Fn(usize) -> [f32; 2]) -> Self {
        let d = gamma.len().max(1);
        let mut affine = [vec![0.0f32; d], vec![0.0f32; d]];
        let rows = (x.chunks(d).zip(dy.chunks(d)).enumerate())
            .map(|(i, (x, dy))| row_sums(x, dy, gamma, row(i), &mut affine))
            .collect();
        Self { rows, affine }
    }

    /// `∂L/∂γ` and `∂L/∂β`: the tasks' sums per feature, added in f64.
    fn affine_gradients(tasks: &[Self], d: usize) -> [FlexTensor; 2] {
        [0, 1].map(|k| {
            let mut total = vec![0.0f64; d];
            for task in tasks {
                let sums = task.affine[k].iter();
                total
                    .iter_mut()
                    .zip(sums)
                    .for_each(|(t, &s)| *t += s as f64);
            }
            let total: Vec<f32> = total.into_iter().map(|t| t as f32).collect();
            FlexTensor::from_data(TensorData::new(total, [d]))
        })
    }
}

/// A row's `[Σg/d, Σ(g·x̂)/d]` (`g = γ·∂L/∂y`), adding its `∂L/∂y·x̂` and `∂L/∂y` to `affine`:
/// `SUM_LANES` features at a time, so that the compiler keeps each in a vector register.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn row_sums(
    x: &[f32],
    dy: &[f32],
    gamma: &[f32],
    [mean, r]: [f32; 2],
    [d_gamma, d_beta]: &mut [Vec<f32>; 2],
) -> [f32; 2] {
    let (mut sg, mut sgx) = ([0.0f32; SUM_LANES], [0.0f32; SUM_LANES]);
    let mut add = |l: usize, [x, dy, gamma]: [f32; 3], [d_gamma, d_beta]: [&mut f32; 2]| {
        let normalized = (x - mean) * r;
        let g = dy * gamma;
        sg[l] += g;
        sgx[l] += g * normalized;
        *d_gamma += dy * normalized;
        *d_beta += dy;
    };
    let ((xs, x_rest), (dys, dy_rest)) = (x.as_chunks::<SUM_LANES>(), dy.as_chunks::<SUM_LANES>());
    let (gammas, gamma_rest) = gamma.as_chunks::<SUM_LANES>();
    let (d_gammas, d_gamma_rest) = d_gamma.as_chunks_mut::<SUM_LANES>();
    let (d_betas, d_beta_rest) = d_beta.as_chunks_mut::<SUM_LANES>();
    let lanes = xs.iter().zip(dys).zip(gammas).zip(d_gammas).zip(d_betas);
    for ((((x, dy), gamma), d_gamma), d_beta) in lanes {
        for l in 0..SUM_LANES {
            add(
                l,
                [x[l], dy[l], gamma[l]],
                [&mut d_gamma[l], &mut d_beta[l]],
            );
        }
    }
    let rest = x_rest
        .iter()
        .zip(dy_rest)
        .zip(gamma_rest)
        .zip(d_gamma_rest)
        .zip(d_beta_rest);
    for (l, ((((&x, &dy), &gamma), d_gamma), d_beta)) in rest.enumerate() {
        add(l, [x, dy, gamma], [d_gamma, d_beta]);
    }
    let d = x.len().max(1) as f64;
    let sum = |lanes: [f32; SUM_LANES]| (lanes.iter().map(|&v| v as f64).sum::<f64>() / d) as f32;
    [sum(sg), sum(sgx)]
}

/// `out[j] = r·(γ[j]·dy[j] - M₁ - x̂[j]·M₂)`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn input_gradient(
    x: &[f32],
    dy: &[f32],
    gamma: &[f32],
    [mean, r]: [f32; 2],
    [m1, m2]: [f32; 2],
    out: &mut [f32],
) {
    for (((o, &x), &dy), &gamma) in out.iter_mut().zip(x).zip(dy).zip(gamma) {
        *o = r * (gamma * dy - m1 - (x - mean) * r * m2);
    }
}
