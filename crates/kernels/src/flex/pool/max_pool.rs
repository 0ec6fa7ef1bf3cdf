//! Max pooling of `[n, c, h, w]` f32 tensors without padding or dilation, and its backward
//! pass, plane by plane over rayon's threads.
//!
//! Flex's max pooling recomputes each window's clipped range per output and per kernel row
//! (three range computations and a branching compare), 20 ms for the CIFAR-10 net's first
//! pool against TF's 1.2; here each plane is reduced in a few vectorized passes
//! ([`PlanePool`]).

use burn::tensor::TensorData;
use burn_flex::FlexTensor;
use multiversion::multiversion;
use rayon::prelude::*;

use crate::flex::memory::buffers::{contiguous, zeroed_chunks, zeros};
use crate::flex::memory::{deinterleave, dims4};
use crate::flex::pool::output_size::pooled_size;

/// A max pooling's window, stride and rounding: ceil mode counts a last window that runs past
/// the end (it then covers fewer places), as Burn's and PyTorch's `ceil_mode` do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MaxPoolShape {
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub ceil_mode: bool,
}

impl MaxPoolShape {
    pub(crate) fn new(kernel: [usize; 2], stride: [usize; 2], ceil_mode: bool) -> Self {
        Self {
            kernel,
            stride,
            ceil_mode,
        }
    }

    /// Output rows and columns of an `[h, w]` plane: Burn's count without padding.
    pub(crate) fn output_size(&self, plane: [usize; 2]) -> [usize; 2] {
        [0, 1].map(|axis| {
            let (kernel, stride) = (self.kernel[axis], self.stride[axis]);
            pooled_size(plane[axis], kernel, 0, stride, self.ceil_mode)
        })
    }
}

/// The pooled tensor and, for each output, the index of its maximum within its input plane
/// (`row · w + column`, the layout of flex's own indices). Ties go to the first maximum in
/// row-major order, as in flex; a NaN in a window makes its output NaN.
pub(crate) fn max_pool_forward(x: FlexTensor, shape: MaxPoolShape) -> (FlexTensor, Vec<u32>) {
    let x = contiguous(x);
    let [n, c, h, w] = dims4(&x);
    let [out_h, out_w] = shape.output_size([h, w]);
    let data: &[f32] = x.storage();
    let plane_out = out_h * out_w;
    if n * c * plane_out == 0 {
        let out = TensorData::new(Vec::<f32>::new(), [n, c, out_h, out_w]);
        return (FlexTensor::from_data(out), Vec::new());
    }
    let mut out = zeros(n * c * out_h * out_w);
    let mut argmax = zeros(n * c * out_h * out_w);
    let planes = out
        .par_chunks_mut(plane_out)
        .zip(argmax.par_chunks_mut(plane_out))
        .zip(data.par_chunks(h * w));
    #[cfg(target_arch = "x86_64")]
    if let Some(pool) = three_by_two::Pool::new(shape, [h, w]) {
        planes.for_each_init(
            || pool.scratch(),
            |rows, ((out, argmax), plane)| pool.pool(plane, out, argmax, rows),
        );
        let out = TensorData::new(out, [n, c, out_h, out_w]);
        return (FlexTensor::from_data(out), argmax);
    }
    planes.for_each_init(
        || PlanePool::new(shape, [h, w]),
        |pool, ((out, argmax), plane)| pool.pool(plane, out, argmax),
    );
    let out = TensorData::new(out, [n, c, out_h, out_w]);
    (FlexTensor::from_data(out), argmax)
}

/// One thread's scratch for pooling whole planes, in three vectorizable passes over long
/// runs (a row of the CIFAR-10 net's pools is only 24 or 12 wide, too short for the
/// compiler's vector loops, whose scalar tails branch):
/// 1. `down`: for each kernel row, the input rows under it for every output row, gathered into
///    one run, merged into the running maxima (`out_h × w`);
/// 2. those maxima split by phase (column mod stride) into rows of `span` places, so that
///    each kernel column is the same run shifted by `kx / stride`;
/// 3. `across`: one merge per kernel column over all `out_h × span` places.
///
/// Each merge reads one buffer and writes another: an update in place, `m = if take { v }
/// else { m }`, lets the compiler skip the unchanged stores, a branch per lane without
/// masked stores (SSE2), mispredicted on real data.
struct PlanePool {
    shape: MaxPoolShape,
    plane: [usize; 2],
    out: [usize; 2],
    /// Places per phase row: the outputs of a row plus the furthest shift, `(kw - 1) / sw`.
    span: usize,
    /// Per kernel row: the plane indices of the candidates `down` gathers (`NONE` past the
    /// last row).
    down_at: Vec<Vec<u32>>,
    candidates: Vec<f32>,
    /// `down`'s running maxima and the buffer it merges into (`out_h × w`).
    rows: [Maxima; 2],
    phases: Vec<Maxima>,
    /// `across`'s running maxima and the buffer it merges into (`out_h × span`).
    columns: [Maxima; 2],
}

