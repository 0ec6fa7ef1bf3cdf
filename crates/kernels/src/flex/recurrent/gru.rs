//! A GRU layer's recurrence over a whole sequence on flex, forward and backward, as one op (the
//! family's shape: `mod.rs`), for PyTorch's GRU (Burn's `reset_after`, its default). Each step,
//! with `xw` the input's projection and its biases and `hw = h_prev · w_hh + b_hh`:
//! `z = σ(xw_z + hw_z)`, `r = σ(xw_r + hw_r)`, `n = tanh(xw_n + r · hw_n)`, and the hidden state
//! `h = (1 - z) · n + z · h_prev`. The gates are Burn's order, `[z, r, n]` (update, reset, new),
//! each `hidden` wide.
//!
//! Burn's `Gru` composes each step of six dense layers, three activations and the arithmetic,
//! recorded for autodiff: on 2 CPU cores, forward and backward of batch 32, 64 steps, 256
//! features, it took 124 ms where PyTorch's took 62 (bench/HISTORY.md, "LSTM, GRU
//! and dropout on the drop-in layers").

use burn_flex::FlexTensor;
use multiversion::multiversion;
use rayon::prelude::*;

use crate::flex::exp::{sigmoid, tanh};
use crate::flex::gemm::gemm_f32::{View, gemm_f32};
use crate::flex::memory::buffers::owned;
use crate::flex::recurrent::{
    Recurrence, hidden_state_grad, hidden_weight_grad, previous_hidden, read_and_write, tensor,
    transposed,
};

/// What the backward pass reads besides the weights, initial state and output: each step's
/// gates after their activations (`[batch, steps, 3 · hidden]`) and its `hw_n` (`[batch,
/// steps, hidden]`).
#[derive(Debug)]
pub(crate) struct GruSaved {
    gates: Vec<f32>,
    hidden_n: Vec<f32>,
}

/// The recurrence of `xw` (`[batch, steps, 3 · hidden]`) with the hidden weights `w_hh`
/// (`[hidden, 3 · hidden]`) and biases `b_hh` (`[3 · hidden]`) from `h0` (`[batch, hidden]`):
/// each step's hidden state at its time index, `[batch, steps, hidden]`.
pub(crate) fn forward(
    xw: FlexTensor,
    [w_hh, b_hh]: [&FlexTensor; 2],
    h0: &FlexTensor,
    reverse: bool,
) -> (FlexTensor, GruSaved) {
    let shape = Recurrence::of_projection(&xw, w_hh, 3, reverse);
    let Recurrence { steps, hidden, .. } = shape;
    assert_eq!(b_hh.layout().shape().to_vec(), [3 * hidden], "b_hh");
    assert_eq!(h0.layout().shape().to_vec(), [shape.batch, hidden], "h0");
    let mut gates = owned(xw).storage::<f32>().to_vec();
    let mut hidden_n = vec![0f32; gates.len() / 3];
    let mut out = vec![0f32; gates.len() / 3];
    let (w_hh, b_hh, h0) = (owned(w_hh.clone()), owned(b_hh.clone()), owned(h0.clone()));
    let (w_hh, b_hh, h0): (&[f32], &[f32], &[f32]) = (w_hh.storage(), b_hh.storage(), h0.storage());
    let rows = shape.rows_per_task();
    gates
        .par_chunks_mut(rows * steps * 3 * hidden)
        .zip(hidden_n.par_chunks_mut(rows * steps * hidden))
        .zip(out.par_chunks_mut(rows * steps * hidden))
        .enumerate()
        .for_each(|(task, ((gates, hidden_n), out))| {
            let h0 = &h0[task * rows * hidden..];
            forward_rows(shape, [w_hh, b_hh], h0, [gates, hidden_n, out]);
        });
    let out = tensor(out, &[shape.batch, steps, hidden]);
    (out, GruSaved { gates, hidden_n })
}

