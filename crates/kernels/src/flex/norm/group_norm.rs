//! Group normalization with a scale and an offset (Burn's `GroupNorm`, a diffusion U-Net's) on
//! flex, from batch norm's pieces: each image's channels in `groups` groups, each group
//! normalized over its channels and places (a contiguous block of a `[n, c, places]` tensor),
//! then each channel scaled and offset. Forward in two passes (the groups' moments, then the
//! output), backward in two (each plane's sums, then the input gradient). Burn composes it from
//! a dozen elementwise ops and reductions, each a pass with a new tensor: forward and backward
//! 2.6x PyTorch's time on `[8, 128, 64, 64]` (bench/HISTORY.md, "GELU").
//!
//! With `x̂ = (x - mean)·r`, `r = 1/√(var + ε)` of the group, `y = γ·x̂ + β` per channel and `g`
//! the output gradient, over the `m` values of a group:
//! `∂L/∂β = Σg`, `∂L/∂γ = Σ(g·x̂)` per channel (over images and places), and
//! `∂L/∂x = r·(γ·g - M₁ - x̂·M₂)`, `M₁ = Σ(γ·g)/m`, `M₂ = Σ(γ·g·x̂)/m` over the group.

use burn::tensor::TensorData;
use burn_flex::FlexTensor;
use rayon::prelude::*;

use super::batch_norm::{Channel, input_gradient, masked_sums, normalize, per_plane, shifted_sums};
use crate::flex::memory::buffers::contiguous;

/// The shape of a group norm's input, `[n, c, places]`, in `groups` groups.
#[derive(Clone, Copy, Debug)]
struct Groups {
    n: usize,
    c: usize,
    places: usize,
    groups: usize,
}

impl Groups {
    /// The groups of `x`, `[n, c, places]` with `c` a multiple of `groups` (the caller checks).
    fn of(x: &FlexTensor, groups: usize) -> Self {
        let shape = x.layout().shape();
        let (n, c, places) = (shape[0], shape[1], shape[2]);
        Self {
            n,
            c,
            places,
            groups,
        }
    }

    /// Values in a group: its channels' planes.
    fn values(self) -> usize {
        self.c / self.groups * self.places
    }

    /// The group (of all images') of the plane that starts at value `first`, channel `ch`.
    fn of_plane(self, first: usize, ch: usize) -> usize {
        first / (self.c * self.places) * self.groups + ch / (self.c / self.groups)
    }
}

/// `γ·(x - mean)/√(var + ε) + β` per group of `x` (`[n, c, places]`, contiguous or not), and
/// each group's mean and biased variance, `[n · groups, 2]`.
pub(crate) fn forward(
    x: FlexTensor,
    [gamma, beta]: [&FlexTensor; 2],
    groups: usize,
    epsilon: f64,
) -> (FlexTensor, FlexTensor) {
    let x = contiguous(x);
    let shape = Groups::of(&x, groups);
    let data: &[f32] = x.storage();
    let moments: Vec<f32> = data
        .par_chunks(shape.values().max(1))
        .flat_map_iter(group_moments)
        .collect();
    let y = {
        let channels = channels(&moments, [gamma, beta], epsilon);
        // SAFETY: `normalize` writes every value of its plane.
        unsafe {
            per_plane(data.len(), shape.c, shape.places, |first, ch, out| {
                let channel = channels(shape.of_plane(first, ch), ch);
                normalize(&data[first..first + out.len()], out, channel);
            })
        }
    };
    let y = FlexTensor::from_data(TensorData::new(y, [shape.n, shape.c, shape.places]));
    let groups = moments.len() / 2;
    let moments = FlexTensor::from_data(TensorData::new(moments, [groups, 2]));
    (y, moments)
}

/// A group's mean and biased variance, from sums shifted by its first value (as batch norm's
/// `moments`: no cancellation whatever the group's offset).
fn group_moments(values: &[f32]) -> [f32; 2] {
    let shift = values.first().copied().unwrap_or(0.0);
    let (s, q) = shifted_sums(values, shift);
    let m = values.len().max(1) as f64;
    let d = s / m;
    [(shift as f64 + d) as f32, (q / m - d * d).max(0.0) as f32]
}

