//! Average pooling at stride 1 on flex, forward and backward, as window sums along the rows and
//! then down the columns of each plane (slice additions the compiler vectorizes). Flex's own
//! loops over every output and every window tap with bounds checks, and its backward pass does
//! the same per output gradient: 12% of Inception v3's training step in bf16 (`perf`, batch 8).
//!
//! At stride 1 the backward pass is again a window sum: the input gradient at `i` gathers the
//! outputs whose windows hold `i`, a window of the same size shifted the other way, applied to
//! the output gradient divided by each output's count.
//!
//! Where the output has the input's size (SAME padding: Inception v3's 3x3 pools), rows of
//! 35, 17 or 8 values are too short for vector loops: each plane is then copied into rows
//! padded with zeros, and both sums run once over the whole plane ([`SameSize`]), the
//! divisors applied in the copy in or out. 2.5% of Inception's training step went to these
//! pools before.

use burn::tensor::TensorData;
use burn_flex::FlexTensor;
use multiversion::multiversion;
use rayon::prelude::*;

use crate::flex::memory::buffers::{contiguous, zeros};
use crate::flex::memory::dims4;

/// A stride-1 average pool: its window, zero padding (the same before and after) and whether
/// padding counts in each output's divisor (PyTorch's `count_include_pad`; TF's does not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AvgPoolShape {
    pub kernel: [usize; 2],
    pub padding: [usize; 2],
    pub counts_padding: bool,
}

impl AvgPoolShape {
    /// The output's size for an `[h, w]` plane.
    fn out(&self, [h, w]: [usize; 2]) -> [usize; 2] {
        let side = |n: usize, k: usize, p: usize| n + 2 * p + 1 - k;
        [
            side(h, self.kernel[0], self.padding[0]),
            side(w, self.kernel[1], self.padding[1]),
        ]
    }

    /// Each output's reciprocal divisor, `[oh, ow]` for an `[h, w]` input.
    fn reciprocals_plane(&self, [h, w]: [usize; 2], [oh, ow]: [usize; 2]) -> Vec<f32> {
        let (rows, cols) = (self.reciprocals(0, h, oh), self.reciprocals(1, w, ow));
        rows.iter()
            .flat_map(|r| cols.iter().map(move |c| r * c))
            .collect()
    }

    /// Each output's reciprocal divisor along one axis of input length `n`.
    fn reciprocals(&self, axis: usize, n: usize, out: usize) -> Vec<f32> {
        let (k, p) = (self.kernel[axis], self.padding[axis]);
        (0..out)
            .map(|o| match self.counts_padding {
                true => 1.0 / k as f32,
                false => 1.0 / ((o + k).min(n + p) - o.max(p)) as f32,
            })
            .collect()
    }
}

/// `avg_pool(x)` for `[n, c, h, w]`.
pub(crate) fn avg_pool_forward(x: FlexTensor, shape: AvgPoolShape) -> FlexTensor {
    let x = contiguous(x);
    let [n, c, h, w] = dims4(&x);
    let [oh, ow] = shape.out([h, w]);
    let divisors = shape.reciprocals_plane([h, w], [oh, ow]);
    let sums = WindowSums {
        kernel: shape.kernel,
        before: shape.padding,
    };
    let y = match SameSize::new(&sums, [h, w], [oh, ow]) {
        Some(same) => per_plane(x.storage(), [h, w], [oh, ow], |plane, out, scratch| {
            same.apply(plane, None, out, Some(&divisors), scratch)
        }),
        None => per_plane(x.storage(), [h, w], [oh, ow], |plane, out, scratch| {
            sums.apply(plane, [h, w], out, [oh, ow], scratch);
            multiply(out, &divisors);
        }),
    };
    FlexTensor::from_data(TensorData::new(y, [n, c, oh, ow]))
}

