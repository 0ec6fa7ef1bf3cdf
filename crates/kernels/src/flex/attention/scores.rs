//! What turns a head's scores into its weights: [`Scores`] (the scale, the masks, what masked
//! scores become, dropout) and the row passes that apply it.

use std::sync::Arc;

use multiversion::multiversion;

use crate::flex::dropout::{DropoutMask, apply_in_place};
use crate::flex::exp::exp;
use crate::flex::memory::SUM_LANES;
use crate::flex::softmax::row_max;

/// How the scores `Q·Kᵀ` of `[batch, heads, seq_q, seq_k]` become the weights of the values.
#[derive(Clone, Debug)]
pub(crate) struct Scores {
    /// What each product is multiplied by (Burn's default `1/√d`).
    pub scale: f32,
    /// Whether a query attends only to the keys up to its own place, aligned at the last key
    /// as Burn's (`j > i + seq_k - seq_q` masked: a query block at the end of a longer key
    /// sequence sees all keys before it).
    pub causal: bool,
    /// Scores masked by `mask` or `causal` and `true` there.
    pub mask: Option<ScoreMask>,
    /// What a masked score becomes: `-∞` (Burn's `attention`: a row all masked weighs nothing
    /// and outputs zeros) or a finite value (Burn's multi-head attention's `min_float`: a row
    /// all masked weighs its keys evenly).
    pub fill: f32,
    /// Dropout of the weights (of the `[batch, heads, seq_q, seq_k]` tensor Burn would drop).
    pub dropout: Option<DropoutMask>,
}

/// A boolean mask of the scores, `true` where masked: one value per score, or per broadcast
/// axis (a padding mask `[batch, 1, 1, seq_k]`, one mask of `[batch, 1, seq_q, seq_k]` for
/// every head), read through a stride per axis (0 on the broadcast ones).
#[derive(Clone, Debug)]
pub(crate) struct ScoreMask {
    masked: Arc<[bool]>,
    strides: [usize; 4],
}

impl ScoreMask {
    /// `masked`, of shape `dims` (each `scores`' or 1), over scores of shape `scores`.
    ///
    /// # Panics
    /// If a dimension is neither the scores' nor 1, or `masked` is not `dims`' size.
    pub(crate) fn new(masked: Vec<bool>, dims: [usize; 4], scores: [usize; 4]) -> Self {
        assert!(
            dims.iter().zip(scores).all(|(&d, s)| d == s || d == 1),
            "an attention mask of shape {dims:?} for scores of shape {scores:?}"
        );
        assert_eq!(masked.len(), dims.iter().product::<usize>());
        let mut strides = [0; 4];
        let mut stride = 1;
        for axis in (0..4).rev() {
            strides[axis] = if dims[axis] == 1 { 0 } else { stride };
            stride *= dims[axis];
        }
        Self {
            masked: masked.into(),
            strides,
        }
    }

    /// The mask of one row of scores (`query` of head `[batch, head]`), a value per key.
    fn row(
        &self,
        [batch, head]: [usize; 2],
        query: usize,
        keys: usize,
    ) -> impl Iterator<Item = bool> {
        let [b, h, q, k] = self.strides;
        let first = batch * b + head * h + query * q;
        (0..keys).map(move |j| self.masked[first + j * k])
    }
}

/// Where one row of scores sits: its head `[batch, head]` of `heads` a batch item, its query,
/// and the sequences' lengths `[seq_q, seq_k]`.
#[derive(Clone, Copy)]
pub(super) struct Row {
    pub head: [usize; 2],
    pub heads: usize,
    pub query: usize,
    pub seqs: [usize; 2],
}

impl Scores {
    /// `row` (products `Q·Kᵀ` of one query) scaled, with its masked scores set to `value`.
    pub(super) fn scale_and_mask(&self, row: &mut [f32], at: Row, value: f32) {
        scale(row, self.scale);
        self.set_masked(row, at, value);
    }

    /// `row`'s masked places set to `value` (`row` the scores of the first keys, or all).
    pub(super) fn set_masked(&self, row: &mut [f32], at: Row, value: f32) {
        let [seq_q, seq_k] = at.seqs;
        if self.causal {
            // Keys past `query + seq_k - seq_q` are the future; none when that is past the end.
            let last_seen = (at.query + seq_k).checked_sub(seq_q);
            let first_masked = last_seen.map_or(0, |last| (last + 1).min(seq_k));
            // A row of a block may hold only the keys the block's last query sees.
            let keys = row.len();
            row[first_masked.min(keys)..].fill(value);
        }
        if let Some(mask) = &self.mask {
            for (score, masked) in row.iter_mut().zip(mask.row(at.head, at.query, seq_k)) {
                if masked {
                    *score = value;
                }
            }
        }
    }

    /// The weights' dropout on `row` (weights of query `at`), in place, if any.
    pub(super) fn drop(&self, row: &mut [f32], at: Row) {
        if let Some(mask) = self.dropout {
            apply_in_place(row, first_index(at), mask);
        }
    }
}

/// The index of `at`'s first weight in the `[batch, heads, seq_q, seq_k]` weights.
fn first_index(at: Row) -> u64 {
    let [batch, head] = at.head.map(|i| i as u64);
    let [seq_q, seq_k] = at.seqs.map(|n| n as u64);
    ((batch * at.heads as u64 + head) * seq_q + at.query as u64) * seq_k
}

/// `row *= scale`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn scale(row: &mut [f32], scale: f32) {
    row.iter_mut().for_each(|s| *s *= scale);
}

/// A row's maximum score and the inverse of the sum of its exponentials, from which the
/// backward pass makes its weights again (`e^(s - max) / sum`). Not the log-sum-exp alone
/// (FlashAttention's): beside a maximum of `-10⁴` (a row all masked to multi-head attention's
/// `min_float`) its f32 keeps ~3 digits, the weights made again from it 5e-4 off.
pub(crate) type RowScale = [f32; 2];

/// A row of scaled and masked scores into its weights, `e^(s - max) / Σ e^(s - max)`, in
/// place; returns its [`RowScale`]. A row all `-∞` (all masked, `fill` `-∞`) weighs nothing,
/// as Burn's: zeros, its maximum taken as `+∞`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
pub(super) fn weights(row: &mut [f32]) -> RowScale {
    let max = row_max(row);
    if max == f32::NEG_INFINITY {
        row.fill(0.0);
        return [f32::INFINITY, 0.0];
    }
    let mut sums = [0.0f32; SUM_LANES];
    let (lanes, rest) = row.as_chunks_mut::<SUM_LANES>();
    for lane in lanes {
        for l in 0..SUM_LANES {
            lane[l] = exp(lane[l] - max);
            sums[l] += lane[l];
        }
    }
    for (l, s) in rest.iter_mut().enumerate() {
        *s = exp(*s - max);
        sums[l] += *s;
    }
    let inverse = 1.0 / sums.iter().sum::<f32>();
    row.iter_mut().for_each(|w| *w *= inverse);
    [max, inverse]
}

/// A row of scaled and masked scores into the weights [`weights`] made of them, given what it
/// returned: `e^(s - max) / sum`, the same values.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
pub(super) fn weights_again(row: &mut [f32], [max, inverse]: RowScale) {
    row.iter_mut().for_each(|s| *s = exp(*s - max) * inverse);
}
