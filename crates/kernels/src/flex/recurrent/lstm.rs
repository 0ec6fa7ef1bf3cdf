//! An LSTM layer's recurrence over a whole sequence on flex, forward and backward, as one op
//! (the family's shape: `mod.rs`).
//!
//! Burn's `Lstm` composes each step of eight dense layers, four activations and the cell's
//! arithmetic, and writes each step's output into the whole output by `slice_assign`, all
//! recorded for autodiff: on 2 CPU cores, forward and backward of batch 32, 64 steps, 256
//! features, it took 170 ms where PyTorch's took 43 (bench/HISTORY.md, "LSTM, GRU and
//! dropout on the drop-in layers").
//!
//! The gates are PyTorch's order, `[i, f, g, o]` (input, forget, cell, output), each `hidden`
//! wide.

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
/// gates after their activations (`[batch, steps, 4 · hidden]`) and its cell (`[batch, steps,
/// hidden]`).
#[derive(Debug)]
pub(crate) struct LstmSaved {
    gates: Vec<f32>,
    cells: Vec<f32>,
}

/// The recurrence of `xw` (`[batch, steps, 4 · hidden]`: the input's projection and both
/// biases) with the hidden weights `w_hh` (`[hidden, 4 · hidden]`) from `h0` and `c0` (`[batch,
/// hidden]`): `[batch, steps + 1, hidden]`, each step's hidden state at its time index and the
/// last cell after them.
pub(crate) fn forward(
    xw: FlexTensor,
    w_hh: &FlexTensor,
    [h0, c0]: [&FlexTensor; 2],
    reverse: bool,
) -> (FlexTensor, LstmSaved) {
    let shape = Recurrence::of_projection(&xw, w_hh, 4, reverse);
    let Recurrence { steps, hidden, .. } = shape;
    for initial in [h0, c0] {
        assert_eq!(initial.layout().shape().to_vec(), [shape.batch, hidden]);
    }
    let mut gates = owned(xw).storage::<f32>().to_vec();
    let mut cells = vec![0f32; gates.len() / 4];
    let mut out = vec![0f32; shape.batch * (steps + 1) * hidden];
    let (w_hh, h0, c0) = (owned(w_hh.clone()), owned(h0.clone()), owned(c0.clone()));
    let (w_hh, h0, c0): (&[f32], &[f32], &[f32]) = (w_hh.storage(), h0.storage(), c0.storage());
    let rows = shape.rows_per_task();
    gates
        .par_chunks_mut(rows * steps * 4 * hidden)
        .zip(cells.par_chunks_mut(rows * steps * hidden))
        .zip(out.par_chunks_mut(rows * (steps + 1) * hidden))
        .enumerate()
        .for_each(|(task, ((gates, cells), out))| {
            let first = task * rows * hidden;
            let initial = [&h0[first..], &c0[first..]];
            forward_rows(shape, w_hh, initial, [gates, cells, out]);
        });
    let out = tensor(out, &[shape.batch, steps + 1, hidden]);
    (out, LstmSaved { gates, cells })
}