/// [`forward`] for some rows of the batch: `gates` enters holding their `xw`.
fn forward_rows(
    shape: Recurrence,
    [w_hh, b_hh]: [&[f32]; 2],
    h0: &[f32],
    [gates, hidden_n, out]: [&mut [f32]; 3],
) {
    let Recurrence { steps, hidden, .. } = shape;
    let rows = out.len() / (steps * hidden);
    let [gate_row, out_row] = [steps * 3 * hidden, steps * hidden];
    let mut hw = vec![0f32; rows * 3 * hidden];
    for s in 0..steps {
        let (t, previous) = (shape.time(s), shape.previous(s));
        for row in hw.chunks_mut(3 * hidden) {
            row.copy_from_slice(b_hh);
        }
        let h_prev = match previous {
            None => View::rows(h0.as_ptr(), hidden),
            Some(p) => View::rows(out[p * hidden..].as_ptr(), out_row),
        };
        // SAFETY: `rows` rows of `hidden` values at those strides lie in `h0` or `out`; `hw` is
        // `rows` rows of `3 · hidden`, a buffer of its own; `w_hh` is `hidden` rows of `3 ·
        // hidden`.
        unsafe {
            let dst = View::rows(hw.as_mut_ptr(), 3 * hidden);
            let w_hh = View::rows(w_hh.as_ptr(), 3 * hidden);
            gemm_f32([rows, 3 * hidden, hidden], dst, true, h_prev, w_hh);
        }
        for r in 0..rows {
            let at = |time: usize| r * out_row + time * hidden;
            let (h_prev, h) = match previous {
                None => (&h0[r * hidden..][..hidden], &mut out[at(t)..][..hidden]),
                Some(p) => read_and_write(out, at(p), at(t), hidden),
            };
            let step = StepValues {
                gates: &mut gates[r * gate_row + t * 3 * hidden..][..3 * hidden],
                hw: &hw[r * 3 * hidden..][..3 * hidden],
                hidden_n: &mut hidden_n[at(t)..][..hidden],
            };
            cell_forward(step, h_prev, h);
        }
    }
}

/// One step of one row as the forward pass writes it: the gates (entering as `xw`, leaving
/// activated), `hw`, and where `hw_n` is kept.
struct StepValues<'a> {
    gates: &'a mut [f32],
    hw: &'a [f32],
    hidden_n: &'a mut [f32],
}

/// One step of one row: the gates' activations in place, `hw_n` kept, the hidden state `h`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn cell_forward(step: StepValues, h_prev: &[f32], h: &mut [f32]) {
    let hidden = h.len();
    let (z, rest) = step.gates.split_at_mut(hidden);
    let (r, n) = rest.split_at_mut(hidden);
    let (hw_z, rest) = step.hw.split_at(hidden);
    let (hw_r, hw_n) = rest.split_at(hidden);
    for j in 0..hidden {
        z[j] = sigmoid(z[j] + hw_z[j]);
        r[j] = sigmoid(r[j] + hw_r[j]);
        n[j] = tanh(n[j] + r[j] * hw_n[j]);
        step.hidden_n[j] = hw_n[j];
        h[j] = (1.0 - z[j]) * n[j] + z[j] * h_prev[j];
    }
}

/// The gradients of [`forward`]'s `xw`, `w_hh`, `b_hh` and `h0` given `grad`, the gradient of
/// its output, which is `out`.
pub(crate) fn backward(
    saved: &GruSaved,
    w_hh: &FlexTensor,
    [h0, out]: [&FlexTensor; 2],
    grad: FlexTensor,
    reverse: bool,
) -> [FlexTensor; 4] {
    let shape = Recurrence::of_output(out, &grad, 0, reverse);
    let Recurrence {
        batch,
        steps,
        hidden,
        ..
    } = shape;
    let (w_hh, h0) = (owned(w_hh.clone()), owned(h0.clone()));
    let (out, grad) = (owned(out.clone()), owned(grad));
    let (w_hh, h0, out, grad): (&[f32], &[f32], &[f32], &[f32]) =
        (w_hh.storage(), h0.storage(), out.storage(), grad.storage());
    let w_hh_t = transposed(w_hh, [hidden, 3 * hidden]);
    let h_prev = previous_hidden(shape, h0, out, steps * hidden);
    // The gates' gradients before their activations (`xw`'s), and `hw`'s.
    let mut d_xw = vec![0f32; saved.gates.len()];
    let mut d_hw = vec![0f32; saved.gates.len()];
    let mut d_h0 = vec![0f32; batch * hidden];
    let rows = shape.rows_per_task();
    d_xw.par_chunks_mut(rows * steps * 3 * hidden)
        .zip(d_hw.par_chunks_mut(rows * steps * 3 * hidden))
        .zip(d_h0.par_chunks_mut(rows * hidden))
        .enumerate()
        .for_each(|(task, ((d_xw, d_hw), d_h0))| {
            let first = task * rows;
            let saved = [
                &saved.gates[first * steps * 3 * hidden..],
                &saved.hidden_n[first * steps * hidden..],
                &h_prev[first * steps * hidden..],
                &grad[first * steps * hidden..],
            ];
            backward_rows(shape, &w_hh_t, saved, [d_xw, d_hw, d_h0]);
        });
    let d_w_hh = hidden_weight_grad(shape, &h_prev, &d_hw, 3 * hidden);
    let mut d_b_hh = vec![0f32; 3 * hidden];
    for row in d_hw.chunks(3 * hidden) {
        d_b_hh.iter_mut().zip(row).for_each(|(sum, &d)| *sum += d);
    }
    [
        tensor(d_xw, &[batch, steps, 3 * hidden]),
        tensor(d_w_hh, &[hidden, 3 * hidden]),
        tensor(d_b_hh, &[3 * hidden]),
        tensor(d_h0, &[batch, hidden]),
    ]
}