/// A plane index no place has: padding that never wins a tie.
const NONE: u32 = u32::MAX;

/// Maxima and the plane indices (`row · w + column`) where they are.
#[derive(Clone)]
struct Maxima {
    value: Vec<f32>,
    at: Vec<u32>,
}

impl Maxima {
    fn new(len: usize) -> Self {
        Self {
            value: vec![f32::NEG_INFINITY; len],
            at: vec![NONE; len],
        }
    }

    /// `into = max(self, candidates)` place by place over `self`'s length, the candidates
    /// read from `offset` on. A tie goes to the smaller plane index, as flex's row-major scan
    /// decides; a NaN wins.
    fn merge(&self, (values, at): (&[f32], &[u32]), offset: usize, into: &mut Maxima) {
        let len = self.value.len();
        let candidates = (&values[offset..offset + len], &at[offset..offset + len]);
        merge_maxima(
            (&self.value, &self.at),
            candidates,
            (&mut into.value, &mut into.at),
        );
    }
}

/// Each of `rows` rows of `w` columns (values and their plane indices) split into its even and
/// odd columns, written at the start of the same row of two phase buffers of `span` places a
/// row, as many as each row has room for.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn split_in_two(
    (values, at): (&[f32], &[u32]),
    [w, span]: [usize; 2],
    rows: usize,
    [even, odd]: [(&mut [f32], &mut [u32]); 2],
) {
    for r in 0..rows {
        let (row, places) = (r * w..(r + 1) * w, r * span..(r + 1) * span);
        let (values, at) = (&values[row.clone()], &at[row]);
        let (e, o) = (&mut even.0[places.clone()], &mut odd.0[places.clone()]);
        deinterleave(values, e, o);
        let (e_at, o_at) = (&mut even.1[places.clone()], &mut odd.1[places]);
        deinterleave(at, e_at, o_at);
        // An odd width's last column, which has no pair.
        let last = w / 2;
        if w % 2 == 1 && last < span {
            (e[last], e_at[last]) = (values[w - 1], at[w - 1]);
        }
    }
}

/// [`Maxima::merge`]'s loop, compiled for AVX-512 and AVX2 too (chosen at run time).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn merge_maxima(
    (value, at): (&[f32], &[u32]),
    (values, ats): (&[f32], &[u32]),
    (out, out_at): (&mut [f32], &mut [u32]),
) {
    let current = value.iter().zip(at);
    let candidates = values.iter().zip(ats);
    let outputs = out.iter_mut().zip(out_at);
    for ((o, a), ((&m, &i), (&v, &j))) in outputs.zip(current.zip(candidates)) {
        let take = (v > m) | ((v == m) & (j < i)) | (v.is_nan() & !m.is_nan());
        *o = if take { v } else { m };
        *a = if take { j } else { i };
    }
}

impl PlanePool {
    fn new(shape: MaxPoolShape, [h, w]: [usize; 2]) -> Self {
        let [out_h, out_w] = shape.output_size([h, w]);
        let ([kh, kw], [sh, sw]) = (shape.kernel, shape.stride);
        let span = out_w + (kw - 1) / sw;
        let down_at = (0..kh)
            .map(|ky| {
                let row = |oy: usize| oy * sh + ky;
                (0..out_h * w)
                    .map(|p| match row(p / w) {
                        y if y < h => (y * w + p % w) as u32,
                        _ => NONE,
                    })
                    .collect()
            })
            .collect();
        Self {
            shape,
            plane: [h, w],
            out: [out_h, out_w],
            span,
            down_at,
            candidates: vec![f32::NEG_INFINITY; out_h * w],
            rows: [Maxima::new(out_h * w), Maxima::new(out_h * w)],
            phases: vec![Maxima::new(out_h * span + span); sw],
            columns: [Maxima::new(out_h * span), Maxima::new(out_h * span)],
        }
    }

    fn pool(&mut self, plane: &[f32], out: &mut [f32], argmax: &mut [u32]) {
        self.down(plane);
        self.split();
        self.across(out, argmax);
    }

