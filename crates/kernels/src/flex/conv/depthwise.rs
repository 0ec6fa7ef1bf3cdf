//! Depthwise convolutions on flex (one filter per channel: `groups` = channels in = channels
//! out, MobileNet's 3x3s), forward and both gradients, in f32, plane by plane.
//!
//! Burn computes a grouped convolution's weight gradient as one convolution per group, each
//! written into the whole gradient (burn-backend's `conv2d_weight_grad_groups`): per channel,
//! for a depthwise one. Here every pass walks each plane once per kernel tap, the tap a scalar
//! and the rows slices the compiler vectorizes (at stride 2, each input row's even and odd
//! places taken apart first; other strides step through the row). At stride 1 on short rows
//! (the 7x7 and 14x14 planes of the last stages) the plane is laid on a zero-padded grid first,
//! so that a tap's slice is the whole plane ([`grid_forward`]). The planes (forward, input
//! gradient) or the channels (weight gradient) are shared among rayon's threads. A depthwise
//! convolution does few products per value read, so these passes are memory-bound: they take
//! f32 in every precision.

use std::borrow::Cow;
use std::ops::Range;

use burn::tensor::TensorData;
use burn_flex::FlexTensor;
use multiversion::multiversion;
use rayon::prelude::*;

use crate::flex::memory::buffers::{contiguous, zeros};
use crate::flex::memory::dims4;

/// Where a depthwise convolution's kernel meets its input: the stride, the zero padding before
/// the first row and column, and the output's size (the padding after is what that leaves,
/// so TF's SAME, one more at the end than at the start, is covered).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DepthwiseGeometry {
    pub stride: [usize; 2],
    pub padding: [usize; 2],
    pub out: [usize; 2],
}

impl DepthwiseGeometry {
    /// The outputs `o` along `axis` whose kernel tap `tap` reads an input place,
    /// `0 <= o·stride + tap − padding < len`, and the first such place.
    fn reading(&self, axis: usize, tap: usize, len: usize) -> (Range<usize>, usize) {
        let (stride, padding) = (self.stride[axis], self.padding[axis]);
        let first = padding.saturating_sub(tap).div_ceil(stride);
        let end = (len + padding).saturating_sub(tap).div_ceil(stride);
        let outputs = first..end.min(self.out[axis]).max(first);
        (
            outputs.clone(),
            (outputs.start * stride + tap).saturating_sub(padding),
        )
    }
}

/// `[n, c, oh, ow]`: each `[h, w]` plane of `x` (`[n, c, h, w]`) convolved with its channel's
/// `[kh, kw]` kernel of `weight` (`[c, 1, kh, kw]`).
pub(crate) fn forward(
    x: FlexTensor,
    weight: FlexTensor,
    geometry: DepthwiseGeometry,
) -> FlexTensor {
    let (x, weight) = (contiguous(x), contiguous(weight));
    let ([n, c, h, w], [_, _, kh, kw]) = (dims4(&x), dims4(&weight));
    let [oh, ow] = geometry.out;
    let on_grid = on_grid(geometry, [kh, kw]);
    let y = plane_by_plane(
        x.storage(),
        h * w,
        oh * ow,
        (weight.storage(), [kh, kw]),
        |x, kernel, out| match on_grid {
            true => grid_forward(x, [h, w], kernel, [kh, kw], geometry, out),
            false => forward_plane(x, [h, w], kernel, [kh, kw], geometry, out),
        },
    );
    FlexTensor::from_data(TensorData::new(y, [n, c, oh, ow]))
}

