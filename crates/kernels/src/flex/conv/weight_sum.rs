//! One thread's running sum of a convolution's weight gradient: `Σ g · windowsᵀ` over its
//! images and chunks of output places, `g` the output gradient's `[out × places]` rows and
//! `windows` the `[taps × places]` im2col matrix.
//!
//! Both operands lie along the places, the product's depth. gemm packs its left operand
//! down the columns, and gathers it one value at a time from as many rows when they are not
//! contiguous: on Inception v3's 1x1 convolutions of 35x35 maps that packing took as long as
//! the products (55–97 G multiply-adds/s against 150–190 for the same shapes forward). In f32
//! one operand is therefore transposed here (a copy the size of its chunk), so that gemm packs
//! it as it lies and reads the other in place, one value per broadcast: `g`, with the sum kept
//! transposed (`[taps][out]`), or the windows where the outputs would leave gemm a last block
//! of 16 rows or fewer (its narrowest kernel) and the taps would not. Chunks of 128 places or
//! fewer (8x8 maps) stay with gemm's own packing: their rows are short enough to gather from
//! L1, and the transposed sum cost 5–10% there. bf16 products go to [`crate::flex::gemm::bf16_gemm`],
//! which packs its operands itself.

use crate::flex::gemm::arithmetic::Arithmetic;
use crate::flex::gemm::bf16_gemm::{PackedLhs, Strided, multiply_bf16};
use crate::flex::gemm::gemm_f32::{View, gemm_f32};
use crate::flex::gemm::transpose::transpose;

/// Rows of gemm's widest f32 kernel on AVX-512 (`x4x6`: four vectors of 16).
const GEMM_ROWS: usize = 64;

/// A weight gradient being summed, `out × taps`.
pub(crate) struct WeightSum {
    out: usize,
    taps: usize,
    arithmetic: Arithmetic,
    /// f32: how the products are laid out, and so how `values` lies (bf16: `Packed`).
    rows: Rows,
    /// `[taps][out]` for [`Rows::Out`], else `[out][taps]`.
    values: Vec<f32>,
    /// f32 only: the latest chunk's transposed operand.
    transposed: Vec<f32>,
}

/// How the f32 products are laid out for gemm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rows {
    /// The outputs down gemm's kernel rows: `g` transposed, the sum `[taps][out]`.
    Out,
    /// The taps down gemm's kernel rows: the windows transposed, the sum `[out][taps]`.
    Taps,
    /// Both operands as they lie, gemm packing them (gathering one of them): the sum
    /// `[out][taps]`.
    Packed,
}

/// Chunks of at most this many places stay with [`Rows::Packed`].
const SHORT_CHUNK: usize = 128;

impl Rows {
    /// The layout for sums of `out × taps` over chunks of up to `places` places.
    fn choose(out: usize, taps: usize, places: usize) -> Self {
        let last_block = |m: usize| match m % GEMM_ROWS {
            0 => GEMM_ROWS,
            r => r,
        };
        if places <= SHORT_CHUNK {
            Rows::Packed
        } else if last_block(out) <= 16 && last_block(taps) > last_block(out) {
            Rows::Taps
        } else {
            Rows::Out
        }
    }
}

impl WeightSum {
    /// Zeros, for chunks of up to `places` places.
    pub(crate) fn new(out: usize, taps: usize, places: usize, arithmetic: Arithmetic) -> Self {
        let rows = match arithmetic {
            Arithmetic::F32 => Rows::choose(out, taps, places),
            Arithmetic::Bf16 => Rows::Packed,
        };
        Self {
            out,
            taps,
            arithmetic,
            rows,
            values: vec![0.0; out * taps],
            transposed: Vec::new(),
        }
    }

    /// Adds `g · windowsᵀ` for a chunk of `places` output places: `g` `[out × places]` and
    /// `windows` `[taps × places]`, both with unit column stride.
    pub(crate) fn add(&mut self, g: Strided, windows: Strided, places: usize) {
        let (out, taps) = (self.out, self.taps);
        let covers = |m: &Strided, rows: usize| {
            m.col_stride == 1 && (rows == 0 || m.data.len() >= m.row_stride * (rows - 1) + places)
        };
        assert!(
            covers(&g, out) && covers(&windows, taps),
            "a chunk past its matrix"
        );
        match (self.arithmetic, self.rows) {
            (Arithmetic::F32, Rows::Out) => {
                let dims = [out, taps, places];
                add_product_f32(&mut self.values, &g, &windows, dims, &mut self.transposed)
            }
            (Arithmetic::F32, Rows::Taps) => {
                let dims = [taps, out, places];
                add_product_f32(&mut self.values, &windows, &g, dims, &mut self.transposed)
            }
            (Arithmetic::F32, Rows::Packed) => {
                add_product_packed_f32(&mut self.values, &g, &windows, [out, taps, places])
            }
            (Arithmetic::Bf16, _) => {
                let lhs = PackedLhs::new(out, places, g);
                let rhs = Strided::transposed(windows.data, windows.row_stride);
                multiply_bf16(&mut self.values, &lhs, rhs, taps, true);
            }
        }
    }

    /// The sum as `[out][taps]`, for an adder of its own: bf16 only (f32 may keep it
    /// transposed).
    pub(crate) fn row_major_mut(&mut self) -> &mut [f32] {
        assert_eq!(
            self.arithmetic,
            Arithmetic::Bf16,
            "an f32 sum may be transposed"
        );
        &mut self.values
    }

    /// This sum plus another thread's.
    pub(crate) fn merge(mut self, other: Self) -> Self {
        self.values
            .iter_mut()
            .zip(&other.values)
            .for_each(|(a, b)| *a += b);
        self
    }

