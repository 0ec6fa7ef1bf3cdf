//! Scaled dot-product attention, `softmax(Q·Kᵀ · scale, masked) · V` over `[batch, heads, seq,
//! d]`, forward and backward on flex without the `[batch, heads, seq_q, seq_k]` weights ever
//! in memory whole: each head on one of rayon's threads, its queries in blocks whose scores stay
//! in cache (`head.rs`); the backward pass makes each block's weights again from each query's
//! maximum score and sum of exponentials, kept by the forward pass (FlashAttention's way, with
//! a block's whole rows of keys rather than tiles of them: a row of 4096 keys is 16 KiB).
//!
//! Burn's autodiff composes attention (its multi-head attention, and `module::attention`
//! under autodiff) from batched products that write the weights, a mask fill, a softmax and
//! their backward passes: for BERT-base's `[8, 12, 256, 64]` heads, 25 MB of weights written
//! and read by each step, and flex's batched product with it at a third of gemm's rate (its
//! output copied once more where its buffer is aligned: 9 ms against 3.3 for gemm alone on 2
//! cores of a Xeon, 2026-12-07).

mod head;
mod scores;

use std::sync::Arc;

use burn::tensor::TensorData;
use burn_flex::FlexTensor;
use rayon::prelude::*;

use crate::flex::memory::buffers::{contiguous, zeros};
use head::{Dims, Inputs, Operand, Saved, Scratch};
pub(crate) use scores::{RowScale, ScoreBias, ScoreMask, Scores};

/// What the backward pass keeps of the forward: each query's [`RowScale`], `[batch, heads,
/// seq_q]`.
pub(crate) type RowScales = Arc<[RowScale]>;

/// The attention of `q` (`[batch, heads, seq_q, d]`) to `k` (`[batch, heads, seq_k, d]`) and `v`
/// (`[batch, heads, seq_k, d_v]`): the output `[batch, heads, seq_q, d_v]` and each query's
/// [`RowScale`] for [`backward`].
pub(crate) fn forward(
    q: &FlexTensor,
    k: &FlexTensor,
    v: &FlexTensor,
    scores: &Scores,
) -> (FlexTensor, RowScales) {
    let dims = dims(q, k, v);
    let ([b, h], seq_q) = (batch_heads(q), dims.seqs[0]);
    let (mut out, mut row_scales) = (zeros(b * h * seq_q * dims.d_v), zeros(b * h * seq_q));
    if !out.is_empty() && dims.seqs[1] * dims.d > 0 {
        let (q, k, v) = (readable(q), readable(k), readable(v));
        let inputs = Inputs {
            q: operand(&q),
            k: operand(&k),
            v: operand(&v),
        };
        out.par_chunks_mut(seq_q * dims.d_v)
            .zip(row_scales.par_chunks_mut(seq_q))
            .enumerate()
            .for_each_init(
                || Scratch::new(dims, scores),
                |scratch, (index, (out, row_scales))| {
                    let head = [index / h, index % h];
                    head::forward(&inputs, scores, dims, head, out, row_scales, scratch);
                },
            );
    }
    let shape = vec![b, h, seq_q, dims.d_v];
    (
        FlexTensor::from_data(TensorData::new(out, shape)),
        row_scales.into(),
    )
}

