//! One head's attention, forward and backward, a block of queries at a time: the block's scores
//! (`block × seq_k`, in a scratch that stays in cache) by one product, made weights row by row,
//! then their products with the values (forward) or with the keys and queries (backward).

use crate::flex::gemm::gemm_f32::{View, gemm_f32};
use crate::flex::softmax::lane_dot;

use super::scores::{Row, RowScale, Scores, weights, weights_again};

/// Scores a block holds at most (its rows times `seq_k`): 256 KiB of f32, in L2 beside the
/// block's rows of queries and the keys.
const BLOCK_SCORES: usize = 1 << 16;

/// A `[batch, heads, rows, cols]` operand read in place: its values, where its first is, the
/// strides between heads (`[batch, head]`), rows and columns.
pub(super) struct Operand<'a> {
    pub values: &'a [f32],
    pub start: usize,
    pub strides: [usize; 4],
}

impl Operand<'_> {
    /// Head `head`'s matrix from row `row` on.
    fn at(&self, [batch, head]: [usize; 2], row: usize) -> *const f32 {
        let [b, h, r, _] = self.strides;
        let offset = self.start + batch * b + head * h + row * r;
        // The caller's strides keep every value of this head inside `values`: see `Operand`'s
        // construction in `attention/mod.rs`.
        self.values[offset..].as_ptr()
    }

    /// Head `head`'s matrix from row `row` on, as a product's operand.
    fn rows(&self, head: [usize; 2], row: usize) -> View<*const f32> {
        View {
            ptr: self.at(head, row),
            row_stride: self.strides[2],
            col_stride: self.strides[3],
        }
    }

    /// Head `head`'s matrix transposed, as a product's operand.
    fn transposed(&self, head: [usize; 2]) -> View<*const f32> {
        View {
            ptr: self.at(head, 0),
            row_stride: self.strides[3],
            col_stride: self.strides[2],
        }
    }
}

/// The lengths a head's products need: `[seq_q, seq_k]`, the queries' and keys' width `d`,
/// the values' width `d_v`, and the heads of a batch item.
#[derive(Clone, Copy)]
pub(super) struct Dims {
    pub seqs: [usize; 2],
    pub d: usize,
    pub d_v: usize,
    pub heads: usize,
}

impl Dims {
    /// Queries a block takes.
    fn block(&self) -> usize {
        (BLOCK_SCORES / self.seqs[1].max(1)).clamp(1, self.seqs[0].max(1))
    }

    /// Query `query`'s row of head `head`.
    fn row(&self, head: [usize; 2], query: usize) -> Row {
        Row {
            head,
            heads: self.heads,
            query,
            seqs: self.seqs,
        }
    }
}

/// The inputs of one head: queries, keys and values.
pub(super) struct Inputs<'a> {
    pub q: Operand<'a>,
    pub k: Operand<'a>,
    pub v: Operand<'a>,
}

/// Head `head`'s output (`seq_q × d_v`, contiguous) and each query's [`RowScale`].
pub(super) fn forward(
    inputs: &Inputs,
    scores: &Scores,
    dims: Dims,
    head: [usize; 2],
    out: &mut [f32],
    row_scales: &mut [RowScale],
) {
    let ([seq_q, seq_k], block) = (dims.seqs, dims.block());
    let mut weights_block = vec![0.0; block * seq_k];
    for first in (0..seq_q).step_by(block) {
        let rows = block.min(seq_q - first);
        let w = &mut weights_block[..rows * seq_k];
        block_scores(inputs, dims, head, first, w);
        for (i, row) in w.chunks_exact_mut(seq_k).enumerate() {
            let at = dims.row(head, first + i);
            scores.scale_and_mask(row, at, scores.fill);
            row_scales[first + i] = weights(row);
            scores.drop(row, at);
        }
        // SAFETY: `out` holds `seq_q × d_v` values and `w` `rows × seq_k`; the values'
        // operand is the head's `seq_k × d_v` matrix; `out` is a buffer of its own.
        unsafe {
            gemm_f32(
                [rows, dims.d_v, seq_k],
                View::rows(out[first * dims.d_v..].as_mut_ptr(), dims.d_v),
                false,
                View::rows(w.as_ptr(), seq_k),
                inputs.v.rows(head, 0),
            );
        }
    }
}

/// What a head's backward pass reads besides its inputs: its output and the output's gradient
/// (`seq_q × d_v` each, contiguous) and each query's [`RowScale`].
pub(super) struct Saved<'a> {
    pub out: &'a [f32],
    pub grad: &'a [f32],
    pub row_scales: &'a [RowScale],
}

