//! Recurrent layers' recurrences over a whole sequence on flex, forward and backward, each as
//! one op (`lstm.rs`, `gru.rs`): given the input's projection for every step (one product
//! outside), each step is one product of the previous hidden state by the joined hidden weights
//! and one pass over the gates. Here what both share: the shape and order of the steps, each
//! step's previous hidden state, and the hidden weights' gradient as one product over every row
//! and step (the gates' activations are `exp.rs`'s).
//!
//! Each batch row's recurrence is independent of the others', so rayon's threads each take a
//! share of the rows through every step, with no synchronisation between steps.

pub(crate) mod gru;
pub(crate) mod lstm;

use burn::tensor::TensorData;
use burn_flex::FlexTensor;
use rayon::prelude::*;

use crate::flex::gemm::gemm_f32::{View, gemm_f32};
use crate::flex::gemm::transpose::transpose_each;

/// The recurrence's sizes and direction.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Recurrence {
    pub batch: usize,
    pub steps: usize,
    pub hidden: usize,
    /// Whether the steps run from the last time index to the first (Burn's `reverse`).
    pub reverse: bool,
}

impl Recurrence {
    /// The recurrence of `xw`, the input's projection for every step (`[batch, steps, gates ·
    /// hidden]`), by the hidden weights `w_hh` (`[hidden, gates · hidden]`), the steps last to
    /// first with `reverse`. Checks both shapes: the products' SAFETY comments rely on them.
    pub(super) fn of_projection(
        xw: &FlexTensor,
        w_hh: &FlexTensor,
        gates: usize,
        reverse: bool,
    ) -> Self {
        let dims = xw.layout().shape().to_vec();
        assert!(
            dims.len() == 3 && dims[2].is_multiple_of(gates),
            "xw of {dims:?}"
        );
        let hidden = dims[2] / gates;
        let w_hh = w_hh.layout().shape().to_vec();
        assert_eq!(w_hh, [hidden, gates * hidden], "w_hh");
        Self {
            batch: dims[0],
            steps: dims[1],
            hidden,
            reverse,
        }
    }

    /// The recurrence whose output is `out` (`[batch, steps + extra_rows, hidden]`: the LSTM's
    /// last cell after its steps), checking that `grad`, the output's gradient, has its shape.
    pub(super) fn of_output(
        out: &FlexTensor,
        grad: &FlexTensor,
        extra_rows: usize,
        reverse: bool,
    ) -> Self {
        let dims = out.layout().shape().to_vec();
        let grad = grad.layout().shape().to_vec();
        assert_eq!(grad, dims, "the recurrent layer output's gradient");
        Self {
            batch: dims[0],
            steps: dims[1] - extra_rows,
            hidden: dims[2],
            reverse,
        }
    }

    /// The time index of the `s`-th step run.
    pub(super) fn time(self, s: usize) -> usize {
        if self.reverse { self.steps - 1 - s } else { s }
    }

    /// The time index of the step before the `s`-th (none before the first).
    pub(super) fn previous(self, s: usize) -> Option<usize> {
        s.checked_sub(1).map(|s| self.time(s))
    }

    /// Rows of the batch per task on rayon's threads.
    pub(super) fn rows_per_task(self) -> usize {
        self.batch.div_ceil(rayon::current_num_threads()).max(1)
    }
}

/// The `len` values at `read` and, mutably, those at `write` (which do not overlap them).
pub(super) fn read_and_write(
    values: &mut [f32],
    read: usize,
    write: usize,
    len: usize,
) -> (&[f32], &mut [f32]) {
    if read < write {
        let (before, after) = values.split_at_mut(write);
        (&before[read..][..len], &mut after[..len])
    } else {
        let (before, after) = values.split_at_mut(read);
        (&after[..len], &mut before[write..][..len])
    }
}