    /// The maxima over each output row's input rows, column by column: `rows[0]` as
    /// `out_h × w`.
    fn down(&mut self, plane: &[f32]) {
        let [h, w] = self.plane;
        self.rows[0].value.fill(f32::NEG_INFINITY);
        self.rows[0].at.fill(NONE);
        for ky in 0..self.shape.kernel[0] {
            for (oy, run) in self.candidates.chunks_exact_mut(w).enumerate() {
                match oy * self.shape.stride[0] + ky {
                    y if y < h => run.copy_from_slice(&plane[y * w..][..w]),
                    _ => run.fill(f32::NEG_INFINITY),
                }
            }
            let candidates = (&self.candidates[..], &self.down_at[ky][..]);
            let [best, next] = &mut self.rows;
            best.merge(candidates, 0, next);
            self.rows.swap(0, 1);
        }
    }

    /// `rows[0]`'s columns by phase: phase `r`'s row `oy` holds columns `r, r + sw, ...` of
    /// output row `oy` in `span` places (padding past the plane's edge).
    fn split(&mut self) {
        let ([_, w], [out_h, _]) = (self.plane, self.out);
        let (span, stride) = (self.span, self.shape.stride[1]);
        // Every plane writes the same places of the phase rows, so their padding stays as
        // `new` left it: nothing to refill.
        if let [even, odd] = &mut self.phases[..] {
            // Stride 2 (the CIFAR-10 net's pools) row by row in passes that vectorize: a value
            // at a time, this split was 6–7% of that net's training step.
            let rows = (&self.rows[0].value[..], &self.rows[0].at[..]);
            let phases = [even, odd].map(|m| (&mut m.value[..], &mut m.at[..]));
            split_in_two(rows, [w, span], out_h, phases);
            return;
        }
        for (phase, maxima) in self.phases.iter_mut().enumerate() {
            for oy in 0..out_h {
                let columns = (phase..w).step_by(stride).take(span);
                for (place, x) in (oy * span..).zip(columns) {
                    maxima.value[place] = self.rows[0].value[oy * w + x];
                    maxima.at[place] = self.rows[0].at[oy * w + x];
                }
            }
        }
    }

    /// Each window's maximum across its columns: one merge per kernel column over all
    /// `out_h × span` places, then each row's first `out_w` places out.
    fn across(&mut self, out: &mut [f32], argmax: &mut [u32]) {
        let ([out_h, out_w], span) = (self.out, self.span);
        let (stride, len) = (self.shape.stride[1], out_h * span);
        self.columns[0]
            .value
            .copy_from_slice(&self.phases[0].value[..len]);
        self.columns[0]
            .at
            .copy_from_slice(&self.phases[0].at[..len]);
        for kx in 1..self.shape.kernel[1] {
            let phase = &self.phases[kx % stride];
            let candidates = (&phase.value[..], &phase.at[..]);
            let [best, next] = &mut self.columns;
            best.merge(candidates, kx / stride, next);
            self.columns.swap(0, 1);
        }
        let best = &self.columns[0];
        let rows = out
            .chunks_exact_mut(out_w)
            .zip(argmax.chunks_exact_mut(out_w));
        for (oy, (out, argmax)) in rows.enumerate() {
            out.copy_from_slice(&best.value[oy * span..][..out_w]);
            argmax.copy_from_slice(&best.at[oy * span..][..out_w]);
        }
    }
}

/// 3x3 windows at stride 2 on AVX-512 (Inception's pools, every window whole, and the CIFAR-10
/// net's, whose last window in ceil mode is cut short by a row and a column), row by row:
/// each output row's three input rows reduced to one (maxima and their plane indices), then
/// its even and odd columns split apart by permutes, so that the windows' three columns are
/// the even, odd and next even places: 16 outputs per step, no pass over the plane between.
/// The generic passes spent most of their time splitting columns by phase one value at a
/// time: 55 ms of forward pooling per Inception v3 step (batch 32) before.
#[cfg(target_arch = "x86_64")]
mod three_by_two {
    use core::arch::x86_64::*;

    use super::MaxPoolShape;
    use crate::flex::memory::buffers::prefetch;

    /// Values per vector.
    const LANES: usize = 16;

    /// Planes of `[h, w]` in 3x3 windows at stride 2.
    pub(crate) struct Pool {
        h: usize,
        w: usize,
        out: [usize; 2],
    }