/// Each (group, channel)'s normalization: the group's moments, the channel's scale and offset.
fn channels<'a>(
    moments: &'a [f32],
    [gamma, beta]: [&'a FlexTensor; 2],
    epsilon: f64,
) -> impl Fn(usize, usize) -> Channel + Sync + 'a {
    let (gamma, beta): (&[f32], &[f32]) = (gamma.storage(), beta.storage());
    move |group, ch| {
        let [mean, variance] = [moments[2 * group], moments[2 * group + 1]];
        Channel::affine(mean, variance, [gamma[ch], beta[ch]], epsilon)
    }
}

/// The gradients of `x`, `γ` and `β` given `grad = ∂L/∂y`, the forward's `moments`.
pub(crate) fn backward(
    x: FlexTensor,
    [gamma, beta]: [&FlexTensor; 2],
    moments: &FlexTensor,
    groups: usize,
    epsilon: f64,
    grad: FlexTensor,
) -> [FlexTensor; 3] {
    let (x, grad) = (contiguous(x), contiguous(grad));
    let shape = Groups::of(&x, groups);
    let (data, g): (&[f32], &[f32]) = (x.storage(), grad.storage());
    let moments: &[f32] = moments.storage();
    let channels = channels(moments, [gamma, beta], epsilon);
    let plane = |index: usize| index * shape.places..(index + 1) * shape.places;
    // Each plane's `(Σg, Σg·(x - mean))`, planes in image-major order.
    let sums: Vec<(f64, f64)> = (0..shape.n * shape.c)
        .into_par_iter()
        .map(|index| {
            let (first, ch) = (index * shape.places, index % shape.c);
            let channel = channels(shape.of_plane(first, ch), ch);
            masked_sums(&data[plane(index)], &g[plane(index)], channel)
        })
        .collect();
    let gamma: &[f32] = gamma.storage();
    let rate = |group: usize| 1.0 / (moments[2 * group + 1] as f64 + epsilon).sqrt();
    let terms = group_terms(shape, &sums, gamma, rate);
    // SAFETY: `input_gradient` writes every value of its plane.
    let dx = unsafe {
        per_plane(data.len(), shape.c, shape.places, |first, ch, out| {
            let group = shape.of_plane(first, ch);
            let (r, [m1, m2]) = (rate(group), terms[group]);
            let abc = [r * gamma[ch] as f64, r * m1, r * r * m2].map(|t| t as f32);
            let at = first..first + out.len();
            input_gradient(&data[at.clone()], &g[at], out, channels(group, ch), abc);
        })
    };
    let dx = FlexTensor::from_data(TensorData::new(dx, [shape.n, shape.c, shape.places]));
    let [d_gamma, d_beta] = affine_gradients(shape, &sums, rate);
    [dx, d_gamma, d_beta]
}

/// `∂L/∂γ = Σ r·Σg·(x - mean)` and `∂L/∂β = Σ Σg` per channel over the images' planes (`sums`).
fn affine_gradients(
    shape: Groups,
    sums: &[(f64, f64)],
    rate: impl Fn(usize) -> f64,
) -> [FlexTensor; 2] {
    let (mut d_gamma, mut d_beta) = (vec![0.0f64; shape.c], vec![0.0f64; shape.c]);
    for (index, &(sg, sgx)) in sums.iter().enumerate() {
        let ch = index % shape.c;
        d_beta[ch] += sg;
        d_gamma[ch] += sgx * rate(shape.of_plane(index * shape.places, ch));
    }
    [d_gamma, d_beta].map(|v| {
        let v: Vec<f32> = v.into_iter().map(|v| v as f32).collect();
        FlexTensor::from_data(TensorData::new(v, [shape.c]))
    })
}

/// Each group's `[M₁, M₂]`: `Σ(γ·Σg)/m` and `Σ(γ·r·Σg·(x - mean))/m` over its channels' planes
/// (`sums`).
fn group_terms(
    shape: Groups,
    sums: &[(f64, f64)],
    gamma: &[f32],
    rate: impl Fn(usize) -> f64,
) -> Vec<[f64; 2]> {
    let mut terms = vec![[0.0; 2]; shape.n * shape.groups];
    for (index, &(sg, sgx)) in sums.iter().enumerate() {
        let ch = index % shape.c;
        let group = shape.of_plane(index * shape.places, ch);
        let gamma = gamma[ch] as f64;
        terms[group][0] += gamma * sg;
        terms[group][1] += gamma * sgx * rate(group);
    }
    let m = shape.values().max(1) as f64;
    terms.iter().map(|[t1, t2]| [t1 / m, t2 / m]).collect()
}