/// Each step's previous hidden state, `[batch · steps, hidden]` in the gates' order: `h0` for
/// the first step run, the output of the step run before for the others (`out`, `out_row`
/// values a batch row).
pub(super) fn previous_hidden(
    shape: Recurrence,
    h0: &[f32],
    out: &[f32],
    out_row: usize,
) -> Vec<f32> {
    let Recurrence { steps, hidden, .. } = shape;
    let mut h_prev = vec![0f32; shape.batch * steps * hidden];
    h_prev
        .par_chunks_mut(steps * hidden)
        .enumerate()
        .for_each(|(r, h_prev)| {
            for s in 0..steps {
                let from = match shape.previous(s) {
                    None => &h0[r * hidden..][..hidden],
                    Some(p) => &out[r * out_row + p * hidden..][..hidden],
                };
                h_prev[shape.time(s) * hidden..][..hidden].copy_from_slice(from);
            }
        });
    h_prev
}

/// `w_hh`'s gradient, `h_prevᵀ · d_gates` over every row and step (`d_gates` `width` values a
/// row: the gates side by side), its rows shared among rayon's threads.
pub(super) fn hidden_weight_grad(
    shape: Recurrence,
    h_prev: &[f32],
    d_gates: &[f32],
    width: usize,
) -> Vec<f32> {
    let hidden = shape.hidden;
    let products = shape.batch * shape.steps;
    let mut d_w = vec![0f32; hidden * width];
    let share = hidden.div_ceil(rayon::current_num_threads()).max(1);
    d_w.par_chunks_mut(share * width)
        .enumerate()
        .for_each(|(task, dst)| {
            let (first, rows) = (task * share, dst.len() / width);
            // SAFETY: `h_prev` is `products` rows of `hidden`, read transposed from column
            // `first` for `rows` columns; `d_gates` is `products` rows of `width`; `dst` is
            // `rows` rows of `width`, a buffer of its own.
            unsafe {
                let lhs = View::columns(h_prev[first..].as_ptr(), hidden);
                let rhs = View::rows(d_gates.as_ptr(), width);
                let dst = View::rows(dst.as_mut_ptr(), width);
                gemm_f32([rows, width, products], dst, false, lhs, rhs);
            }
        });
    d_w
}

/// `d_h = d_gates · w_hhᵀ` (or `d_h +=` that, where `accumulate`) at step `t` for some rows:
/// the hidden states' gradient through `w_hh`. `d_gates` holds the rows' gate gradients (`[rows,
/// steps, width]`), `w_hh_t` is `w_hhᵀ` (`[width, hidden]`, [`transposed`]), `d_h` `[rows,
/// hidden]`.
pub(super) fn hidden_state_grad(
    shape: Recurrence,
    t: usize,
    [d_gates, w_hh_t]: [&[f32]; 2],
    d_h: &mut [f32],
    accumulate: bool,
) {
    let (steps, hidden) = (shape.steps, shape.hidden);
    let (rows, width) = (d_h.len() / hidden, w_hh_t.len() / hidden);
    let d_gates = &d_gates[t * width..];
    assert!(rows == 0 || d_gates.len() >= (rows - 1) * steps * width + width);
    // SAFETY: `rows` rows of `width` values, `steps · width` apart, lie in `d_gates` (asserted),
    // `w_hh_t` is `width` rows of `hidden`, `d_h` `rows` rows of `hidden`, a buffer of its own.
    unsafe {
        let d_gates = View::rows(d_gates.as_ptr(), steps * width);
        let w_hh_t = View::rows(w_hh_t.as_ptr(), hidden);
        let dst = View::rows(d_h.as_mut_ptr(), hidden);
        gemm_f32([rows, hidden, width], dst, accumulate, d_gates, w_hh_t);
    }
}

/// A flex tensor of `values` in `dims`.
pub(super) fn tensor(values: Vec<f32>, dims: &[usize]) -> FlexTensor {
    FlexTensor::from_data(TensorData::new(values, dims))
}

/// `w` (`[rows, cols]`) transposed, row-major: the backward passes multiply by `w_hhᵀ` at every
/// step, and gemm packs it from contiguous rows rather than gathering columns apart.
pub(super) fn transposed(w: &[f32], [rows, cols]: [usize; 2]) -> Vec<f32> {
    let mut t = vec![0f32; w.len()];
    transpose_each(&mut t, w, [rows, cols]);
    t
}
