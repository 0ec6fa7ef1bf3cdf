//! bf16 matrix products with f32 accumulation: Intel AMX tiles (`tdpbf16ps`) where the CPU and
//! the OS allow them, else AVX-512 BF16 (`vdpbf16ps`, on pairs of bf16) where the CPU has it,
//! and f32 gemm on bf16-rounded operands elsewhere.
//!
//! All paths compute the same thing up to the order of the f32 sums: each operand is rounded to
//! bf16 (round to nearest even), the product of two bf16 values is exact in f32, and the products
//! are summed in f32. One difference remains: AMX and `vdpbf16ps` treat subnormal bf16 inputs as
//! zero and flush subnormal results, the fallback does not.
//!
//! Set `TOWERS_NO_AMX=1` (any value but empty or `0`) to turn the tiles off, and
//! `TOWERS_NO_AVX512BF16=1` to turn `vdpbf16ps` off (both for the fallback everywhere); they are
//! read once per process.

use std::cell::RefCell;
use std::sync::OnceLock;

use crate::precision::Bf16Kernel;

use crate::flex::gemm::gemm_f32::{View, gemm_f32};

#[cfg(target_arch = "x86_64")]
pub(crate) mod amx;
#[cfg(target_arch = "x86_64")]
mod pairs;
#[cfg(test)]
mod tests;

/// A matrix of f32 read through strides: element (row, col) is `data[row * row_stride + col * col_stride]`.
#[derive(Clone, Copy)]
pub(crate) struct Strided<'a> {
    pub data: &'a [f32],
    pub row_stride: usize,
    pub col_stride: usize,
}

impl<'a> Strided<'a> {
    /// A row-major matrix with rows of `columns` values (a longer `data` holds more rows, or
    /// rows of a wider matrix).
    pub(crate) fn row_major(data: &'a [f32], columns: usize) -> Self {
        Self {
            data,
            row_stride: columns,
            col_stride: 1,
        }
    }

    /// The transpose of a row-major matrix with rows of `columns` values.
    pub(crate) fn transposed(data: &'a [f32], columns: usize) -> Self {
        Self {
            data,
            row_stride: 1,
            col_stride: columns,
        }
    }

    /// Panics unless every element of a `rows × cols` matrix lies inside `data`: the packers read
    /// without bounds checks once this has passed.
    fn assert_covers(&self, rows: usize, cols: usize) {
        if rows == 0 || cols == 0 {
            return;
        }
        let last = (rows - 1)
            .checked_mul(self.row_stride)
            .zip((cols - 1).checked_mul(self.col_stride))
            .and_then(|(row, col)| row.checked_add(col));
        assert!(
            last.is_some_and(|last| last < self.data.len()),
            "a {rows}×{cols} matrix with strides ({}, {}) reaches past {} elements",
            self.row_stride,
            self.col_stride,
            self.data.len(),
        );
    }

    fn at(&self, row: usize, col: usize) -> f32 {
        self.data[row * self.row_stride + col * self.col_stride]
    }
}

/// `lhs` (`m × k`) rounded to bf16 and laid out for this machine's kernel once, for products with many right-hand sides (a convolution's kernel times every image's windows).
pub(crate) struct PackedLhs {
    m: usize,
    k: usize,
    layout: LhsLayout,
}

enum LhsLayout {
    /// Rounded to bf16 but stored as f32, row-major `m × k`: the fallback's operand.
    Rows(Vec<f32>),
    /// bf16 in AMX tiles.
    #[cfg(target_arch = "x86_64")]
    Tiles(amx::TiledLhs),
    /// bf16 pairs along k, for `vdpbf16ps`.
    #[cfg(target_arch = "x86_64")]
    Pairs(pairs::PairedLhs),
}

impl PackedLhs {
    pub(crate) fn new(m: usize, k: usize, lhs: Strided) -> Self {
        Self::for_kernel(m, k, lhs, kernel())
    }

    /// Packs for `kernel` (which the CPU must have); the layout picks the kernel of every later
    /// `multiply_bf16`.
    fn for_kernel(m: usize, k: usize, lhs: Strided, kernel: Bf16Kernel) -> Self {
        lhs.assert_covers(m, k);
        let layout = match kernel {
            Bf16Kernel::F32Gemm => {
                let rows = (0..m)
                    .flat_map(|row| (0..k).map(move |col| round_to_bf16(lhs.at(row, col))))
                    .collect();
                LhsLayout::Rows(rows)
            }
            #[cfg(target_arch = "x86_64")]
            Bf16Kernel::AmxTiles => {
                let amx = amx::Amx::get().expect("AMX tiles need AMX");
                LhsLayout::Tiles(amx::TiledLhs::new(amx, m, k, lhs))
            }
            #[cfg(target_arch = "x86_64")]
            Bf16Kernel::Avx512Bf16 => {
                let avx512 = amx::Avx512Bf16::get().expect("vdpbf16ps needs AVX-512 BF16");
                LhsLayout::Pairs(pairs::PairedLhs::new(avx512, m, k, lhs))
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => panic!("{kernel} exists only on x86_64"),
        };
        Self { m, k, layout }
    }
}

/// `dst (m × n, row-major, row stride n) = or += lhs · rhs`, with `rhs` (`k × n`) rounded to bf16 (round to nearest even), the products summed in f32. On the calling thread.
pub(crate) fn multiply_bf16(
    dst: &mut [f32],
    lhs: &PackedLhs,
    rhs: Strided,
    n: usize,
    accumulate: bool,
) {
    let (m, k) = (lhs.m, lhs.k);
    assert_eq!(
        dst.len(),
        m * n,
        "dst holds {} elements, not {m}×{n}",
        dst.len()
    );
    rhs.assert_covers(k, n);
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            dst.fill(0.0);
        }
        return;
    }
    match &lhs.layout {
        LhsLayout::Rows(rows) => multiply_rows(dst, rows, rhs, [m, k, n], accumulate),
        #[cfg(target_arch = "x86_64")]
        LhsLayout::Tiles(tiles) => amx::multiply(dst, tiles, rhs, n, accumulate),
        #[cfg(target_arch = "x86_64")]
        LhsLayout::Pairs(pairs) => pairs::multiply(dst, pairs, rhs, n, accumulate),
    }
}

