//! Matrix transposition for the weight gradient's operands ([`crate::flex::conv::weight_sum`]) and the
//! Winograd kernels' planes ([`crate::flex::conv::winograd_7x1`]): 16×16
//! blocks through AVX-512 registers where the CPU has it (loads and stores of whole rows, the
//! bf16 kernels' register transpose in between: f32 values move as 32-bit lanes), the edges
//! and other CPUs one value at a time in tiles that stay in L1. The scalar tiles alone took
//! 2% of Inception v3's training step.

use crate::flex::gemm::bf16_gemm::Strided;

/// Rows and columns of a block.
const BLOCK: usize = 16;

/// `dst[c][r] = src[r][c]` for a `rows × cols` matrix with unit column stride; `dst` is
/// `cols × rows`, row-major.
pub(crate) fn transpose(dst: &mut [f32], src: &Strided, [rows, cols]: [usize; 2]) {
    if rows == 0 || cols == 0 {
        return;
    }
    assert!(src.col_stride == 1 && src.data.len() >= (rows - 1) * src.row_stride + cols);
    assert!(
        dst.len() >= rows * cols,
        "the transpose's destination is too short"
    );
    let blocked = [rows / BLOCK * BLOCK, cols / BLOCK * BLOCK];
    #[cfg(target_arch = "x86_64")]
    if blocked != [0, 0] && std::arch::is_x86_feature_detected!("avx512f") {
        for r in (0..blocked[0]).step_by(BLOCK) {
            for c in (0..blocked[1]).step_by(BLOCK) {
                // SAFETY: AVX-512 F present; rows `r..r + 16` and columns `c..c + 16` lie
                // inside both matrices (asserted above).
                unsafe { avx512::block(dst, src, rows, [r, c]) };
            }
        }
        // The right edge of the blocked rows, then every row below them.
        scalar(dst, src, rows, [0..blocked[0], blocked[1]..cols]);
        scalar(dst, src, rows, [blocked[0]..rows, 0..cols]);
        return;
    }
    scalar(dst, src, rows, [0..rows, 0..cols]);
}

/// Each `rows × cols` matrix of `src` (one after another) transposed into `dst` (as long).
pub(crate) fn transpose_each(dst: &mut [f32], src: &[f32], [rows, cols]: [usize; 2]) {
    assert_eq!(
        dst.len(),
        src.len(),
        "a transpose into a buffer of another size"
    );
    let size = (rows * cols).max(1);
    for (dst, matrix) in dst.chunks_exact_mut(size).zip(src.chunks_exact(size)) {
        let matrix = Strided::row_major(matrix, cols);
        transpose(dst, &matrix, [rows, cols]);
    }
}

/// [`transpose`] of the values in `ranges` (rows, columns), in 16×16 tiles.
fn scalar(
    dst: &mut [f32],
    src: &Strided,
    rows: usize,
    [row_range, col_range]: [std::ops::Range<usize>; 2],
) {
    for r0 in row_range.clone().step_by(BLOCK) {
        for c0 in col_range.clone().step_by(BLOCK) {
            for r in r0..(r0 + BLOCK).min(row_range.end) {
                let row = &src.data[r * src.row_stride..];
                for c in c0..(c0 + BLOCK).min(col_range.end) {
                    dst[c * rows + r] = row[c];
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use core::arch::x86_64::*;

    use super::{BLOCK, Strided};
    use crate::flex::gemm::bf16_gemm::amx;

    /// The 16×16 block at `[r, c]` of `src` into `dst` (`rows` its row length), through
    /// registers.
    ///
    /// # Safety
    /// AVX-512 F present; rows `r..r + 16` and columns `c..c + 16` inside `src`, and `dst`
    /// holding `cols × rows` values.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn block(dst: &mut [f32], src: &Strided, rows: usize, [r, c]: [usize; 2]) {
        // SAFETY: the caller's contract bounds every load and store.
        unsafe {
            let at = src.data.as_ptr().add(r * src.row_stride + c);
            let x: [__m512i; BLOCK] =
                core::array::from_fn(|i| _mm512_loadu_si512(at.add(i * src.row_stride).cast()));
            let to = dst.as_mut_ptr().add(c * rows + r);
            for (i, v) in amx::transpose(x).into_iter().enumerate() {
                _mm512_storeu_si512(to.add(i * rows).cast(), v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every value lands at its transposed place, for shapes with whole blocks, edges on
    /// either side and none, and rows further apart than they are long.
    #[test]
    fn transposes_every_value() {
        for [rows, cols] in [
            [16, 16],
            [48, 32],
            [35, 17],
            [5, 40],
            [40, 5],
            [1, 1],
            [17, 33],
        ] {
            let row_stride = cols + 3;
            let src: Vec<f32> = (0..rows * row_stride).map(|i| i as f32).collect();
            let mut dst = vec![f32::NAN; rows * cols];
            let matrix = Strided::row_major(&src, row_stride);
            transpose(&mut dst, &matrix, [rows, cols]);
            for (r, c) in (0..rows).flat_map(|r| (0..cols).map(move |c| (r, c))) {
                assert_eq!(
                    dst[c * rows + r],
                    src[r * row_stride + c],
                    "{rows}x{cols} at {r},{c}"
                );
            }
        }
    }
}
