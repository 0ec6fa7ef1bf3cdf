//! What turns a head's scores into its weights: [`Scores`] (the scale, the cap, the masks, what
//! masked scores become, an additive bias, dropout) and the row passes that apply it.

use std::sync::Arc;

use multiversion::multiversion;

use crate::flex::dropout::{DropoutMask, apply_in_place};
use crate::flex::exp::{exp, tanh};
use crate::flex::memory::SUM_LANES;
use crate::flex::softmax::row_max;

/// How the scores `Q·Kᵀ` of `[batch, heads, seq_q, seq_k]` become the weights of the values,
/// in Burn's order (`attention_fallback`'s): scaled, capped, masked, biased, softmax, dropout.
#[derive(Clone, Debug)]
pub(crate) struct Scores {
    /// What each product is multiplied by (Burn's default `1/√d`).
    pub scale: f32,
    /// Gemma 2's cap of the scaled scores, `cap · tanh(s / cap)` (Burn's `softcap`), before
    /// any mask.
    pub softcap: Option<f32>,
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
    /// A constant added to the scores after the masks (Burn's `attn_bias` where it takes no
    /// gradient: ALiBi's slopes, a mask as `0` and `-∞`).
    pub bias: Option<ScoreBias>,
    /// Dropout of the weights (of the `[batch, heads, seq_q, seq_k]` tensor Burn would drop).
    pub dropout: Option<DropoutMask>,
}

/// Values over the scores: one per score, or per broadcast axis (a padding mask `[batch, 1, 1,
/// seq_k]`, one bias of `[1, heads, seq_q, seq_k]` for every batch item), read through a
/// stride per axis (0 on the broadcast ones).
#[derive(Clone, Debug)]
pub(crate) struct ScoreTable<T> {
    values: Arc<[T]>,
    strides: [usize; 4],
}

/// A boolean mask of the scores, `true` where masked.
pub(crate) type ScoreMask = ScoreTable<bool>;

/// An additive bias of the scores.
pub(crate) type ScoreBias = ScoreTable<f32>;

impl<T: Copy> ScoreTable<T> {
    /// `values`, of shape `dims` (each `scores`' or 1), over scores of shape `scores`.
    ///
    /// # Panics
    /// If a dimension is neither the scores' nor 1 (naming the table as `what`), or `values`
    /// is not `dims`' size.
    pub(crate) fn new(values: Vec<T>, dims: [usize; 4], scores: [usize; 4], what: &str) -> Self {
        assert!(
            dims.iter().zip(scores).all(|(&d, s)| d == s || d == 1),
            "an attention {what} of shape {dims:?} for scores of shape {scores:?}"
        );
        assert_eq!(values.len(), dims.iter().product::<usize>());
        let mut strides = [0; 4];
        let mut stride = 1;
        for axis in (0..4).rev() {
            strides[axis] = if dims[axis] == 1 { 0 } else { stride };
            stride *= dims[axis];
        }
        Self {
            values: values.into(),
            strides,
        }
    }

    /// The values of one row of scores (`query` of head `[batch, head]`), a value per key.
    fn row(&self, [batch, head]: [usize; 2], query: usize, keys: usize) -> impl Iterator<Item = T> {
        let [b, h, q, k] = self.strides;
        let first = batch * b + head * h + query * q;
        (0..keys).map(move |j| self.values[first + j * k])
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
    /// `row` (products `Q·Kᵀ` of one query, of the first keys or all) into the scores the
    /// softmax takes: scaled, capped, its masked scores set to `fill`, biased.
    pub(super) fn finish(&self, row: &mut [f32], at: Row) {
        scale(row, self.scale);
        if let Some(cap) = self.softcap {
            capped(row, cap);
        }
        self.set_masked(row, at, self.fill);
        if let Some(bias) = &self.bias {
            for (score, bias) in row.iter_mut().zip(bias.row(at.head, at.query, at.seqs[1])) {
                *score += bias;
            }
        }
    }

    /// The cap's slope at each of `row`'s products (`Q·Kᵀ`, unscaled), into `slopes`: `1 -
    /// tanh²(s · scale / cap)`, what a capped score's gradient is times to be the scaled one's.
    /// Nothing without a cap.
    pub(super) fn cap_slopes(&self, row: &[f32], slopes: &mut [f32]) {
        if let Some(cap) = self.softcap {
            cap_slopes(row, slopes, self.scale / cap);
        }
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

/// `row = cap · tanh(row / cap)`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn capped(row: &mut [f32], cap: f32) {
    let inverse = 1.0 / cap;
    row.iter_mut().for_each(|s| *s = cap * tanh(*s * inverse));
}

/// `slopes = 1 - tanh²(row · factor)`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn cap_slopes(row: &[f32], slopes: &mut [f32], factor: f32) {
    for (slope, &s) in slopes.iter_mut().zip(row) {
        let t = tanh(s * factor);
        *slope = 1.0 - t * t;
    }
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