/// The gradient of `x` (`[n, c, h, w]`) given `grad = ∂L/∂y` and the kernel.
pub(crate) fn input_grad(
    grad: FlexTensor,
    weight: FlexTensor,
    [h, w]: [usize; 2],
    geometry: DepthwiseGeometry,
) -> FlexTensor {
    let (grad, weight) = (contiguous(grad), contiguous(weight));
    let ([n, c, oh, ow], [_, _, kh, kw]) = (dims4(&grad), dims4(&weight));
    // On the grid, the input's gradient is the output's gradient convolved with the kernel
    // turned half a turn, padded by what the forward pass's padding leaves of the kernel.
    let transposed = on_grid(geometry, [kh, kw]).then(|| DepthwiseGeometry {
        stride: [1, 1],
        padding: [kh - 1 - geometry.padding[0], kw - 1 - geometry.padding[1]],
        out: [h, w],
    });
    // Each channel's kernel turned once, not once per image.
    let taps: Cow<[f32]> = match transposed {
        Some(_) => (weight.storage::<f32>().chunks(kh * kw))
            .flat_map(|kernel| kernel.iter().rev().copied())
            .collect(),
        None => Cow::Borrowed(weight.storage()),
    };
    let dx = plane_by_plane(
        grad.storage(),
        oh * ow,
        h * w,
        (&taps, [kh, kw]),
        |grad, kernel, dx| match transposed {
            Some(transposed) => grid_forward(grad, [oh, ow], kernel, [kh, kw], transposed, dx),
            None => input_grad_plane(grad, kernel, [kh, kw], geometry, dx, [h, w]),
        },
    );
    FlexTensor::from_data(TensorData::new(dx, [n, c, h, w]))
}

/// `pass(plane, kernel, out)` for each plane of `input` (`in_len` values each, channel by
/// channel of each image) with its channel's kernel of `taps` (`[c, 1, kh, kw]`: `kh · kw`
/// values a channel) and its output plane (`out_len` values, zeros on entry), the planes shared
/// among rayon's threads.
fn plane_by_plane(
    input: &[f32],
    in_len: usize,
    out_len: usize,
    (taps, [kh, kw]): (&[f32], [usize; 2]),
    pass: impl Fn(&[f32], &[f32], &mut [f32]) + Sync,
) -> Vec<f32> {
    let c = taps.len() / (kh * kw);
    let mut out = zeros(input.len() / in_len * out_len);
    out.par_chunks_mut(out_len)
        .zip(input.par_chunks(in_len))
        .enumerate()
        .for_each(|(plane, (out, input))| {
            pass(input, &taps[plane % c * kh * kw..][..kh * kw], out)
        });
    out
}

/// The gradient of the `[c, 1, kh, kw]` kernel given the input `x` and `grad = ∂L/∂y`: per
/// channel, each tap's products summed over the images in f64, a row at a time in f32.
pub(crate) fn weight_grad(
    x: FlexTensor,
    grad: FlexTensor,
    [kh, kw]: [usize; 2],
    geometry: DepthwiseGeometry,
) -> FlexTensor {
    let (x, grad) = (contiguous(x), contiguous(grad));
    let [n, c, h, w] = dims4(&x);
    let [oh, ow] = geometry.out;
    let on_grid = on_grid(geometry, [kh, kw]);
    let (x, grad): (&[f32], &[f32]) = (x.storage(), grad.storage());
    let dw: Vec<f32> = (0..c)
        .into_par_iter()
        .flat_map_iter(|channel| {
            let mut sums = vec![0f64; kh * kw];
            for image in 0..n {
                let plane = image * c + channel;
                let x = &x[plane * h * w..][..h * w];
                let grad = &grad[plane * oh * ow..][..oh * ow];
                match on_grid {
                    true => grid_weight_grad(x, [h, w], grad, [kh, kw], geometry, &mut sums),
                    false => weight_grad_plane(x, [h, w], grad, [kh, kw], geometry, &mut sums),
                }
            }
            sums.into_iter().map(|sum| sum as f32)
        })
        .collect();
    FlexTensor::from_data(TensorData::new(dw, [c, 1, kh, kw]))
}

/// The input rows each output row reads, by kernel row: `(output row, kernel row, input row)`.
fn row_taps(geometry: DepthwiseGeometry, kh: usize, h: usize) -> impl Iterator<Item = [usize; 3]> {
    let [sy, py] = [geometry.stride[0], geometry.padding[0]];
    (0..geometry.out[0]).flat_map(move |oy| {
        (0..kh).filter_map(move |ky| {
            let iy = (oy * sy + ky).checked_sub(py)?;
            (iy < h).then_some([oy, ky, iy])
        })
    })
}

