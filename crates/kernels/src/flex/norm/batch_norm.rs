//! Batch normalization with an offset, then ReLU (TF-slim's, [`Channel::new`]), or with a scale
//! and an offset and no ReLU (Burn's `BatchNorm`, [`Channel::affine`]), on flex: forward on the
//! batch's statistics in
//! two passes (the channels' moments, then the output) or on given ones (the moving averages)
//! in one, backward in two (the channels' sums of the masked output gradient and of its product
//! with the normalized input, then the input gradient). Burn composes the same from a
//! dozen elementwise ops and reductions, each a pass over the activations with a new tensor; in
//! Inception v3 (a batch norm and a ReLU after each of its 94 convolutions) they cost more than
//! the bf16 convolutions themselves.
//!
//! With `x̂ = (x - mean)·r`, `r = 1/√(var + ε)`, `y = relu(x̂ + β)` and `g` the output gradient
//! masked by `y > 0`, over the `m` values of a channel:
//! `∂L/∂β = Σg` and `∂L/∂x = r·(g - Σg/m - x̂·Σ(g·x̂)/m)` (the batch statistics depend on `x`;
//! on given statistics `∂L/∂x = r·g`).
//!
//! The backward pass recomputes the mask from `x` (`x̂ + β > 0`, the very operations of the
//! forward pass, so the very bits) rather than reading `y`: two passes over the activations
//! fewer, and the output need not be kept for it.
//!
//! With a scale, `y = γ·x̂ + β` and no mask: `∂L/∂γ = Σ(g·x̂)`, `∂L/∂β = Σg` and `∂L/∂x` as above
//! times `γ`. Both kinds are a [`Channel`]: `(x - mean)·s + β`, `s = γ·r`, floored at 0 (ReLU)
//! or at -∞ (none).

use std::mem::MaybeUninit;

use burn::tensor::TensorData;
use burn_flex::FlexTensor;
use half::bf16;
use multiversion::multiversion;
use rayon::prelude::*;

#[cfg(target_arch = "x86_64")]
use crate::flex::gemm::bf16_gemm::amx::{Avx512Bf16, DEPTH, store_bf16_run};
use crate::flex::gemm::bf16_gemm::round_to_bf16;
use crate::flex::memory::buffers::contiguous;
#[cfg(target_arch = "x86_64")]
use crate::flex::memory::buffers::written;
use crate::flex::memory::pixels::widened;
use crate::flex::memory::{SUM_LANES, dims4};

/// Values a lane sums in f32 before its sum moves to f64: short enough that f32 rounding stays
/// near 1e-6 relative, long enough that the conversions cost nothing.
const BLOCK: usize = 64 * SUM_LANES;

/// Where a batch norm's statistics come from, which decides what its input gradient counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Statistics {
    /// The batch's own (training): they depend on `x`, and the gradient counts it.
    Batch,
    /// Given (the moving averages): constants.
    Given,
}

/// `relu((x - mean)/√(var + ε) + β)` per channel on the batch's own statistics, and those
/// statistics, `[2, c]` (mean, biased variance; [`moments`]); the output `rounded` to bf16 or
/// in f32, as [`forward`].
pub(crate) fn forward_training(
    x: FlexTensor,
    beta: &FlexTensor,
    epsilon: f64,
    rounded: bool,
) -> (FlexTensor, FlexTensor) {
    let x = contiguous(x);
    let moments = moments(&x);
    (
        forward(x, beta.clone(), moments.clone(), epsilon, rounded),
        moments,
    )
}

/// Each channel's mean and biased variance over batch and places of a contiguous
/// `[n, c, h, w]` `x`, `[2, c]`.
///
/// Sums `x - s` and its square, `s` the channel's first value: with a shift near the mean,
/// `E[(x-s)²] - E[x-s]²` does not cancel, whatever the channel's offset.
pub(crate) fn moments(x: &FlexTensor) -> FlexTensor {
    let [n, c, h, w] = dims4(x);
    let places = h * w;
    let data: &[f32] = x.storage();
    let shift = |ch: usize| data.get(ch * places).copied().unwrap_or(0.0);
    let sums = channel_sums(n, c, places, |first, ch| {
        shifted_sums(&data[first..first + places], shift(ch))
    });
    let m = (n * places).max(1) as f64;
    let (mean, variance): (Vec<f32>, Vec<f32>) = (sums.into_iter().enumerate())
        .map(|(ch, (s, q))| {
            let d = s / m;
            let mean = (shift(ch) as f64 + d) as f32;
            (mean, (q / m - d * d).max(0.0) as f32)
        })
        .unzip();
    FlexTensor::from_data(TensorData::new([mean, variance].concat(), [2, c]))
}