/// The gradient of `x` (`[h, w]` planes) given `grad = ∂L/∂y`.
pub(crate) fn avg_pool_backward(
    grad: FlexTensor,
    [h, w]: [usize; 2],
    shape: AvgPoolShape,
) -> FlexTensor {
    let grad = contiguous(grad);
    let [n, c, oh, ow] = dims4(&grad);
    let divisors = shape.reciprocals_plane([h, w], [oh, ow]);
    let [kh, kw] = shape.kernel;
    let sums = WindowSums {
        kernel: shape.kernel,
        before: [kh - 1 - shape.padding[0], kw - 1 - shape.padding[1]],
    };
    let dx = match SameSize::new(&sums, [oh, ow], [h, w]) {
        Some(same) => per_plane(grad.storage(), [oh, ow], [h, w], |plane, out, scratch| {
            same.apply(plane, Some(&divisors), out, None, scratch)
        }),
        None => per_plane(grad.storage(), [oh, ow], [h, w], |plane, out, scratch| {
            let mut divided = plane.to_vec();
            multiply(&mut divided, &divisors);
            sums.apply(&divided, [oh, ow], out, [h, w], scratch);
        }),
    };
    FlexTensor::from_data(TensorData::new(dx, [n, c, h, w]))
}

/// `f(plane, out, scratch)` for each `[h, w]` plane of `data` and its `[oh, ow]` output plane
/// (zeros on entry), the planes shared among rayon's threads, each with scratch buffers
/// reused from plane to plane.
fn per_plane(
    data: &[f32],
    [h, w]: [usize; 2],
    [oh, ow]: [usize; 2],
    f: impl Fn(&[f32], &mut [f32], &mut Scratch) + Sync,
) -> Vec<f32> {
    let planes = data.len() / (h * w).max(1);
    let mut out = zeros(planes * oh * ow);
    if oh * ow > 0 && h * w > 0 {
        out.par_chunks_mut(oh * ow)
            .zip(data.par_chunks(h * w))
            .for_each_init(Scratch::default, |scratch, (out, plane)| {
                f(plane, out, scratch)
            });
    }
    out
}

/// A thread's buffers for one plane at a time.
#[derive(Default)]
struct Scratch {
    padded: Vec<f32>,
    along_rows: Vec<f32>,
    sums: Vec<f32>,
}

/// `values[i] *= by[i]`.
fn multiply(values: &mut [f32], by: &[f32]) {
    values.iter_mut().zip(by).for_each(|(v, &b)| *v *= b);
}

/// Sums over a window: output `(i, j)` is the sum of the input at `(i + ty - before[0], j + tx -
/// before[1])` for the window's taps `(ty, tx)`, zero outside the input.
struct WindowSums {
    kernel: [usize; 2],
    before: [usize; 2],
}

impl WindowSums {
    /// `out` (`[oh, ow]`, zeros on entry) from `plane` (`[h, w]`): along the rows into a
    /// `[h, ow]` scratch, then down its columns.
    fn apply(
        &self,
        plane: &[f32],
        [h, w]: [usize; 2],
        out: &mut [f32],
        [oh, ow]: [usize; 2],
        scratch: &mut Scratch,
    ) {
        let along_rows = &mut scratch.along_rows;
        along_rows.clear();
        along_rows.resize(h * ow, 0.0);
        window_sums(
            self.kernel,
            self.before,
            (plane, [h, w]),
            (out, [oh, ow]),
            along_rows,
        );
    }
}

/// [`WindowSums`] whose output has the input's `[h, w]`, the padding `before` and after
/// making up the window. The plane goes into rows `wp = w + kw - 1` long with the padding
/// as zeros (scaled on the way when `scale_in`), so that the sums along the rows are one run
/// over the padded plane (each place's window the `kw` values from it on; the last `kw - 1`
/// places of each row are not outputs) and those down the columns one run per tap row, whole
/// rows of `wp` apart (taps above or below the plane left out by the run's bounds). The
/// outputs are then copied out of the padded rows (scaled when `scale_out`).
struct SameSize {
    kernel: [usize; 2],
    before: [usize; 2],
    plane: [usize; 2],
    /// The padded row length.
    wp: usize,
}

impl SameSize {
    fn new(sums: &WindowSums, input: [usize; 2], output: [usize; 2]) -> Option<Self> {
        let [kh, kw] = sums.kernel;
        let fits = sums.before[0] < kh && sums.before[1] < kw;
        (input == output && fits).then(|| Self {
            kernel: sums.kernel,
            before: sums.before,
            plane: input,
            wp: input[1] + kw - 1,
        })
    }