/// One plane's output (zeros on entry): `out[oy, ox] = Σ kernel[ky, kx] · x[oy·s + ky − p,
/// ox·s + kx − p]` over the taps inside `x`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn forward_plane(
    x: &[f32],
    [h, w]: [usize; 2],
    kernel: &[f32],
    [kh, kw]: [usize; 2],
    geometry: DepthwiseGeometry,
    out: &mut [f32],
) {
    let [ow, sx] = [geometry.out[1], geometry.stride[1]];
    let columns = column_taps(geometry, kw, w);
    let mut phases = RowPhases::default();
    for [oy, ky, iy] in row_taps(geometry, kh, h) {
        let (out, x) = (&mut out[oy * ow..][..ow], &x[iy * w..][..w]);
        phases.split(x, sx);
        for (kx, outputs, first) in &columns {
            let (inputs, step) = phases.read(x, *first, sx);
            add_scaled(
                &mut out[outputs.clone()],
                kernel[ky * kw + *kx],
                inputs,
                step,
            );
        }
    }
}

/// One plane's input gradient (zeros on entry): each output's gradient sent back through
/// every tap that read an input place, the forward pass's loops with the roles swapped.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn input_grad_plane(
    grad: &[f32],
    kernel: &[f32],
    [kh, kw]: [usize; 2],
    geometry: DepthwiseGeometry,
    dx: &mut [f32],
    [h, w]: [usize; 2],
) {
    let [ow, sx] = [geometry.out[1], geometry.stride[1]];
    let columns = column_taps(geometry, kw, w);
    let mut phases = RowPhases::default();
    for [oy, ky, iy] in row_taps(geometry, kh, h) {
        let (grad, dx) = (&grad[oy * ow..][..ow], &mut dx[iy * w..][..w]);
        phases.zero(w, sx);
        for (kx, outputs, first) in &columns {
            let tap = kernel[ky * kw + *kx];
            let grad = &grad[outputs.clone()];
            match sx {
                1 => add_scaled(&mut dx[*first..][..grad.len()], tap, grad, 1),
                2 => add_scaled(&mut phases.write(*first)[..grad.len()], tap, grad, 1),
                _ => {
                    for (d, &g) in dx[*first..].iter_mut().step_by(sx).zip(grad) {
                        *d += tap * g;
                    }
                }
            }
        }
        phases.add_to(dx, sx);
    }
}

/// One plane's contribution to its channel's kernel gradient, added to `sums` (`[kh, kw]`):
/// each tap's output gradients times the inputs it read.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn weight_grad_plane(
    x: &[f32],
    [h, w]: [usize; 2],
    grad: &[f32],
    [kh, kw]: [usize; 2],
    geometry: DepthwiseGeometry,
    sums: &mut [f64],
) {
    let [ow, sx] = [geometry.out[1], geometry.stride[1]];
    let columns = column_taps(geometry, kw, w);
    let mut phases = RowPhases::default();
    for [oy, ky, iy] in row_taps(geometry, kh, h) {
        let (grad, x) = (&grad[oy * ow..][..ow], &x[iy * w..][..w]);
        phases.split(x, sx);
        for (kx, outputs, first) in &columns {
            let (inputs, step) = phases.read(x, *first, sx);
            sums[ky * kw + *kx] += dot(&grad[outputs.clone()], inputs, step) as f64;
        }
    }
}

/// The widest output rows passed on the zero-padded grid ([`Grid`]): on wider
/// ones the row-by-row passes run whole vectors already, without the grid's copy.
const GRID_WIDTH: usize = 32;

/// Whether the passes of `geometry` (stride 1, rows of at most [`GRID_WIDTH`] outputs, padding
/// before within the kernel) run on the zero-padded grid.
fn on_grid(geometry: DepthwiseGeometry, [kh, kw]: [usize; 2]) -> bool {
    let [ph, pw] = geometry.padding;
    geometry.stride == [1, 1] && geometry.out[1] <= GRID_WIDTH && ph < kh && pw < kw
}

/// `x` (`[h, w]`) on a grid of `rows x width` zeros, `padding` rows and columns from its top
/// left: the places a stride-1 pass reads, padding included, as one slice. Rows and columns
/// past the grid are never read and left out.
fn padded(
    x: &[f32],
    [h, w]: [usize; 2],
    [ph, pw]: [usize; 2],
    [rows, width]: [usize; 2],
) -> Vec<f32> {
    let mut grid = vec![0.0; rows * width];
    let columns = w.min(width.saturating_sub(pw));
    for (iy, row) in x.chunks_exact(w).take(h).enumerate() {
        if iy + ph >= rows {
            break;
        }
        grid[(iy + ph) * width + pw..][..columns].copy_from_slice(&row[..columns]);
    }
    grid
}