/// The gradients `[dq, dk, dv]` of [`forward`]'s inputs, given its output, the row scales it
/// kept and `grad = ∂L/∂output`.
pub(crate) fn backward(
    [q, k, v]: [&FlexTensor; 3],
    out: &FlexTensor,
    row_scales: &[RowScale],
    grad: FlexTensor,
    scores: &Scores,
) -> [FlexTensor; 3] {
    let dims = dims(q, k, v);
    let ([b, h], [seq_q, seq_k], d, d_v) = (batch_heads(q), dims.seqs, dims.d, dims.d_v);
    let mut dq = zeros(b * h * seq_q * d);
    let mut dk = zeros(b * h * seq_k * d);
    let mut dv = zeros(b * h * seq_k * d_v);
    if seq_q * seq_k * b * h * d * d_v > 0 {
        let (out, grad) = (contiguous(out.clone()), contiguous(grad));
        let (q_in, k_in, v_in) = (readable(q), readable(k), readable(v));
        let inputs = Inputs {
            q: operand(&q_in),
            k: operand(&k_in),
            v: operand(&v_in),
        };
        let (out, grad): (&[f32], &[f32]) = (out.storage(), grad.storage());
        dq.par_chunks_mut(seq_q * d)
            .zip(dk.par_chunks_mut(seq_k * d))
            .zip(dv.par_chunks_mut(seq_k * d_v))
            .enumerate()
            .for_each_init(
                || Scratch::new(dims, scores),
                |scratch, (index, ((dq, dk), dv))| {
                    let saved = Saved {
                        out: &out[index * seq_q * d_v..][..seq_q * d_v],
                        grad: &grad[index * seq_q * d_v..][..seq_q * d_v],
                        row_scales: &row_scales[index * seq_q..][..seq_q],
                    };
                    let head = [index / h, index % h];
                    let grads = [dq, dk, dv];
                    head::backward(&inputs, &saved, scores, dims, head, grads, scratch);
                },
            );
    }
    let tensor =
        |values, rows, cols| FlexTensor::from_data(TensorData::new(values, vec![b, h, rows, cols]));
    [
        tensor(dq, seq_q, d),
        tensor(dk, seq_k, d),
        tensor(dv, seq_k, d_v),
    ]
}

/// `[batch, heads]` of a `[batch, heads, seq, d]` tensor.
fn batch_heads(x: &FlexTensor) -> [usize; 2] {
    let shape = x.layout().shape();
    [shape[0], shape[1]]
}

/// The lengths of an attention of `q` to `k` and `v`.
///
/// # Panics
/// If the shapes do not fit: the keys' batch, heads or width not the queries', or the values'
/// batch, heads or sequence not the keys'.
fn dims(q: &FlexTensor, k: &FlexTensor, v: &FlexTensor) -> Dims {
    let shape = |x: &FlexTensor| -> [usize; 4] {
        let s = x.layout().shape();
        [s[0], s[1], s[2], s[3]]
    };
    let ([b, h, seq_q, d], [kb, kh, seq_k, kd], [vb, vh, vs, d_v]) = (shape(q), shape(k), shape(v));
    assert!(
        [kb, kh, kd] == [b, h, d] && [vb, vh, vs] == [b, h, seq_k],
        "attention of queries {:?} to keys {:?} and values {:?}",
        [b, h, seq_q, d],
        [kb, kh, seq_k, kd],
        [vb, vh, vs, d_v]
    );
    Dims {
        seqs: [seq_q, seq_k],
        d,
        d_v,
        heads: h,
    }
}

/// `x` itself where its strides are all non-negative (read in place, a transposed or broadcast
/// view included), a contiguous copy otherwise (a flipped one).
fn readable(x: &FlexTensor) -> FlexTensor {
    match x.layout().strides().iter().all(|&s| s >= 0) {
        true => x.clone(),
        false => contiguous(x.clone()),
    }
}