    /// One output row's column maxima and which of its three input rows each came from (0, 1
    /// or 2), with room for the last block's reads past the row.
    pub(crate) struct Rows {
        value: Vec<f32>,
        row: Vec<i32>,
    }

    impl Pool {
        /// For `shape` on `[h, w]` planes where it is 3x3 at stride 2, every window holds at
        /// least two of its rows and columns (whole, or in ceil mode the last cut short by
        /// one), and the CPU has AVX-512 F; `None` otherwise.
        pub(crate) fn new(shape: MaxPoolShape, [h, w]: [usize; 2]) -> Option<Self> {
            let out = shape.output_size([h, w]);
            let inside = |size: usize, out: usize| out >= 1 && 2 * (out - 1) + 2 <= size;
            let windows = inside(h, out[0]) && inside(w, out[1]);
            let fits = h * w <= i32::MAX as usize;
            let ours = shape.kernel == [3, 3] && shape.stride == [2, 2] && windows && fits;
            (ours && is_x86_feature_detected!("avx512f")).then_some(Self { h, w, out })
        }

        /// The values a scratch row holds: the last block of 16 outputs reads 32 + 2 columns
        /// from its first; past `w` they stay -inf from row 0, which never wins a window cut
        /// short (`across`).
        fn scratch_len(&self) -> usize {
            self.w.next_multiple_of(2 * LANES) + 2 * LANES
        }

        pub(crate) fn scratch(&self) -> Rows {
            let len = self.scratch_len();
            Rows {
                value: vec![f32::NEG_INFINITY; len],
                row: vec![0; len],
            }
        }

        /// The maxima of `plane`'s windows into `out` and their plane indices into `argmax`.
        pub(crate) fn pool(
            &self,
            plane: &[f32],
            out: &mut [f32],
            argmax: &mut [u32],
            rows: &mut Rows,
        ) {
            let ([oh, ow], w) = (self.out, self.w);
            assert!(plane.len() == self.h * w && out.len() == oh * ow && argmax.len() == oh * ow);
            // The reads past `w` that the SAFETY comment below counts on.
            let scratch = self.scratch_len();
            assert!(
                rows.value.len() >= scratch && rows.row.len() >= scratch,
                "scratch too short"
            );
            for oy in 0..oh {
                let (out, argmax) = (&mut out[oy * ow..][..ow], &mut argmax[oy * ow..][..ow]);
                // SAFETY: AVX-512 F was detected in `new`; rows `2·oy .. 2·oy + 3` lie in the
                // plane (every window whole), the scratch rows hold the reads past `w`, and
                // output row `oy` lies in `out` and `argmax` (lengths asserted above).
                unsafe {
                    // The next output row's two new input rows, into L1.
                    prefetch::<_MM_HINT_T0, _>(plane, (2 * oy + 3) * w..(2 * oy + 5) * w);
                    down(plane, [w, (self.h - 2 * oy).min(3)], 2 * oy, rows);
                    across(rows, [2 * oy, w], out, argmax);
                }
            }
        }
    }

    /// Rows `top .. top + height` (`height` 2 or 3) of the plane reduced column by column into
    /// `rows`. A later row has the larger plane index, so it takes a column only when greater,
    /// or as a NaN over a number: `!(v <= m)` where `m` is a number.
    ///
    /// # Safety
    /// AVX-512 F present; the rows inside `plane`, `rows` at least `w` long.
    #[target_feature(enable = "avx512f")]
    unsafe fn down(plane: &[f32], [w, height]: [usize; 2], top: usize, rows: &mut Rows) {
        // SAFETY: masked loads and stores stay inside the rows' first `w` columns.
        unsafe {
            for j in (0..w).step_by(LANES) {
                let mask: __mmask16 = if w - j >= LANES {
                    !0
                } else {
                    (1 << (w - j)) - 1
                };
                let load =
                    |row: usize| _mm512_maskz_loadu_ps(mask, plane.as_ptr().add(row * w + j));
                let (mut m, mut from) = (load(top), _mm512_setzero_si512());
                for ky in 1..height {
                    let v = load(top + ky);
                    let take = _mm512_cmp_ps_mask::<_CMP_NLE_UQ>(v, m)
                        & _mm512_cmp_ps_mask::<_CMP_ORD_Q>(m, m);
                    m = _mm512_mask_blend_ps(take, m, v);
                    from = _mm512_mask_mov_epi32(from, take, _mm512_set1_epi32(ky as i32));
                }
                _mm512_mask_storeu_ps(rows.value.as_mut_ptr().add(j), mask, m);
                _mm512_mask_storeu_epi32(rows.row.as_mut_ptr().add(j), mask, from);
            }
        }
    }