/// `relu((x - mean)/√(var + ε) + β)` per channel, with given `[2, c]` `moments`: in f32, or
/// `rounded` to bf16 as the convolutions' packers round their inputs (for an output only they
/// read: [`crate::flex::memory::pixels`]).
pub(crate) fn forward(
    x: FlexTensor,
    beta: FlexTensor,
    moments: FlexTensor,
    epsilon: f64,
    rounded: bool,
) -> FlexTensor {
    normalized(x, &channels(&moments, &beta, epsilon), rounded)
}

/// `γ·(x - mean)/√(var + ε) + β` per channel on the batch's own statistics (Burn's
/// `batch_norm_train`), and those statistics, `[2, c]` (mean, biased variance).
pub(crate) fn affine_forward_training(
    x: FlexTensor,
    [gamma, beta]: [&FlexTensor; 2],
    epsilon: f64,
) -> (FlexTensor, FlexTensor) {
    let x = contiguous(x);
    let moments = moments(&x);
    let channels = affine_channels(&moments, [gamma, beta], epsilon);
    (normalized(x, &channels, false), moments)
}

/// `γ·(x - mean)/√(var + ε) + β` per channel with given `[2, c]` `moments` (Burn's
/// `batch_norm`, on the moving averages).
pub(crate) fn affine_forward(
    x: FlexTensor,
    [gamma, beta]: [&FlexTensor; 2],
    moments: &FlexTensor,
    epsilon: f64,
) -> FlexTensor {
    normalized(x, &affine_channels(moments, [gamma, beta], epsilon), false)
}

/// Each plane of `x` through its channel of `channels` ([`normalize`]), in f32 or `rounded` to
/// bf16.
fn normalized(x: FlexTensor, channels: &[Channel], rounded: bool) -> FlexTensor {
    let x = contiguous(x);
    let [n, c, h, w] = dims4(&x);
    let places = h * w;
    let x_data: &[f32] = x.storage();
    let shape = [n, c, h, w];
    let plane = |first: usize| &x_data[first..first + places];
    // SAFETY: `normalize` and `normalize_rounded` write every value of `out`.
    unsafe {
        match rounded {
            false => FlexTensor::from_data(TensorData::new(
                per_plane(x_data.len(), c, places, |first, ch, out| {
                    normalize(plane(first), out, channels[ch]);
                }),
                shape,
            )),
            true => FlexTensor::from_data(TensorData::new(
                per_plane(x_data.len(), c, places, |first, ch, out| {
                    normalize_rounded(plane(first), out, channels[ch]);
                }),
                shape,
            )),
        }
    }
}

/// The gradients of `x` and `β` given `β`, the `moments` the forward pass normalized with and
/// where they came from, and `grad = ∂L/∂y`.
pub(crate) fn backward(
    x: FlexTensor,
    beta: &FlexTensor,
    (moments, statistics): (&FlexTensor, Statistics),
    epsilon: f64,
    grad: FlexTensor,
) -> (FlexTensor, FlexTensor) {
    let channels = channels(moments, beta, epsilon);
    let (dx, sums) = backward_with(x, &channels, statistics, grad);
    let beta_grad: Vec<f32> = sums.iter().map(|s| s.0 as f32).collect();
    (
        dx,
        FlexTensor::from_data(TensorData::new(beta_grad, [channels.len()])),
    )
}

/// The gradients of `x`, `γ` and `β` of [`affine_forward_training`] (`statistics`
/// [`Statistics::Batch`]) or [`affine_forward`] (`Given`), given `γ`, `β`, the `moments` the
/// forward pass normalized with, and `grad = ∂L/∂y`.
pub(crate) fn affine_backward(
    x: FlexTensor,
    [gamma, beta]: [&FlexTensor; 2],
    (moments, statistics): (&FlexTensor, Statistics),
    epsilon: f64,
    grad: FlexTensor,
) -> [FlexTensor; 3] {
    let channels = affine_channels(moments, [gamma, beta], epsilon);
    let (dx, sums) = backward_with(x, &channels, statistics, grad);
    let c = channels.len();
    // Σ(g·x̂) = r·Σ(g·(x - mean)).
    let gamma_grad = (sums.iter().zip(&channels)).map(|(s, ch)| (s.1 * ch.r as f64) as f32);
    let beta_grad = sums.iter().map(|s| s.0 as f32);
    [
        dx,
        FlexTensor::from_data(TensorData::new(gamma_grad.collect::<Vec<_>>(), [c])),
        FlexTensor::from_data(TensorData::new(beta_grad.collect::<Vec<_>>(), [c])),
    ]
}