/// `x` (of non-negative strides: [`readable`]) as a product's operand.
fn operand(x: &FlexTensor) -> Operand<'_> {
    let layout = x.layout();
    let strides = layout.strides();
    Operand {
        values: x.storage(),
        start: layout.start_offset(),
        strides: [0, 1, 2, 3].map(|axis| strides[axis] as usize),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flex::dropout::{self, DropoutMask};
    use crate::flex::softmax;
    use crate::test_util::random_values;

    /// `[rows, cols]` of `values`.
    fn matrix(values: Vec<f32>, rows: usize, cols: usize) -> FlexTensor {
        FlexTensor::from_data(TensorData::new(values, vec![rows, cols]))
    }

    /// `a · b` (`a` `m × k`, or its transpose's `k × m` with `ta`; likewise `b`), by loops.
    fn product(a: &[f32], b: &[f32], [m, k, n]: [usize; 3], [ta, tb]: [bool; 2]) -> Vec<f32> {
        let at = |i: usize, p: usize| if ta { a[p * m + i] } else { a[i * k + p] };
        let bt = |p: usize, j: usize| if tb { b[j * k + p] } else { b[p * n + j] };
        let mut out = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                out[i * n + j] = (0..k).map(|p| at(i, p) * bt(p, j)).sum();
            }
        }
        out
    }

    /// With dropout on the weights, one head's output and gradients are those of its parts
    /// composed: the softmax of the scaled scores, dropout of the weights (the same mask as
    /// dropout of the whole `[1, 1, seq_q, seq_k]` weights), the product with the values;
    /// backward each part's gradient in turn (the softmax's and dropout's own backward passes,
    /// products by loops).
    #[test]
    fn dropout_falls_on_the_weights_forward_and_backward() {
        let ([seq_q, seq_k, d, d_v], scale) = ([7, 19, 5, 6], 0.4);
        let [q, k, v, g] = [[seq_q, d], [seq_k, d], [seq_k, d_v], [seq_q, d_v]]
            .map(|[r, c]| r * c)
            .map(|len| {
                random_values(len, len as u64)
                    .iter()
                    .map(|x| x * 2.0)
                    .collect::<Vec<f32>>()
            });
        let mask = DropoutMask::new(0.3, 12_345);
        let four = |values: &[f32], rows, cols| {
            FlexTensor::from_data(TensorData::new(values.to_vec(), vec![1, 1, rows, cols]))
        };
        let scores = Scores {
            scale,
            softcap: None,
            causal: false,
            mask: None,
            fill: f32::NEG_INFINITY,
            bias: None,
            dropout: Some(mask),
        };
        let inputs = [four(&q, seq_q, d), four(&k, seq_k, d), four(&v, seq_k, d_v)];
        let (out, row_scales) = forward(&inputs[0], &inputs[1], &inputs[2], &scores);
        let grads = backward(
            inputs.each_ref(),
            &out,
            &row_scales,
            four(&g, seq_q, d_v),
            &scores,
        );

        let raw = product(&q, &k, [seq_q, d, seq_k], [false, true]);
        let scaled = raw.iter().map(|s| s * scale).collect();
        let weights = softmax::forward(matrix(scaled, seq_q, seq_k), false);
        let dropped = dropout::forward(weights.clone(), mask);
        let dropped_values: &[f32] = dropped.storage();
        let want_out = product(dropped_values, &v, [seq_q, seq_k, d_v], [false, false]);
        let grad_dropped = product(&g, &v, [seq_q, d_v, seq_k], [false, true]);
        let grad_weights = dropout::backward(matrix(grad_dropped, seq_q, seq_k), mask);
        let grad_scores = softmax::backward(weights, grad_weights);
        let grad_raw: Vec<f32> = grad_scores
            .storage::<f32>()
            .iter()
            .map(|s| s * scale)
            .collect();
        let want = [
            product(&grad_raw, &k, [seq_q, seq_k, d], [false, false]),
            product(&grad_raw, &q, [seq_k, seq_q, d], [true, false]),
            product(dropped_values, &g, [seq_k, seq_q, d_v], [true, false]),
        ];
        let close = |got: &FlexTensor, want: &[f32], what: &str| {
            for (i, (a, b)) in got.storage::<f32>().iter().zip(want).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                    "{what} {i}: {a} against {b}"
                );
            }
        };
        close(&out, &want_out, "output");
        for ((got, want), what) in grads.iter().zip(&want).zip(["dq", "dk", "dv"]) {
            close(got, want, what);
        }
        let kept = dropped_values.iter().filter(|&&w| w != 0.0).count();
        assert!(kept > 0 && kept < seq_q * seq_k, "{kept} weights kept");
    }
}