    /// The windows of one output row from its column maxima: output `ox` takes columns
    /// `2·ox`, `2·ox + 1` and `2·ox + 2` (past the row's end for a window cut short: the
    /// scratch's -inf there); a maximum's plane index is `(top + row)·w + column`, and of
    /// equal maxima the smaller index wins (flex's row-major scan keeps the first), as does a
    /// NaN over a number.
    ///
    /// # Safety
    /// AVX-512 F present; `rows` as [`Pool::scratch`] makes them, its first `2·ow + 1`
    /// columns set by [`down`].
    #[target_feature(enable = "avx512f")]
    unsafe fn across(rows: &Rows, [top, w]: [usize; 2], out: &mut [f32], argmax: &mut [u32]) {
        // SAFETY: reads reach column 2·ox + 33 < the scratch's length; masked stores stay
        // inside the `ow` outputs.
        unsafe {
            let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
            let odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
            let (value, row) = (rows.value.as_ptr(), rows.row.as_ptr());
            let width = _mm512_set1_epi32(w as i32);
            let ow = out.len();
            for ox in (0..ow).step_by(LANES) {
                let first = 2 * ox;
                // The candidates at columns `from + idx`: values and plane indices.
                let pick = |from: usize, idx: __m512i| {
                    let v = _mm512_permutex2var_ps(
                        _mm512_loadu_ps(value.add(from)),
                        idx,
                        _mm512_loadu_ps(value.add(from + LANES)),
                    );
                    let r = _mm512_permutex2var_epi32(
                        _mm512_loadu_si512(row.add(from).cast()),
                        idx,
                        _mm512_loadu_si512(row.add(from + LANES).cast()),
                    );
                    let column = _mm512_add_epi32(idx, _mm512_set1_epi32((top * w + from) as i32));
                    (v, _mm512_add_epi32(_mm512_mullo_epi32(r, width), column))
                };
                let (mut m, mut at) = pick(first, even);
                // A window cut short reads column `w` of the scratch: -inf from row 0, whose
                // index `top·w + w` loses a tie to the window's own -inf, which is in row 0 too.
                for (v, i) in [pick(first, odd), pick(first + 2, even)] {
                    let greater = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(v, m);
                    let tie =
                        _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(v, m) & _mm512_cmplt_epu32_mask(i, at);
                    let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v)
                        & _mm512_cmp_ps_mask::<_CMP_ORD_Q>(m, m);
                    let take = greater | tie | nan;
                    m = _mm512_mask_blend_ps(take, m, v);
                    at = _mm512_mask_blend_epi32(take, at, i);
                }
                let mask: __mmask16 = if ow - ox >= LANES {
                    !0
                } else {
                    (1 << (ow - ox)) - 1
                };
                _mm512_mask_storeu_ps(out.as_mut_ptr().add(ox), mask, m);
                _mm512_mask_storeu_epi32(argmax.as_mut_ptr().add(ox).cast(), mask, at);
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        #[should_panic(expected = "scratch too short")]
        fn a_short_scratch_is_refused() {
            let shape = MaxPoolShape::new([3, 3], [2, 2], false);
            let Some(pool) = Pool::new(shape, [9, 9]) else {
                panic!("scratch too short (no AVX-512 F here: the kernel is never used)");
            };
            let mut rows = pool.scratch();
            rows.value.truncate(rows.value.len() - 1);
            let [oh, ow] = pool.out;
            let (mut out, mut argmax) = (vec![0.0; oh * ow], vec![0; oh * ow]);
            pool.pool(&[0.0; 81], &mut out, &mut argmax, &mut rows);
        }
    }
}

/// The input gradient: each output's gradient added at its maximum's place.
pub(crate) fn max_pool_backward(
    grad: FlexTensor,
    argmax: &[u32],
    [h, w]: [usize; 2],
) -> FlexTensor {
    let grad = contiguous(grad);
    let [n, c, out_h, out_w] = dims4(&grad);
    let grad_data: &[f32] = grad.storage();
    let plane_out = out_h * out_w;
    let x_grad = zeroed_chunks(n * c * h * w, h * w, |plane, x_grad: &mut [f32]| {
        let at = plane * plane_out..(plane + 1) * plane_out;
        for (g, &at) in grad_data[at.clone()].iter().zip(&argmax[at]) {
            x_grad[at as usize] += g;
        }
    });
    FlexTensor::from_data(TensorData::new(x_grad, [n, c, h, w]))
}