/// The input gradient through `channels` and each channel's sums `(Σg, Σg·(x - mean))`, `g`
/// masked where a channel has a ReLU.
fn backward_with(
    x: FlexTensor,
    channels: &[Channel],
    statistics: Statistics,
    grad: FlexTensor,
) -> (FlexTensor, Vec<(f64, f64)>) {
    // The gradient of a rounded output comes in f32 from the convolutions; from anything else,
    // perhaps in bf16.
    let (x, grad) = (contiguous(x), contiguous(widened(grad)));
    let [n, c, h, w] = dims4(&x);
    let places = h * w;
    let (x_data, g_data): (&[f32], &[f32]) = (x.storage(), grad.storage());
    let planes = |first: usize| [x_data, g_data].map(|data| &data[first..first + places]);
    let sums = channel_sums(n, c, places, |first, ch| {
        let [x, g] = planes(first);
        masked_sums(x, g, channels[ch])
    });
    let terms = gradient_terms(&sums, channels, n * places, statistics);
    // SAFETY: `input_gradient` writes every value of `out`.
    let dx = unsafe {
        per_plane(x_data.len(), c, places, |first, ch, out| {
            let [x, g] = planes(first);
            input_gradient(x, g, out, channels[ch], terms[ch]);
        })
    };
    (
        FlexTensor::from_data(TensorData::new(dx, [n, c, h, w])),
        sums,
    )
}

/// Each channel's `[a, b, c]` of its input gradient `a·g - b - c·(x - mean)`, from its sums
/// `(Σg, Σg·(x - mean))` over its `count` values, `g` masked.
///
/// On the batch's statistics `∂L/∂x = s·g - s·Σg/m - s·r²·(x - mean)·Σ(g·(x - mean))/m`, with
/// `r = 1/√(var + ε)` and `s = γ·r` (`x̂ = r·(x - mean)`, so
/// `x̂·Σ(g·x̂) = r²·(x - mean)·Σ(g·(x - mean))`); on given ones `s·g`.
pub(crate) fn gradient_terms(
    sums: &[(f64, f64)],
    channels: &[Channel],
    count: usize,
    statistics: Statistics,
) -> Vec<[f32; 3]> {
    let m = count.max(1) as f64;
    (sums.iter().zip(channels))
        .map(|(&(sum_g, sum_gx), channel)| {
            let (s, r) = (channel.scale as f64, channel.r as f64);
            match statistics {
                Statistics::Batch => [s, s * sum_g / m, s * r * r * sum_gx / m],
                Statistics::Given => [s, 0.0, 0.0],
            }
            .map(|v| v as f32)
        })
        .collect()
}

/// Each channel's normalization then ReLU, from its `[2, c]` moments (mean, variance) and
/// offset `β`.
pub(crate) fn channels(moments: &FlexTensor, beta: &FlexTensor, epsilon: f64) -> Vec<Channel> {
    let (moments, beta) = (moments.to_contiguous(), beta.to_contiguous());
    let (values, beta): (&[f32], &[f32]) = (moments.storage(), beta.storage());
    let (mean, variance) = values.split_at(values.len() / 2);
    (mean.iter().zip(variance).zip(beta))
        .map(|((&mean, &variance), &beta)| Channel::new(mean, variance, beta, epsilon))
        .collect()
}

/// Each channel's scaled normalization without ReLU, from its `[2, c]` moments, scale `γ` and
/// offset `β`.
fn affine_channels(
    moments: &FlexTensor,
    [gamma, beta]: [&FlexTensor; 2],
    epsilon: f64,
) -> Vec<Channel> {
    let [moments, gamma, beta] = [moments, gamma, beta].map(|t| t.to_contiguous());
    let (values, gamma, beta): (&[f32], &[f32], &[f32]) =
        (moments.storage(), gamma.storage(), beta.storage());
    let (mean, variance) = values.split_at(values.len() / 2);
    (mean.iter().zip(variance).zip(gamma.iter().zip(beta)))
        .map(|((&mean, &variance), (&gamma, &beta))| {
            Channel::affine(mean, variance, [gamma, beta], epsilon)
        })
        .collect()
}

