//! Rotary position encoding (RoPE; Burn's `RotaryEncoding`) of `[rows, seq, d]` on flex,
//! forward and backward in one pass each, rows on rayon's threads: each pair of features `(a,
//! b)` at position `p` rotated by its angle, read from Burn's own table of cosines and sines.
//!
//! Burn's layer multiplies each pair by a 2x4 sign matrix (a batched product), then by the
//! table broadcast over the rows, then sums the last axis; its autodiff runs each step back:
//! forward and backward of `[8, 12, 256, 64]` took 25.5 ms on 2 cores (bench/HISTORY.md,
//! "Sigmoid, tanh and leaky ReLU").
//!
//! Burn's table `freq[p, f] = (re, im)` holds, for feature `f` of a pair `(2i, 2i + 1)`, the
//! cosine and sine of the pair's angle. Its output is `y[2i] = a · re[2i] - b · im[2i]` and
//! `y[2i + 1] = b · re[2i + 1] + a · im[2i + 1]`, which this computes in the same order (the
//! same values, bit for bit); the input gradient is the transposed rotation.

use burn::tensor::TensorData;
use burn_flex::FlexTensor;
use rayon::prelude::*;

use crate::flex::memory::buffers::{contiguous, zeros};

/// `x` (`[rows, seq, d]`) rotated by `freq` (`[seq, d, 2]`, Burn's table for these positions).
pub(crate) fn forward(x: FlexTensor, freq: &FlexTensor) -> FlexTensor {
    rotate(x, freq, |[a, b], [re_a, im_a, re_b, im_b]| {
        [a * re_a - b * im_a, b * re_b + a * im_b]
    })
}

/// The gradient of [`forward`]'s input given `grad = ∂L/∂y` (the frequencies are constants,
/// as Burn's layer keeps them: not parameters).
pub(crate) fn backward(grad: FlexTensor, freq: &FlexTensor) -> FlexTensor {
    rotate(grad, freq, |[ga, gb], [re_a, im_a, re_b, im_b]| {
        [ga * re_a + gb * im_b, gb * re_b - ga * im_a]
    })
}

/// `pair(values, table)` for each pair of `x`'s features, `table` the pair's two `(re, im)`
/// entries at its position.
fn rotate<F>(x: FlexTensor, freq: &FlexTensor, pair: F) -> FlexTensor
where
    F: Fn([f32; 2], [f32; 4]) -> [f32; 2] + Sync,
{
    let (x, freq) = (contiguous(x), contiguous(freq.clone()));
    let shape = x.layout().shape().to_vec();
    let (values, table): (&[f32], &[f32]) = (x.storage(), freq.storage());
    // One row's values: `seq · d`, half the table's.
    let row = (table.len() / 2).max(1);
    let mut out = zeros(values.len());
    out.par_chunks_mut(row)
        .zip(values.par_chunks(row))
        .for_each(|(out, values)| {
            let pairs = out.chunks_exact_mut(2).zip(values.chunks_exact(2));
            for ((out, v), t) in pairs.zip(table.chunks_exact(4)) {
                let [first, second] = pair([v[0], v[1]], [t[0], t[1], t[2], t[3]]);
                (out[0], out[1]) = (first, second);
            }
        });
    FlexTensor::from_data(TensorData::new(out, shape))
}