/// An input plane on its zero-padded grid (see [`grid_forward`]): `oh + kh - 1` rows of
/// `width = ow + kw - 1` places, the input `padding` rows and columns from the top left.
struct Grid {
    values: Vec<f32>,
    width: usize,
    /// The grid places whose every tap stays on the grid: all that the outputs keep.
    span: usize,
}

impl Grid {
    /// `x` (`[h, w]`) on the grid of `geometry`'s taps of a `[kh, kw]` kernel.
    fn of_input(
        x: &[f32],
        [h, w]: [usize; 2],
        [kh, kw]: [usize; 2],
        geometry: DepthwiseGeometry,
    ) -> Self {
        let [oh, ow] = geometry.out;
        let width = ow + kw - 1;
        Self {
            values: padded(x, [h, w], geometry.padding, [oh + kh - 1, width]),
            width,
            span: oh * width - (kw - 1),
        }
    }

    /// What tap `[ky, kx]` reads for the grid's first `span` places.
    #[inline(always)]
    fn tap(&self, ky: usize, kx: usize) -> &[f32] {
        &self.values[ky * self.width + kx..][..self.span]
    }
}

/// [`forward_plane`] at stride 1 for short rows: the input on a zero-padded grid ([`Grid`]), so
/// that each tap adds one slice of the whole plane (`oh · width` places, the columns past `ow`
/// computed and dropped) where the rows of a 7x7 plane would be seven slices of seven, mostly
/// the vector loops' remainders.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn grid_forward(
    x: &[f32],
    [h, w]: [usize; 2],
    kernel: &[f32],
    [kh, kw]: [usize; 2],
    geometry: DepthwiseGeometry,
    out: &mut [f32],
) {
    let grid = Grid::of_input(x, [h, w], [kh, kw], geometry);
    let mut sums = vec![0.0; grid.span];
    for ky in 0..kh {
        for kx in 0..kw {
            add_scaled(&mut sums, kernel[ky * kw + kx], grid.tap(ky, kx), 1);
        }
    }
    let ow = geometry.out[1];
    for (out, sums) in out.chunks_exact_mut(ow).zip(sums.chunks(grid.width)) {
        out.copy_from_slice(&sums[..ow]);
    }
}

/// [`weight_grad_plane`] at stride 1 for short rows: each tap's products summed over the
/// input's [`Grid`] against the output's gradient laid on the same width, zeros in the columns
/// past `ow`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn grid_weight_grad(
    x: &[f32],
    [h, w]: [usize; 2],
    grad: &[f32],
    [kh, kw]: [usize; 2],
    geometry: DepthwiseGeometry,
    sums: &mut [f64],
) {
    let grid = Grid::of_input(x, [h, w], [kh, kw], geometry);
    let [oh, ow] = geometry.out;
    let grad = padded(grad, [oh, ow], [0, 0], [oh, grid.width]);
    for ky in 0..kh {
        for kx in 0..kw {
            sums[ky * kw + kx] += dot(&grad[..grid.span], grid.tap(ky, kx), 1) as f64;
        }
    }
}

/// Each kernel column that reads the input, its outputs and the first input column it reads
/// ([`DepthwiseGeometry::reading`] along the width), once per plane. A column that reads only
/// padding (a wide padding after the input) is left out.
fn column_taps(
    geometry: DepthwiseGeometry,
    kw: usize,
    w: usize,
) -> Vec<(usize, Range<usize>, usize)> {
    let taps = (0..kw).map(|kx| (kx, geometry.reading(1, kx, w)));
    let reading = taps.filter(|(_, (outputs, _))| !outputs.is_empty());
    reading
        .map(|(kx, (outputs, first))| (kx, outputs, first))
        .collect()
}

/// An input row as the taps of a stride-2 convolution read it: its even and odd places apart,
/// so that each tap reads a contiguous slice, which the compiler vectorizes. At other strides
/// the row itself is read.
#[derive(Default)]
struct RowPhases {
    even: Vec<f32>,
    odd: Vec<f32>,
}

impl RowPhases {
    /// Takes `row`'s places apart at stride 2; nothing at other strides.
    #[inline(always)]
    fn split(&mut self, row: &[f32], stride: usize) {
        if stride == 2 {
            self.even.clear();
            self.even.extend(row.iter().step_by(2));
            self.odd.clear();
            self.odd.extend(row.iter().skip(1).step_by(2));
        }
    }