/// What runs `multiply_bf16` here: the fastest kernel that the CPU (and for AMX the OS) allows
/// and the environment has not turned off. Chosen once per process.
pub(crate) fn kernel() -> Bf16Kernel {
    static KERNEL: OnceLock<Bf16Kernel> = OnceLock::new();
    *KERNEL.get_or_init(|| {
        if !turned_off("TOWERS_NO_AMX") && amx_supported() {
            Bf16Kernel::AmxTiles
        } else if !turned_off("TOWERS_NO_AVX512BF16") && avx512_bf16_supported() {
            Bf16Kernel::Avx512Bf16
        } else {
            Bf16Kernel::F32Gemm
        }
    })
}

/// Whether `multiply_bf16` runs on AMX tiles here (which the direct convolution needs).
pub(crate) fn amx_available() -> bool {
    kernel() == Bf16Kernel::AmxTiles
}

/// Whether the environment variable `name` is set to anything but empty or `0`.
pub(crate) fn turned_off(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "0")
}

/// Whether the CPU has AMX-BF16 and the OS lets this process use the tiles, whatever
/// `TOWERS_NO_AMX` says.
fn amx_supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    return amx::supported();
    #[cfg(not(target_arch = "x86_64"))]
    return false;
}

/// Whether the CPU has AVX-512 F, BW and BF16, whatever `TOWERS_NO_AVX512BF16` says.
fn avx512_bf16_supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    return amx::Avx512Bf16::get().is_some();
    #[cfg(not(target_arch = "x86_64"))]
    return false;
}

/// The bf16 nearest to `x` (ties to even) as its bit pattern; NaN stays a (quiet) NaN of the
/// same sign, values past the largest bf16 round to infinity.
fn bf16_bits(x: f32) -> u16 {
    let bits = x.to_bits();
    // Without a branch, so that loops of it vectorise (the sum wraps only for NaNs).
    let rounded = bits.wrapping_add(0x7fff + ((bits >> 16) & 1)) >> 16;
    let quiet_nan = (bits >> 16) | 0x40;
    (if x.is_nan() { quiet_nan } else { rounded }) as u16
}

/// `x` rounded to bf16, as the f32 of the same value.
pub(crate) fn round_to_bf16(x: f32) -> f32 {
    f32::from_bits(u32::from(bf16_bits(x)) << 16)
}

thread_local! {
    /// The fallback's rounded copy of `rhs`, kept between calls so that the steady state
    /// allocates nothing.
    static ROUNDED_RHS: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// The fallback: `rhs` rounded into a compact copy, then f32 gemm on the calling thread. The
/// products of bf16 values are exact in f32, so only the summation order differs from AMX.
fn multiply_rows(
    dst: &mut [f32],
    lhs: &[f32],
    rhs: Strided,
    [m, k, n]: [usize; 3],
    accumulate: bool,
) {
    ROUNDED_RHS.with_borrow_mut(|copy| {
        let [rhs_rs, rhs_cs] = round_compact(copy, rhs, k, n);
        // SAFETY: `dst` is m×n row-major (column stride 1, row stride n), `lhs` m×k row-major,
        // `copy` k×n with the strides `round_compact` returned, and all three lengths match
        // (asserted by the caller for `dst`, built that way for the others).
        unsafe {
            let rhs = View {
                ptr: copy.as_ptr(),
                row_stride: rhs_rs,
                col_stride: rhs_cs,
            };
            let lhs = View::rows(lhs.as_ptr(), k);
            gemm_f32(
                [m, n, k],
                View::rows(dst.as_mut_ptr(), n),
                accumulate,
                lhs,
                rhs,
            );
        }
    });
}

/// Writes `rhs` (`k × n`) rounded to bf16 into `copy`, contiguously, keeping its orientation so
/// that both the read and the write run through memory in order; returns the copy's
/// `[row_stride, col_stride]`.
fn round_compact(copy: &mut Vec<f32>, rhs: Strided, k: usize, n: usize) -> [usize; 2] {
    let transposed = rhs.row_stride == 1 && rhs.col_stride != 1;
    let (lines, length, line_stride, step) = if transposed {
        (n, k, rhs.col_stride, rhs.row_stride)
    } else {
        (k, n, rhs.row_stride, rhs.col_stride)
    };
    copy.clear();
    for line in 0..lines {
        let start = line * line_stride;
        if step == 1 {
            let line = &rhs.data[start..start + length];
            copy.extend(line.iter().map(|&x| round_to_bf16(x)));
        } else {
            copy.extend((0..length).map(|i| round_to_bf16(rhs.data[start + i * step])));
        }
    }
    if transposed { [1, k] } else { [n, 1] }
}