    fn apply(
        &self,
        plane: &[f32],
        scale_in: Option<&[f32]>,
        out: &mut [f32],
        scale_out: Option<&[f32]>,
        scratch: &mut Scratch,
    ) {
        let ([h, w], wp, [kh, kw]) = (self.plane, self.wp, self.kernel);
        let Scratch {
            padded,
            along_rows,
            sums,
        } = scratch;
        padded.resize(h * wp, 0.0);
        for (i, padded) in padded.chunks_exact_mut(wp).enumerate() {
            let (left, rest) = padded.split_at_mut(self.before[1]);
            let (inside, right) = rest.split_at_mut(w);
            left.fill(0.0);
            right.fill(0.0);
            let row = &plane[i * w..][..w];
            match scale_in {
                Some(by) => scaled_copy(inside, row, &by[i * w..][..w]),
                None => inside.copy_from_slice(row),
            }
        }
        along_rows.clear();
        along_rows.resize(h * wp, 0.0);
        let run = h * wp - (kw - 1);
        for tap in 0..kw {
            add(&mut along_rows[..run], &padded[tap..tap + run]);
        }
        sums.clear();
        sums.resize(h * wp, 0.0);
        for tap in 0..kh {
            // sums[k] += along_rows[k + (tap - before) · wp] where that row exists.
            let (up, down) = (
                (self.before[0].saturating_sub(tap)) * wp,
                (tap.saturating_sub(self.before[0])) * wp,
            );
            let len = h * wp - up.max(down);
            add(&mut sums[up..up + len], &along_rows[down..down + len]);
        }
        for (i, out) in out.chunks_exact_mut(w).enumerate() {
            let row = &sums[i * wp..][..w];
            match scale_out {
                Some(by) => scaled_copy(out, row, &by[i * w..][..w]),
                None => out.copy_from_slice(row),
            }
        }
    }
}

/// `dst[i] += src[i]`, compiled for AVX-512 and AVX2 too (chosen at run time).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn add(dst: &mut [f32], src: &[f32]) {
    dst.iter_mut().zip(src).for_each(|(d, &s)| *d += s);
}

/// `dst[i] = src[i] · by[i]`.
fn scaled_copy(dst: &mut [f32], src: &[f32], by: &[f32]) {
    for ((d, &s), &b) in dst.iter_mut().zip(src).zip(by) {
        *d = s * b;
    }
}

/// [`WindowSums::apply`], compiled for AVX-512 and AVX2 too (chosen at run time).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn window_sums(
    kernel: [usize; 2],
    before: [usize; 2],
    (plane, [h, w]): (&[f32], [usize; 2]),
    (out, [oh, ow]): (&mut [f32], [usize; 2]),
    along_rows: &mut [f32],
) {
    for (dst, src) in along_rows.chunks_exact_mut(ow).zip(plane.chunks_exact(w)) {
        add_shifted(dst, src, kernel[1], before[1]);
    }
    for (i, dst) in out.chunks_exact_mut(ow).enumerate().take(oh) {
        for t in 0..kernel[0] {
            let Some(y) = (i + t).checked_sub(before[0]).filter(|&y| y < h) else {
                continue;
            };
            let src = &along_rows[y * ow..(y + 1) * ow];
            dst.iter_mut().zip(src).for_each(|(d, s)| *d += s);
        }
    }
}

/// `dst[j] += Σ_t src[j + t - before]` over the `taps`, where that index lies in `src`.
#[inline(always)]
fn add_shifted(dst: &mut [f32], src: &[f32], taps: usize, before: usize) {
    for t in 0..taps {
        // dst[j] takes src[j + t - before] for j in first..end.
        let first = before.saturating_sub(t);
        let end = (src.len() + before).saturating_sub(t).min(dst.len());
        if end <= first {
            continue;
        }
        let start = first + t - before;
        let src = &src[start..start + (end - first)];
        dst[first..end]
            .iter_mut()
            .zip(src)
            .for_each(|(d, &s)| *d += s);
    }
}