/// Per channel, the sums of the pairs `plane_sums(first, channel)` over the planes of
/// `[n, c, places]` data (`first`: the plane's first index), images in parallel.
pub(crate) fn channel_sums(
    n: usize,
    c: usize,
    places: usize,
    plane_sums: impl Fn(usize, usize) -> (f64, f64) + Sync,
) -> Vec<(f64, f64)> {
    (0..n)
        .into_par_iter()
        .map(|image| {
            (0..c)
                .map(|ch| plane_sums((image * c + ch) * places, ch))
                .collect::<Vec<_>>()
        })
        .reduce(
            || vec![(0.0, 0.0); c],
            |mut a, b| {
                a.iter_mut()
                    .zip(b)
                    .for_each(|(a, b)| *a = (a.0 + b.0, a.1 + b.1));
                a
            },
        )
}

/// A new `[n, c, places]` tensor's `len` values, each plane written by
/// `plane(first, channel, out)` (`out` the plane's values), images in parallel. No zeroing
/// pass first: every value is new.
///
/// # Safety
/// `plane` writes every value of its `out`.
pub(crate) unsafe fn per_plane<T: Send>(
    len: usize,
    c: usize,
    places: usize,
    plane: impl Fn(usize, usize, &mut [MaybeUninit<T>]) + Sync,
) -> Vec<T> {
    let mut out = Vec::with_capacity(len);
    out.spare_capacity_mut()[..len]
        .par_chunks_mut((c * places).max(1))
        .enumerate()
        .for_each(|(image, values)| {
            for (ch, out) in values.chunks_mut(places.max(1)).enumerate() {
                plane((image * c + ch) * places, ch, out);
            }
        });
    // SAFETY: the planes tile the first `len` values, and the caller's `plane` wrote each.
    unsafe { out.set_len(len) };
    out
}

/// `(Σ(x - shift), Σ(x - shift)²)` of a plane.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
pub(super) fn shifted_sums(x: &[f32], shift: f32) -> (f64, f64) {
    let mut total = (0.0, 0.0);
    for block in x.chunks(BLOCK) {
        let (lanes, rest) = block.as_chunks::<SUM_LANES>();
        let (mut s, mut q) = ([0.0f32; SUM_LANES], [0.0f32; SUM_LANES]);
        for x in lanes {
            for l in 0..SUM_LANES {
                let d = x[l] - shift;
                s[l] += d;
                q[l] += d * d;
            }
        }
        for (l, &x) in rest.iter().enumerate() {
            let d = x - shift;
            s[l] += d;
            q[l] += d * d;
        }
        total.0 += s.iter().sum::<f32>() as f64;
        total.1 += q.iter().sum::<f32>() as f64;
    }
    total
}

/// A channel's normalization: `max((x - mean)·scale + beta, floor)`, `scale = γ·r`.
#[derive(Clone, Copy)]
pub(crate) struct Channel {
    pub(crate) mean: f32,
    pub(crate) scale: f32,
    /// `1/√(var + ε)`: `scale` without the channel's `γ`.
    r: f32,
    beta: f32,
    /// 0 for a ReLU after the normalization, -∞ for none.
    floor: f32,
}

impl Channel {
    /// The channel of `mean` and `variance` with offset `beta`, then ReLU: `scale = 1/√(var +
    /// ε)`. The forward and backward passes both take theirs from here, so that they normalize
    /// alike.
    pub(crate) fn new(mean: f32, variance: f32, beta: f32, epsilon: f64) -> Self {
        let r = (1.0 / (variance as f64 + epsilon).sqrt()) as f32;
        Self {
            mean,
            scale: r,
            r,
            beta,
            floor: 0.0,
        }
    }

    /// The channel of `mean` and `variance` with scale `gamma` and offset `beta`, no ReLU.
    pub(super) fn affine(mean: f32, variance: f32, [gamma, beta]: [f32; 2], epsilon: f64) -> Self {
        let r = 1.0 / (variance as f64 + epsilon).sqrt();
        let scale = (gamma as f64 * r) as f32;
        let floor = f32::NEG_INFINITY;
        Self {
            mean,
            scale,
            r: r as f32,
            beta,
            floor,
        }
    }

    /// The normalized value before the ReLU. Forward and backward passes both compute it
    /// here, so that the backward's mask (`> floor`) is the forward's output's, bit for bit.
    #[inline(always)]
    pub(crate) fn normalized(self, x: f32) -> f32 {
        (x - self.mean) * self.scale + self.beta
    }

    /// Whether the output at `x` passes the gradient: above the floor (every finite value
    /// without ReLU).
    #[inline(always)]
    fn passes(self, x: f32) -> bool {
        self.normalized(x) > self.floor
    }
}

/// `max((x - mean)·scale + beta, floor)` of a plane into `out`: the normalization, then the
/// ReLU where the channel has one.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
pub(crate) fn normalize(x: &[f32], out: &mut [MaybeUninit<f32>], channel: Channel) {
    assert_eq!(x.len(), out.len());
    for (out, &x) in out.iter_mut().zip(x) {
        out.write(channel.normalized(x).max(channel.floor));
    }
}

