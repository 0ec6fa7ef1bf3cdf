//! Average pooling at stride 1 on flex, forward and backward, as window sums along the rows and
//! then down the columns of each plane (slice additions the compiler vectorizes). Flex's own
//! loops over every output and every window tap with bounds checks, and its backward pass does
//! the same per output gradient: 12% of Inception v3's training step in bf16 (`perf`, batch 8).
//!
//! At stride 1 the backward pass is again a window sum: the input gradient at `i` gathers the
//! outputs whose windows hold `i`, a window of the same size shifted the other way, applied to
//! the output gradient divided by each output's count.

use burn::tensor::TensorData;
use burn_flex::FlexTensor;
use multiversion::multiversion;
use rayon::prelude::*;

use super::dims4;

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
    let x = x.to_contiguous();
    let [n, c, h, w] = dims4(&x);
    let [oh, ow] = shape.out([h, w]);
    let (rows, cols) = (shape.reciprocals(0, h, oh), shape.reciprocals(1, w, ow));
    let sums = WindowSums {
        kernel: shape.kernel,
        before: shape.padding,
    };
    let y = per_plane(x.storage(), [h, w], [oh, ow], |plane, out| {
        sums.apply(plane, [h, w], out, [oh, ow]);
        scale(out, &rows, &cols);
    });
    FlexTensor::from_data(TensorData::new(y, [n, c, oh, ow]))
}

/// The gradient of `x` (`[h, w]` planes) given `grad = ∂L/∂y`.
pub(crate) fn avg_pool_backward(
    grad: FlexTensor,
    [h, w]: [usize; 2],
    shape: AvgPoolShape,
) -> FlexTensor {
    let grad = grad.to_contiguous();
    let [n, c, oh, ow] = dims4(&grad);
    let (rows, cols) = (shape.reciprocals(0, h, oh), shape.reciprocals(1, w, ow));
    let [kh, kw] = shape.kernel;
    let sums = WindowSums {
        kernel: shape.kernel,
        before: [kh - 1 - shape.padding[0], kw - 1 - shape.padding[1]],
    };
    let dx = per_plane(grad.storage(), [oh, ow], [h, w], |plane, out| {
        let mut divided = plane.to_vec();
        scale(&mut divided, &rows, &cols);
        sums.apply(&divided, [oh, ow], out, [h, w]);
    });
    FlexTensor::from_data(TensorData::new(dx, [n, c, h, w]))
}

/// `f(plane, out)` for each `[h, w]` plane of `data` and its `[oh, ow]` output plane, the planes
/// shared among rayon's threads.
fn per_plane(
    data: &[f32],
    [h, w]: [usize; 2],
    [oh, ow]: [usize; 2],
    f: impl Fn(&[f32], &mut [f32]) + Sync,
) -> Vec<f32> {
    let planes = data.len() / (h * w).max(1);
    let mut out = vec![0f32; planes * oh * ow];
    if oh * ow > 0 && h * w > 0 {
        out.par_chunks_mut(oh * ow)
            .zip(data.par_chunks(h * w))
            .for_each(|(out, plane)| f(plane, out));
    }
    out
}

/// `values[i][j] *= rows[i] * cols[j]` for a plane of `cols.len()` columns.
fn scale(values: &mut [f32], rows: &[f32], cols: &[f32]) {
    for (row, &r) in values.chunks_exact_mut(cols.len()).zip(rows) {
        row.iter_mut().zip(cols).for_each(|(v, &c)| *v *= r * c);
    }
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
    fn apply(&self, plane: &[f32], [h, w]: [usize; 2], out: &mut [f32], [oh, ow]: [usize; 2]) {
        window_sums(self.kernel, self.before, (plane, [h, w]), (out, [oh, ow]));
    }
}

/// [`WindowSums::apply`], compiled for AVX-512 and AVX2 too (chosen at run time).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn window_sums(
    kernel: [usize; 2],
    before: [usize; 2],
    (plane, [h, w]): (&[f32], [usize; 2]),
    (out, [oh, ow]): (&mut [f32], [usize; 2]),
) {
    let mut along_rows = vec![0f32; h * ow];
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
