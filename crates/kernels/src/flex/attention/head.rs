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

/// Queries a block takes at most where a causal mask hides keys: the smaller the block, the
/// more of the hidden keys' products its rows skip (blocks of 64 of 256 queries compute 62% of
/// the scores).
const CAUSAL_BLOCK: usize = 64;

/// A block of queries `first..first + rows` and the keys `0..keys` that any of them sees.
#[derive(Clone, Copy)]
struct Block {
    first: usize,
    rows: usize,
    keys: usize,
}

impl Dims {
    /// The blocks of queries, each with every key, but where a causal mask hides the later keys
    /// from all of a block's queries and masked scores weigh nothing (`fill` `-∞`): then only
    /// the keys its last query sees, the products of the others skipped.
    fn blocks(&self, scores: &Scores) -> impl Iterator<Item = Block> {
        let [seq_q, seq_k] = self.seqs;
        let skips = scores.causal && scores.fill == f32::NEG_INFINITY;
        let most = (BLOCK_SCORES / seq_k.max(1)).clamp(1, seq_q.max(1));
        let block = if skips { most.min(CAUSAL_BLOCK) } else { most };
        (0..seq_q).step_by(block).map(move |first| {
            let rows = block.min(seq_q - first);
            let keys = match skips {
                true => (first + rows + seq_k).saturating_sub(seq_q).min(seq_k),
                false => seq_k,
            };
            Block { first, rows, keys }
        })
    }

    /// Scores a block's scratch holds.
    fn block_scores(&self) -> usize {
        BLOCK_SCORES.max(self.seqs[1])
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

/// A task's scratch for a block's scores (and their gradients and the cap's slopes, backward),
/// made once per task of rayon's rather than zeroed again for each head.
pub(super) struct Scratch {
    weights: Vec<f32>,
    grads: Vec<f32>,
    /// Empty without a cap.
    slopes: Vec<f32>,
}

impl Scratch {
    /// Room for `dims`' blocks of `scores`.
    pub(super) fn new(dims: Dims, scores: &Scores) -> Self {
        let len = dims.block_scores();
        let slopes = if scores.softcap.is_some() { len } else { 0 };
        Self {
            weights: vec![0.0; len],
            grads: vec![0.0; len],
            slopes: vec![0.0; slopes],
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
    scratch: &mut Scratch,
) {
    for Block { first, rows, keys } in dims.blocks(scores) {
        if keys == 0 {
            // Every query of the block sees no key: its outputs stay zeros (as `weights` makes
            // them), and the backward pass skips the block too.
            continue;
        }
        let w = &mut scratch.weights[..rows * keys];
        block_scores(inputs, dims.d, head, first, w, keys);
        for (i, row) in w.chunks_exact_mut(keys).enumerate() {
            let at = dims.row(head, first + i);
            scores.finish(row, at);
            row_scales[first + i] = weights(row);
            scores.drop(row, at);
        }
        // SAFETY: `out` holds `seq_q × d_v` values and `w` `rows × keys`; the values'
        // operand is the head's `seq_k × d_v` matrix, `keys ≤ seq_k`; `out` is a buffer of
        // its own.
        unsafe {
            gemm_f32(
                [rows, dims.d_v, keys],
                View::rows(out[first * dims.d_v..].as_mut_ptr(), dims.d_v),
                false,
                View::rows(w.as_ptr(), keys),
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
/// times the scale (and the cap's slope, if capped), `dQ = dS·K`, `dK += dSᵀ·Q`.
pub(super) fn backward(
    inputs: &Inputs,
    saved: &Saved,
    scores: &Scores,
    dims: Dims,
    head: [usize; 2],
    [dq, dk, dv]: [&mut [f32]; 3],
    scratch: &mut Scratch,
) {
    let (d, d_v) = (dims.d, dims.d_v);
    for Block { first, rows, keys } in dims.blocks(scores).filter(|block| block.keys > 0) {
        let (w, dw) = (
            &mut scratch.weights[..rows * keys],
            &mut scratch.grads[..rows * keys],
        );
        block_scores(inputs, d, head, first, w, keys);
        let slopes = &mut scratch.slopes[..];
        let block_rows = w.chunks_exact_mut(keys).zip(dw.chunks_exact_mut(keys));
        for (i, (row, dropped)) in block_rows.enumerate() {
            let at = dims.row(head, first + i);
            if scores.softcap.is_some() {
                scores.cap_slopes(row, &mut slopes[i * keys..][..keys]);
            }
            scores.finish(row, at);
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
        // keys`; `dv`: `seq_k × d_v`, `keys ≤ seq_k`; the gradient: `seq_q × d_v`; the values:
        // the head's); each destination is a buffer of its own, and the first product has
        // read `dw` before the second writes it. `dv` starts zeroed: every block adds to it.
        unsafe {
            // dV += Dᵀ·G, then dP = G·Vᵀ over the dropped weights, no longer needed.
            gemm_f32(
                [keys, d_v, rows],
                View::rows(dv.as_mut_ptr(), d_v),
                true,
                View::columns(dropped, keys),
                grad_rows(),
            );
            gemm_f32(
                [rows, keys, d_v],
                View::rows(dw.as_mut_ptr(), keys),
                false,
                grad_rows(),
                inputs.v.transposed(head),
            );
        }
        for (i, (weights, grads)) in w
            .chunks_exact(keys)
            .zip(dw.chunks_exact_mut(keys))
            .enumerate()
        {
            let (query, at) = (first + i, dims.row(head, first + i));
            scores.drop(grads, at);
            let out_dot_grad = lane_dot(
                &saved.out[query * d_v..][..d_v],
                &saved.grad[query * d_v..][..d_v],
            );
            score_gradients(grads, weights, out_dot_grad, scores.scale);
            if scores.softcap.is_some() {
                let slopes = &slopes[i * keys..][..keys];
                grads
                    .iter_mut()
                    .zip(slopes)
                    .for_each(|(g, slope)| *g *= slope);
            }
            scores.set_masked(grads, at, 0.0);
        }
        // SAFETY: `dw` holds `rows × keys` values, `dq` `seq_q × d`, `dk` `seq_k × d`; the
        // keys' and queries' operands are the head's; the destinations are buffers of their
        // own. `dk` starts zeroed: every block adds to it.
        unsafe {
            gemm_f32(
                [rows, d, keys],
                View::rows(dq[first * d..].as_mut_ptr(), d),
                false,
                View::rows(dw.as_ptr(), keys),
                inputs.k.rows(head, 0),
            );
            gemm_f32(
                [keys, d, rows],
                View::rows(dk.as_mut_ptr(), d),
                true,
                View::columns(dw.as_ptr(), keys),
                inputs.q.rows(head, first),
            );
        }
    }
}

/// The scores `Q·Kᵀ` of queries `first..first + rows` of head `head` with keys `0..keys` into
/// `out` (`rows × keys`), unscaled.
fn block_scores(
    inputs: &Inputs,
    d: usize,
    head: [usize; 2],
    first: usize,
    out: &mut [f32],
    keys: usize,
) {
    let rows = out.len() / keys;
    // SAFETY: `out` holds `rows × keys` values; the operands are the head's queries from row
    // `first` (`rows × d`) and its first `keys` keys transposed (`d × keys`); `out` is a
    // buffer of its own.
    unsafe {
        gemm_f32(
            [rows, keys, d],
            View::rows(out.as_mut_ptr(), keys),
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