/// [`normalize`] rounded to bf16: with AVX-512 BF16, a run of values normalized by
/// `normalize` itself (the same bits as the f32 output) into a buffer in L1, then rounded
/// by the very instructions that round the convolutions' inputs there, so that a convolution of
/// this output computes the same bits as one of `normalize_relu`'s; elsewhere (where no bf16
/// kernel asks for it) to nearest even.
fn normalize_rounded(x: &[f32], out: &mut [MaybeUninit<bf16>], channel: Channel) {
    assert_eq!(x.len(), out.len());
    #[cfg(target_arch = "x86_64")]
    if let Some(avx512) = Avx512Bf16::get() {
        let mut run = [MaybeUninit::<f32>::uninit(); RUN];
        for (x, out) in x.chunks(RUN).zip(out.chunks_mut(RUN)) {
            let run = &mut run[..x.len()];
            normalize(x, run, channel);
            // SAFETY: `normalize` wrote every value of `run`.
            let run = unsafe { written(run) };
            // SAFETY: `avx512` proves the features; `out` holds `run.len()` words.
            unsafe { store_rounded(avx512, out, run) };
        }
        return;
    }
    for (out, &x) in out.iter_mut().zip(x) {
        out.write(bf16::from_f32(round_to_bf16(
            channel.normalized(x).max(channel.floor),
        )));
    }
}

/// Values [`normalize_rounded`] normalizes at a time: 2 KiB of f32, in L1.
#[cfg(target_arch = "x86_64")]
const RUN: usize = 512;

/// `out` = `values` rounded to bf16 by `store_bf16_run` (the packers' own rounding), 32 at a
/// time, inlined here.
///
/// # Safety
/// `out` and `values` of one length.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
unsafe fn store_rounded(_: Avx512Bf16, out: &mut [MaybeUninit<bf16>], values: &[f32]) {
    // SAFETY: `bf16` is a `u16` (`repr(transparent)`), whatever its bits.
    let out = unsafe { &mut *(out as *mut [MaybeUninit<bf16>] as *mut [MaybeUninit<u16>]) };
    for (out, values) in out.chunks_mut(DEPTH).zip(values.chunks(DEPTH)) {
        // SAFETY: the features are enabled here; both chunks have `values.len()` values, at
        // most 32.
        unsafe { store_bf16_run(out, values) };
    }
}

/// `(Σg, Σg·(x - mean))` of a plane, `g` masked where the forward's output was floored (not
/// positive, under a ReLU).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
pub(crate) fn masked_sums(x: &[f32], g: &[f32], channel: Channel) -> (f64, f64) {
    let mut total = (0.0, 0.0);
    for (x, g) in x.chunks(BLOCK).zip(g.chunks(BLOCK)) {
        let ((xl, xr), (gl, gr)) = (x.as_chunks::<SUM_LANES>(), g.as_chunks::<SUM_LANES>());
        let (mut sg, mut sgx) = ([0.0f32; SUM_LANES], [0.0f32; SUM_LANES]);
        for (x, g) in xl.iter().zip(gl) {
            for l in 0..SUM_LANES {
                // Loaded before the test, so the compiler selects instead of branching.
                let (x, g) = (x[l], g[l]);
                let g = if channel.passes(x) { g } else { 0.0 };
                sg[l] += g;
                sgx[l] += g * (x - channel.mean);
            }
        }
        for (l, (&x, &g)) in xr.iter().zip(gr).enumerate() {
            let g = if channel.passes(x) { g } else { 0.0 };
            sg[l] += g;
            sgx[l] += g * (x - channel.mean);
        }
        total.0 += sg.iter().sum::<f32>() as f64;
        total.1 += sgx.iter().sum::<f32>() as f64;
    }
    total
}

/// `a·g - b - c·(x - mean)` of a plane into `out`, `g` masked as in [`masked_sums`] and `[a,
/// b, c]` the channel's `terms`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
pub(super) fn input_gradient(
    x: &[f32],
    g: &[f32],
    out: &mut [MaybeUninit<f32>],
    channel: Channel,
    [a, b, c]: [f32; 3],
) {
    assert!(x.len() == out.len() && g.len() == out.len());
    for ((out, &x), &g) in out.iter_mut().zip(x).zip(g) {
        let g = if channel.passes(x) { g } else { 0.0 };
        out.write(a * g - b - c * (x - channel.mean));
    }
}