/// [`forward`] for some rows of the batch: `gates` enters holding their `xw`.
fn forward_rows(
    shape: Recurrence,
    w_hh: &[f32],
    [h0, c0]: [&[f32]; 2],
    [gates, cells, out]: [&mut [f32]; 3],
) {
    let Recurrence { steps, hidden, .. } = shape;
    let rows = cells.len() / (steps * hidden);
    let [gate_row, out_row] = [steps * 4 * hidden, (steps + 1) * hidden];
    for s in 0..steps {
        let (t, previous) = (shape.time(s), shape.previous(s));
        let h_prev = match previous {
            None => View::rows(h0.as_ptr(), hidden),
            Some(p) => View::rows(out[p * hidden..].as_ptr(), out_row),
        };
        // SAFETY: `rows` rows of `hidden` values at those strides lie in `h0` or `out`, the
        // `rows` rows of `4 · hidden` at step `t` in `gates`, and `w_hh` is `hidden` rows of
        // `4 · hidden`; `gates` is a buffer of its own.
        unsafe {
            let dst = View::rows(gates[t * 4 * hidden..].as_mut_ptr(), gate_row);
            let w_hh = View::rows(w_hh.as_ptr(), 4 * hidden);
            gemm_f32([rows, 4 * hidden, hidden], dst, true, h_prev, w_hh);
        }
        for r in 0..rows {
            let at = |time: usize| (r * steps + time) * hidden;
            let (c_prev, cell) = match previous {
                None => (&c0[r * hidden..][..hidden], &mut cells[at(t)..][..hidden]),
                Some(p) => read_and_write(cells, at(p), at(t), hidden),
            };
            let gates = &mut gates[r * gate_row + t * 4 * hidden..][..4 * hidden];
            let h = &mut out[r * out_row + t * hidden..][..hidden];
            cell_forward(gates, c_prev, cell, h);
        }
    }
    let last = shape.time(steps - 1);
    for r in 0..rows {
        let cell = &cells[(r * steps + last) * hidden..][..hidden];
        out[r * out_row + steps * hidden..][..hidden].copy_from_slice(cell);
    }
}

/// One step of one row: the gates' activations in place, the new cell `c` and hidden state `h`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn cell_forward(gates: &mut [f32], c_prev: &[f32], c: &mut [f32], h: &mut [f32]) {
    let hidden = c.len();
    let (i, rest) = gates.split_at_mut(hidden);
    let (f, rest) = rest.split_at_mut(hidden);
    let (g, o) = rest.split_at_mut(hidden);
    let values = i.iter_mut().zip(f).zip(g).zip(o.iter_mut());
    for ((((i, f), g), o), ((&c_prev, c), h)) in values.zip(c_prev.iter().zip(c).zip(h)) {
        (*i, *f, *g, *o) = (sigmoid(*i), sigmoid(*f), tanh(*g), sigmoid(*o));
        *c = *f * c_prev + *i * *g;
        *h = *o * tanh(*c);
    }
}

/// The gradients of [`forward`]'s `xw`, `w_hh`, `h0` and `c0` given `grad`, the gradient of
/// its output, which is `out`.
pub(crate) fn backward(
    saved: &LstmSaved,
    w_hh: &FlexTensor,
    [h0, c0, out]: [&FlexTensor; 3],
    grad: FlexTensor,
    reverse: bool,
) -> [FlexTensor; 4] {
    let shape = Recurrence::of_output(out, &grad, 1, reverse);
    let Recurrence {
        batch,
        steps,
        hidden,
        ..
    } = shape;
    let (w_hh, h0, c0) = (owned(w_hh.clone()), owned(h0.clone()), owned(c0.clone()));
    let (out, grad) = (owned(out.clone()), owned(grad));
    let (w_hh, h0, c0): (&[f32], &[f32], &[f32]) = (w_hh.storage(), h0.storage(), c0.storage());
    let (out, grad): (&[f32], &[f32]) = (out.storage(), grad.storage());
    let w_hh_t = transposed(w_hh, [hidden, 4 * hidden]);
    let mut d_gates = vec![0f32; saved.gates.len()];
    let (mut d_h0, mut d_c0) = (vec![0f32; batch * hidden], vec![0f32; batch * hidden]);
    let rows = shape.rows_per_task();
    d_gates
        .par_chunks_mut(rows * steps * 4 * hidden)
        .zip(d_h0.par_chunks_mut(rows * hidden))
        .zip(d_c0.par_chunks_mut(rows * hidden))
        .enumerate()
        .for_each(|(task, ((d_gates, d_h0), d_c0))| {
            let first = task * rows;
            let saved = [
                &saved.gates[first * steps * 4 * hidden..],
                &saved.cells[first * steps * hidden..],
                &c0[first * hidden..],
            ];
            let grad = &grad[first * (steps + 1) * hidden..];
            backward_rows(shape, &w_hh_t, saved, grad, [d_gates, d_h0, d_c0]);
        });
    let h_prev = previous_hidden(shape, h0, out, (steps + 1) * hidden);
    let d_w_hh = hidden_weight_grad(shape, &h_prev, &d_gates, 4 * hidden);
    [
        tensor(d_gates, &[batch, steps, 4 * hidden]),
        tensor(d_w_hh, &[hidden, 4 * hidden]),
        tensor(d_h0, &[batch, hidden]),
        tensor(d_c0, &[batch, hidden]),
    ]
}