    /// At stride 2, zeros for a row of `len` places to be scattered into ([`write`](Self::write),
    /// then [`add_to`](Self::add_to)).
    #[inline(always)]
    fn zero(&mut self, len: usize, stride: usize) {
        if stride == 2 {
            self.even.clear();
            self.even.resize(len.div_ceil(2), 0.0);
            self.odd.clear();
            self.odd.resize(len / 2, 0.0);
        }
    }

    /// The places `first, first + 2, ...` of the row being scattered into, contiguous.
    #[inline(always)]
    fn write(&mut self, first: usize) -> &mut [f32] {
        match first % 2 {
            0 => &mut self.even[first / 2..],
            _ => &mut self.odd[first / 2..],
        }
    }

    /// At stride 2, the scattered values added to `row`'s places.
    #[inline(always)]
    fn add_to(&self, row: &mut [f32], stride: usize) {
        if stride == 2 {
            for (pair, (&even, &odd)) in row.chunks_mut(2).zip(self.even.iter().zip(&self.odd)) {
                pair[0] += even;
                pair[1] += odd;
            }
            if row.len() % 2 == 1 {
                row[row.len() - 1] += self.even[row.len() / 2];
            }
        }
    }

    /// `row`'s places `first, first + stride, ...` as a slice and the step between them there.
    #[inline(always)]
    fn read<'a>(&'a self, row: &'a [f32], first: usize, stride: usize) -> (&'a [f32], usize) {
        match (stride, first % 2) {
            (2, 0) => (&self.even[first / 2..], 1),
            (2, _) => (&self.odd[first / 2..], 1),
            _ => (&row[first..], stride),
        }
    }
}

/// `out[i] += tap · x[i · stride]` for every `i` of `out`. Inlined into the callers, which are
/// compiled for AVX-512 and AVX2: at stride 1 two slices the compiler vectorizes.
#[inline(always)]
fn add_scaled(out: &mut [f32], tap: f32, x: &[f32], stride: usize) {
    match stride {
        1 => {
            let x = &x[..out.len()];
            for (o, &v) in out.iter_mut().zip(x) {
                *o += tap * v;
            }
        }
        _ => {
            for (o, &v) in out.iter_mut().zip(x.iter().step_by(stride)) {
                *o += tap * v;
            }
        }
    }
}

/// `Σ g[i] · x[i · stride]` over `g`. At stride 1 in 16 lanes, so that the compiler vectorizes
/// it (a sum in one accumulator is a chain it must keep in order).
#[inline(always)]
fn dot(g: &[f32], x: &[f32], stride: usize) -> f32 {
    if stride != 1 {
        return g
            .iter()
            .zip(x.iter().step_by(stride))
            .map(|(a, b)| a * b)
            .sum();
    }
    let x = &x[..g.len()];
    let mut lanes = [0f32; 16];
    for (g, x) in g.chunks_exact(16).zip(x.chunks_exact(16)) {
        for lane in 0..16 {
            lanes[lane] += g[lane] * x[lane];
        }
    }
    let whole = g.len() / 16 * 16;
    let rest: f32 = g[whole..].iter().zip(&x[whole..]).map(|(a, b)| a * b).sum();
    lanes.iter().sum::<f32>() + rest
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The outputs each tap reads, against a count by hand: padding 1 before, stride 2, a
    /// width of 6 (SAME: 3 outputs, the last window one past the end).
    #[test]
    fn each_tap_reads_the_outputs_inside_the_input() {
        let geometry = DepthwiseGeometry {
            stride: [2, 2],
            padding: [0, 1],
            out: [3, 3],
        };
        // o·2 + tap − 1 in [0, 6).
        assert_eq!(geometry.reading(1, 0, 6), (1..3, 1));
        assert_eq!(geometry.reading(1, 1, 6), (0..3, 0));
        assert_eq!(geometry.reading(1, 2, 6), (0..3, 1));
        // Without padding, tap 2 of the last output: 2·2 + 2 = 6, past the end.
        assert_eq!(geometry.reading(0, 2, 6), (0..2, 2));
        // A tap past every input: no output.
        assert!(geometry.reading(1, 8, 6).0.is_empty());
    }
}