/// Head `head`'s gradients `[dq, dk, dv]` (`seq_q × d`, `seq_k × d`, `seq_k × d_v`,
/// contiguous): the weights of each block of queries made again from their row scales, then
/// (with `P` the weights, `D` their dropout's, `G` the output's gradient) `dV += Dᵀ·G`,
/// `dP = G·Vᵀ` through the dropout, `dS = P ⊙ (dP - rowsum(G ⊙ O))` zero where masked and
/// times the scale, `dQ = dS·K`, `dK += dSᵀ·Q`.
pub(super) fn backward(
    inputs: &Inputs,
    saved: &Saved,
    scores: &Scores,
    dims: Dims,
    head: [usize; 2],
    [dq, dk, dv]: [&mut [f32]; 3],
) {
    let ([seq_q, seq_k], block) = (dims.seqs, dims.block());
    let (d, d_v) = (dims.d, dims.d_v);
    let mut weights_block = vec![0.0; block * seq_k];
    let mut grads_block = vec![0.0; block * seq_k];
    for first in (0..seq_q).step_by(block) {
        let rows = block.min(seq_q - first);
        let (w, dw) = (
            &mut weights_block[..rows * seq_k],
            &mut grads_block[..rows * seq_k],
        );
        block_scores(inputs, dims, head, first, w);
        for (i, (row, dropped)) in w
            .chunks_exact_mut(seq_k)
            .zip(dw.chunks_exact_mut(seq_k))
            .enumerate()
        {
            let at = dims.row(head, first + i);
            scores.scale_and_mask(row, at, scores.fill);
            weights_again(row, saved.row_scales[first + i]);
            if scores.dropout.is_some() {
                dropped.copy_from_slice(row);
                scores.drop(dropped, at);
            }
        }
        // The weights as the output took them: after dropout, if any.
        let dropped = match scores.dropout {
            Some(_) => dw.as_ptr(),
            None => w.as_ptr(),
        };
        let grad_rows = || View::rows(saved.grad[first * d_v..].as_ptr(), d_v);
        // SAFETY: each buffer holds the rows and columns its view reaches (`dw`, `w`: `rows ×
        // seq_k`; `dv`: `seq_k × d_v`; the gradient: `seq_q × d_v`; the values: the head's);
        // each destination is a buffer of its own, and the first product has read `dw` before
        // the second writes it.
        unsafe {
            // dV += Dᵀ·G, then dP = G·Vᵀ over the dropped weights, no longer needed.
            gemm_f32(
                [seq_k, d_v, rows],
                View::rows(dv.as_mut_ptr(), d_v),
                first > 0,
                View::columns(dropped, seq_k),
                grad_rows(),
            );
            gemm_f32(
                [rows, seq_k, d_v],
                View::rows(dw.as_mut_ptr(), seq_k),
                false,
                grad_rows(),
                inputs.v.transposed(head),
            );
        }
        for (i, (weights, grads)) in w
            .chunks_exact(seq_k)
            .zip(dw.chunks_exact_mut(seq_k))
            .enumerate()
        {
            let (query, at) = (first + i, dims.row(head, first + i));
            scores.drop(grads, at);
            let out_dot_grad = lane_dot(
                &saved.out[query * d_v..][..d_v],
                &saved.grad[query * d_v..][..d_v],
            );
            score_gradients(grads, weights, out_dot_grad, scores.scale);
            scores.set_masked(grads, at, 0.0);
        }
        // SAFETY: `dw` holds `rows × seq_k` values, `dq` `seq_q × d`, `dk` `seq_k × d`; the keys'
        // and queries' operands are the head's; the destinations are buffers of their own.
        unsafe {
            gemm_f32(
                [rows, d, seq_k],
                View::rows(dq[first * d..].as_mut_ptr(), d),
                false,
                View::rows(dw.as_ptr(), seq_k),
                inputs.k.rows(head, 0),
            );
            gemm_f32(
                [seq_k, d, rows],
                View::rows(dk.as_mut_ptr(), d),
                first > 0,
                View::columns(dw.as_ptr(), seq_k),
                inputs.q.rows(head, first),
            );
        }
    }
}

/// The scores `Q·Kᵀ` of queries `first..first + rows` of head `head` into `out` (`rows ×
/// seq_k`), unscaled.
fn block_scores(inputs: &Inputs, dims: Dims, head: [usize; 2], first: usize, out: &mut [f32]) {
    let rows = out.len() / dims.seqs[1].max(1);
    // SAFETY: `out` holds `rows × seq_k` values; the operands are the head's queries from row
    // `first` (`rows × d`) and its keys transposed (`d × seq_k`); `out` is a buffer of its own.
    unsafe {
        gemm_f32(
            [rows, dims.seqs[1], dims.d],
            View::rows(out.as_mut_ptr(), dims.seqs[1]),
            false,
            inputs.q.rows(head, first),
            inputs.k.transposed(head),
        );
    }
}

/// `grads[j] = weights[j] · (grads[j] - out_dot_grad) · scale`: the scores' gradient from the
/// weights' (softmax's backward pass, `Σ_j P·dP` being the output's `O·G`).
#[multiversion::multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn score_gradients(grads: &mut [f32], weights: &[f32], out_dot_grad: f32, scale: f32) {
    for (g, &w) in grads.iter_mut().zip(weights) {
        *g = w * (*g - out_dot_grad) * scale;
    }
}