/// [`backward`] for some rows of the batch, from `w_hhᵀ`, their saved gates, cells and `c0`,
/// and their output's gradient: their gates' gradients (`xw`'s) and `h0`'s and `c0`'s.
fn backward_rows(
    shape: Recurrence,
    w_hh_t: &[f32],
    [gates, cells, c0]: [&[f32]; 3],
    grad: &[f32],
    [d_gates, d_h0, d_c0]: [&mut [f32]; 3],
) {
    let Recurrence { steps, hidden, .. } = shape;
    let rows = d_h0.len() / hidden;
    let [gate_row, out_row] = [steps * 4 * hidden, (steps + 1) * hidden];
    // The gradient reaching each row's hidden state from the step after it (zeros after the
    // last), and its cell's; after the first step, `h0`'s and `c0`'s.
    let (d_h, d_c) = (d_h0, d_c0);
    for (r, d_c) in d_c.chunks_mut(hidden).enumerate() {
        d_c.copy_from_slice(&grad[r * out_row + steps * hidden..][..hidden]);
    }
    for s in (0..steps).rev() {
        let (t, previous) = (shape.time(s), shape.previous(s));
        for r in 0..rows {
            let c_prev = match previous {
                None => &c0[r * hidden..][..hidden],
                Some(p) => &cells[(r * steps + p) * hidden..][..hidden],
            };
            let step = StepGrad {
                gates: &gates[r * gate_row + t * 4 * hidden..][..4 * hidden],
                cell: &cells[(r * steps + t) * hidden..][..hidden],
                c_prev,
                d_out: &grad[r * out_row + t * hidden..][..hidden],
            };
            let d_gates = &mut d_gates[r * gate_row + t * 4 * hidden..][..4 * hidden];
            let d_h = &d_h[r * hidden..][..hidden];
            cell_backward(step, d_h, &mut d_c[r * hidden..][..hidden], d_gates);
        }
        hidden_state_grad(shape, t, [d_gates, w_hh_t], d_h, false);
    }
}

/// One step of one row, as the backward pass reads it: its activated gates, its cell, the
/// cell before it and the gradient its output received.
struct StepGrad<'a> {
    gates: &'a [f32],
    cell: &'a [f32],
    c_prev: &'a [f32],
    d_out: &'a [f32],
}

/// The gradients of one step's gates (before their activations) into `d_gates`, given the
/// hidden state's gradient from the step after (`d_h_next`) and the cell's, `d_c`, which this
/// turns into the previous cell's.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn cell_backward(step: StepGrad, d_h_next: &[f32], d_c: &mut [f32], d_gates: &mut [f32]) {
    let hidden = d_c.len();
    let (i, rest) = step.gates.split_at(hidden);
    let (f, rest) = rest.split_at(hidden);
    let (g, o) = rest.split_at(hidden);
    let (d_i, rest) = d_gates.split_at_mut(hidden);
    let (d_f, rest) = rest.split_at_mut(hidden);
    let (d_g, d_o) = rest.split_at_mut(hidden);
    for j in 0..hidden {
        let (i, f, g, o) = (i[j], f[j], g[j], o[j]);
        let tanh_c = tanh(step.cell[j]);
        let d_h = step.d_out[j] + d_h_next[j];
        let dc = d_c[j] + d_h * o * (1.0 - tanh_c * tanh_c);
        d_o[j] = d_h * tanh_c * o * (1.0 - o);
        d_i[j] = dc * g * i * (1.0 - i);
        d_g[j] = dc * i * (1.0 - g * g);
        d_f[j] = dc * step.c_prev[j] * f * (1.0 - f);
        d_c[j] = dc * f;
    }
}
