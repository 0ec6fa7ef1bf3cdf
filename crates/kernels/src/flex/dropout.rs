//! Dropout in one pass each way on flex: each value kept with probability `1 - prob` and scaled
//! by `1 / (1 - prob)`, whether it is kept decided by a hash of the call's seed and the value's
//! index, so that the backward pass draws the same mask again instead of keeping it.
//!
//! Burn's `Dropout` draws a Bernoulli tensor from the device's generator (one value at a time
//! on one thread), then multiplies twice, and its backward pass multiplies twice more: 85 ms
//! forward and backward for `[32, 256, 768]` on 2 cores where PyTorch's took 49
//! (bench/HISTORY.md, "LSTM, GRU and dropout on the drop-in layers"). Hashing the index is what
//! counter-based generators (JAX's threefry, cuRAND's Philox) do; the `rand` crates' generators
//! are streams, drawn in order, that neither split across threads by index nor vectorize inside
//! a loop, so the hash is written here: two rounds of Wellons' `lowbias32` (32-bit products,
//! which AVX2 vectorizes).

use burn::tensor::TensorData;
use burn_flex::FlexTensor;
use multiversion::multiversion;

use crate::flex::memory::buffers::{contiguous, zeroed_chunks};

/// Values per task on rayon's threads.
const CHUNK: usize = 1 << 14;

/// What decides the mask: the call's seed and the share of values kept.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DropoutMask {
    seed: u64,
    /// A value is kept where its hash is below this (`(1 - prob) · 2³²`).
    keep_below: u64,
    /// `1 / (1 - prob)`.
    scale: f32,
}

impl DropoutMask {
    /// The mask of a dropout of `prob` (in `[0, 1)`) drawn from `seed`.
    pub(crate) fn new(prob: f64, seed: u64) -> Self {
        assert!(
            (0.0..1.0).contains(&prob),
            "a dropout probability of {prob}"
        );
        let keep = 1.0 - prob;
        Self {
            seed,
            keep_below: (keep * 4_294_967_296.0).round() as u64,
            scale: (1.0 / keep) as f32,
        }
    }
}

/// `x` with the values `mask` drops zeroed and the others scaled.
pub(crate) fn forward(x: FlexTensor, mask: DropoutMask) -> FlexTensor {
    masked(x, mask)
}

/// The input's gradient given `grad = ∂L/∂y`: `grad` through the same mask and scale.
pub(crate) fn backward(grad: FlexTensor, mask: DropoutMask) -> FlexTensor {
    masked(grad, mask)
}

/// `values` times the mask's `scale` where it keeps them, zero elsewhere.
fn masked(values: FlexTensor, mask: DropoutMask) -> FlexTensor {
    let values = contiguous(values);
    let shape = values.layout().shape().to_vec();
    let values: &[f32] = values.storage();
    let out = zeroed_chunks(values.len(), CHUNK, |index, out| {
        let first = index * CHUNK;
        apply(out, &values[first..][..out.len()], first as u64, mask);
    });
    FlexTensor::from_data(TensorData::new(out, shape))
}

/// `out[i] = x[i] · scale` where value `first + i` is kept, 0 elsewhere.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn apply(out: &mut [f32], x: &[f32], first: u64, mask: DropoutMask) {
    let factor = factors(first, mask);
    for (i, (o, &v)) in out.iter_mut().zip(x).enumerate() {
        *o = v * factor(i);
    }
}

/// `values[i] · scale` where value `first + i` of a tensor is kept, 0 elsewhere, in place:
/// [`forward`]'s mask on one row of that tensor (attention's weights, dropped row by row as
/// their kernel makes them). A row that straddles a multiple of 2³² values draws a mask of its
/// own past it, the same each call.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
pub(crate) fn apply_in_place(values: &mut [f32], first: u64, mask: DropoutMask) {
    let factor = factors(first, mask);
    for (i, v) in values.iter_mut().enumerate() {
        *v *= factor(i);
    }
}

/// The factor of value `first + i`: the scale where the mask keeps it, 0 where it drops it.
#[inline(always)]
fn factors(first: u64, mask: DropoutMask) -> impl Fn(usize) -> f32 {
    let [low_key, high_key] = [mask.seed as u32, (mask.seed >> 32) as u32];
    let high = lowbias32((first >> 32) as u32 ^ high_key);
    move |i| {
        // [`forward`]'s chunks never straddle 2³² values: `first` is a multiple of CHUNK, a
        // power of two.
        let index = (first as u32).wrapping_add(i as u32);
        let hash = lowbias32(lowbias32(index ^ low_key) ^ high);
        let kept = u64::from(hash) < mask.keep_below;
        if kept { mask.scale } else { 0.0 }
    }
}

/// Chris Wellons' `lowbias32` integer hash (an xor-shift-multiply finalizer of bias ~0.17).
#[inline(always)]
fn lowbias32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^ (x >> 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Over 2²⁰ values, the share kept is `1 - prob` within 5 standard deviations, for several
    /// probabilities and seeds; each kept value scaled, each other zero; and the same mask
    /// chunk by chunk whatever the chunk (the backward pass's draw is the forward's).
    #[test]
    fn the_share_kept_is_one_less_the_probability() {
        let n = 1 << 20;
        let ones = vec![1f32; n];
        for (prob, seed) in [(0.1, 0), (0.5, 7), (0.9, u64::MAX - 3), (0.25, 1 << 40)] {
            let mask = DropoutMask::new(prob, seed);
            let mut out = vec![0f32; n];
            apply(&mut out, &ones, 0, mask);
            let kept = out.iter().filter(|&&v| v != 0.0).count() as f64;
            let sd = (n as f64 * prob * (1.0 - prob)).sqrt();
            let want = n as f64 * (1.0 - prob);
            assert!(
                (kept - want).abs() < 5.0 * sd,
                "{prob}, seed {seed}: {kept} kept"
            );
            let scale = (1.0 / (1.0 - prob)) as f32;
            assert!(out.iter().all(|&v| v == 0.0 || v == scale));
            let mut halves = vec![0f32; n];
            let (first, second) = halves.split_at_mut(n / 2);
            apply(first, &ones[..n / 2], 0, mask);
            apply(second, &ones[n / 2..], n as u64 / 2, mask);
            assert_eq!(halves, out, "{prob}, seed {seed}: in two parts");
        }
    }

    /// Neighbouring values, and the same values under neighbouring seeds, are kept
    /// independently: each pair's agreement is `p² + (1-p)²` within 5 standard deviations.
    #[test]
    fn neighbours_and_neighbouring_seeds_are_independent() {
        let n = 1 << 20;
        let ones = vec![1f32; n];
        let prob = 0.5;
        let draw = |seed| {
            let mut out = vec![0f32; n];
            apply(&mut out, &ones, 0, DropoutMask::new(prob, seed));
            out
        };
        let [a, b] = [draw(41), draw(42)];
        let agree = |x: &[f32], y: &[f32]| {
            x.iter()
                .zip(y)
                .filter(|(p, q)| (**p == 0.0) == (**q == 0.0))
                .count()
        };
        let want = n as f64 * 0.5;
        let sd = (n as f64 * 0.25).sqrt();
        for (what, count) in [
            ("seeds", agree(&a, &b)),
            ("neighbours", agree(&a[1..], &a[..n - 1])),
        ] {
            assert!(
                (count as f64 - want).abs() < 5.0 * sd,
                "{what}: {count} agree"
            );
        }
    }
}