    /// The gradient, `[out][taps]`.
    pub(crate) fn into_row_major(self) -> Vec<f32> {
        if self.rows != Rows::Out {
            return self.values;
        }
        let mut values = vec![0.0; self.values.len()];
        let sum = Strided::row_major(&self.values, self.out);
        transpose(&mut values, &sum, [self.taps, self.out]);
        values
    }
}

/// `dst += a · bᵀ` for `dst` `[m × n]` column-major (element (i, j) at `j·m + i`), `a` `[m ×
/// k]` and `b` `[n × k]` with unit column stride, by gemm on the calling thread: `a` is
/// transposed into `scratch` first, so that gemm packs it as it lies, and `b` read in place.
/// The Winograd kernels' weight gradients add their points' products through it too.
pub(crate) fn add_product_f32(
    dst: &mut [f32],
    a: &Strided,
    b: &Strided,
    [m, n, k]: [usize; 3],
    scratch: &mut Vec<f32>,
) {
    assert_eq!(dst.len(), m * n, "the sum is not {m} × {n}");
    assert!(
        b.col_stride == 1 && (n == 0 || b.data.len() >= (n - 1) * b.row_stride + k),
        "b is not {n} × {k} with unit column stride"
    );
    scratch.resize(k * m, 0.0);
    transpose(scratch, a, [m, k]);
    // SAFETY: `dst` is m × n column-major, `scratch` m × k column-major (element (i, p) at
    // p·m + i), `b` read as k × n down its rows (element (p, j) at j·row_stride + p): inside
    // `dst`'s asserted length, `scratch`'s, and the rows asserted for `b`.
    unsafe {
        gemm_f32(
            [m, n, k],
            View::columns(dst.as_mut_ptr(), m),
            true,
            View::columns(scratch.as_ptr(), m),
            View::columns(b.data.as_ptr(), b.row_stride),
        );
    }
}

/// `dst += g · windowsᵀ` for `dst` `[out × taps]` row-major, `g` `[out × k]` and `windows`
/// `[taps × k]` with unit column stride, by gemm on the calling thread, which packs both.
fn add_product_packed_f32(
    dst: &mut [f32],
    g: &Strided,
    windows: &Strided,
    [out, taps, k]: [usize; 3],
) {
    assert_eq!(dst.len(), out * taps, "the sum is not {out} × {taps}");
    // SAFETY: `dst` is out × taps row-major, `g` read along its rows, the windows as k × taps
    // down their rows (element (p, t) at t·row_stride + p): inside `dst`'s asserted length and
    // the rows the caller checked both operands cover.
    unsafe {
        gemm_f32(
            [out, taps, k],
            View::rows(dst.as_mut_ptr(), taps),
            true,
            View::rows(g.data.as_ptr(), g.row_stride),
            View::columns(windows.data.as_ptr(), windows.row_stride),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sums of a few chunks, on two threads' sums merged, against the products computed
    /// one value at a time, in f32 (to rounding) and bf16 (operands rounded, as the bf16
    /// products round them).
    #[test]
    fn sums_chunks_as_a_plain_product_would() {
        let chunks = [130, 1, 200];
        let value = |i: usize| ((i * 7919) % 1009) as f32 / 1009.0 - 0.5;
        // Every layout in f32: 20 outputs (the sum transposed), 80 over 64 taps (the windows
        // transposed), short chunks (gemm's packing).
        let cases = [
            (20, 37, 200, Rows::Out),
            (80, 64, 200, Rows::Taps),
            (20, 37, SHORT_CHUNK, Rows::Packed),
        ];
        for (out, taps, longest, layout) in cases {
            assert_eq!(Rows::choose(out, taps, longest), layout);
        }
        let cases = cases.map(|(out, taps, longest, _)| (out, taps, longest, Arithmetic::F32));
        for (out, taps, longest, arithmetic) in
            cases.into_iter().chain([(20, 37, 200, Arithmetic::Bf16)])
        {
            let round = |v: f32| match arithmetic {
                Arithmetic::F32 => v,
                Arithmetic::Bf16 => half::bf16::from_f32(v).to_f32(),
            };
            let mut sums = [(); 2].map(|_| WeightSum::new(out, taps, longest, arithmetic));
            let mut want = vec![0f64; out * taps];
            for (n, &places) in chunks.iter().enumerate() {
                let places = places.min(longest);
                // Rows `row_stride` apart, as a chunk of a wider map.
                let row_stride = places + 5;
                let g: Vec<f32> = (0..out * row_stride).map(|i| value(i + n)).collect();
                let windows: Vec<f32> = (0..taps * row_stride).map(|i| value(3 * i + n)).collect();
                for (o, t) in (0..out).flat_map(|o| (0..taps).map(move |t| (o, t))) {
                    want[o * taps + t] += (0..places)
                        .map(|p| {
                            let (a, b) = (g[o * row_stride + p], windows[t * row_stride + p]);
                            round(a) as f64 * round(b) as f64
                        })
                        .sum::<f64>();
                }
                let g = Strided::row_major(&g, row_stride);
                let windows = Strided::row_major(&windows, row_stride);
                sums[n % 2].add(g, windows, places);
            }
            let [a, b] = sums;
            let got = a.merge(b).into_row_major();
            let worst = got
                .iter()
                .zip(&want)
                .map(|(&g, &w)| (g as f64 - w).abs())
                .fold(0.0, f64::max);
            assert!(worst < 1e-4, "{out}x{taps} {arithmetic:?}: off by {worst}");
        }
    }
}