/// [`backward`] for some rows of the batch, from `w_hhᵀ`, their saved gates and `hw_n`, each
/// step's previous hidden state and their output's gradient: the gradients of their `xw`, `hw`
/// and `h0`.
fn backward_rows(
    shape: Recurrence,
    w_hh_t: &[f32],
    [gates, hidden_n, h_prev, grad]: [&[f32]; 4],
    [d_xw, d_hw, d_h0]: [&mut [f32]; 3],
) {
    let Recurrence { steps, hidden, .. } = shape;
    let rows = d_h0.len() / hidden;
    let [gate_row, out_row] = [steps * 3 * hidden, steps * hidden];
    // Each row's hidden state's gradient from the step after it (then its own).
    let d_h = d_h0;
    for s in (0..steps).rev() {
        let t = shape.time(s);
        for r in 0..rows {
            let at = r * out_row + t * hidden;
            let step = StepGrad {
                gates: &gates[r * gate_row + t * 3 * hidden..][..3 * hidden],
                hidden_n: &hidden_n[at..][..hidden],
                h_prev: &h_prev[at..][..hidden],
                d_out: &grad[at..][..hidden],
            };
            let d_gates = [&mut d_xw[r * gate_row..], &mut d_hw[r * gate_row..]];
            let [d_xw, d_hw] = d_gates.map(|d| &mut d[t * 3 * hidden..][..3 * hidden]);
            cell_backward(step, &mut d_h[r * hidden..][..hidden], d_xw, d_hw);
        }
        hidden_state_grad(shape, t, [d_hw, w_hh_t], d_h, true);
    }
}

/// One step of one row, as the backward pass reads it: its activated gates, its `hw_n`, the
/// hidden state before it and the gradient its output received.
struct StepGrad<'a> {
    gates: &'a [f32],
    hidden_n: &'a [f32],
    h_prev: &'a [f32],
    d_out: &'a [f32],
}

/// The gradients of one step's gates before their activations, into `d_xw` and (the new gate's
/// through the reset gate) `d_hw`; `d_h` enters as the hidden state's gradient from the step
/// after and leaves as the part of the previous hidden state's that does not go through `w_hh`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn cell_backward(step: StepGrad, d_h: &mut [f32], d_xw: &mut [f32], d_hw: &mut [f32]) {
    let hidden = d_h.len();
    let (z, rest) = step.gates.split_at(hidden);
    let (r, n) = rest.split_at(hidden);
    let (dx_z, rest) = d_xw.split_at_mut(hidden);
    let (dx_r, dx_n) = rest.split_at_mut(hidden);
    let (dh_z, rest) = d_hw.split_at_mut(hidden);
    let (dh_r, dh_n) = rest.split_at_mut(hidden);
    for j in 0..hidden {
        let dh = step.d_out[j] + d_h[j];
        let d_n = dh * (1.0 - z[j]) * (1.0 - n[j] * n[j]);
        let d_z = dh * (step.h_prev[j] - n[j]) * z[j] * (1.0 - z[j]);
        let d_r = d_n * step.hidden_n[j] * r[j] * (1.0 - r[j]);
        (dx_z[j], dx_r[j], dx_n[j]) = (d_z, d_r, d_n);
        (dh_z[j], dh_r[j], dh_n[j]) = (d_z, d_r, d_n * r[j]);
        d_h[j] = dh * z[j];
    }
}
