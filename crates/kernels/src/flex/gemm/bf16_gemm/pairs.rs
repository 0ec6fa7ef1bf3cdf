//! The `vdpbf16ps` path, for CPUs with AVX-512 BF16 but no AMX (AMD Zen 4 and 5, Intel Cooper
//! Lake): one instruction multiplies 16 pairs of bf16 by 16 pairs and adds each pair's two
//! products to one of 16 f32 sums, twice the products of an f32 FMA. `lhs` is packed once as
//! pairs along k, `rhs` per call into the AMX path's tiles, whose rows are those pairs for 16
//! columns (a tile row is one vector here).

use super::Strided;
use super::amx::{
    Avx512Bf16, ROWS, Tile, ZERO_TILE, interleave_bf16, lane_mask, load_bf16_run, pack_rhs,
    tile_bits, transpose,
};
use core::arch::x86_64::*;
use std::cell::RefCell;

/// Rows of `dst` per microkernel call; with `VECTORS` columns of 16 floats, 24 of the 32
/// vector registers hold sums, the rest the rhs vectors and the broadcast lhs pair.
pub(crate) const MR: usize = 8;
/// Vectors of 16 columns per microkernel call.
pub(crate) const VECTORS: usize = 3;
/// k-pairs per cache block: a call's rhs (`VECTORS` × 64 bytes a pair, 24 KB) stays in L1
/// while every row block of `lhs` passes over it.
pub(crate) const KC: usize = 128;

/// `lhs` (`m × k`) rounded to bf16, as `[row block][k-pair][MR rows]` of 32-bit pairs (the
/// even k in the low half), zeros past `m` and `k`: each k-pair's `MR` values that the
/// microkernel broadcasts lie side by side.
pub(crate) struct PairedLhs {
    avx512: Avx512Bf16,
    k: usize,
    pairs: usize,
    pub(crate) data: Vec<u32>,
}

impl PairedLhs {
    pub(crate) fn new(avx512: Avx512Bf16, m: usize, k: usize, lhs: Strided) -> Self {
        let pairs = k.div_ceil(2);
        // An even count of row blocks: the vector packers fill two at a time.
        let mut data = vec![0; m.div_ceil(2 * MR) * 2 * pairs * MR];
        if lhs.col_stride == 1 {
            // SAFETY: `avx512` proves AVX-512 F, BW and BF16; the caller asserted that
            // `lhs` covers m×k.
            unsafe { pack_rows(&mut data, lhs, [m, k]) };
        } else if lhs.row_stride == 1 {
            // SAFETY: as above.
            unsafe { pack_columns(&mut data, lhs, [m, k]) };
        } else {
            pack_any(&mut data, lhs, [m, k]);
        }
        Self {
            avx512,
            k,
            pairs,
            data,
        }
    }
}

/// `PairedLhs`'s layout for any strides, one value at a time.
pub(crate) fn pack_any(data: &mut [u32], lhs: Strided, [m, k]: [usize; 2]) {
    let pairs = k.div_ceil(2);
    let bits = |row: usize, col: usize| {
        if row < m && col < k {
            u32::from(tile_bits(lhs.at(row, col)))
        } else {
            0
        }
    };
    for (index, out) in data.iter_mut().enumerate() {
        let (block, pair, r) = (index / (pairs * MR), index / MR % pairs, index % MR);
        let row = block * MR + r;
        *out = bits(row, 2 * pair) | (bits(row, 2 * pair + 1) << 16);
    }
}

/// `PairedLhs`'s layout for a row-major `lhs` (`m × k`): per 16 rows and 32 columns, the
/// rows' pairs (`load_bf16_run`) transposed into 16 pairs of each of the 16 rows, the
/// first 8 rows for one row block, the last 8 for the next.
///
/// # Safety
/// AVX-512 F, BW and BF16 present; `lhs.col_stride == 1` and `lhs` covers `m × k`; `data`
/// holds `m.div_ceil(16) · 2` row blocks of `k.div_ceil(2)` pairs.
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
unsafe fn pack_rows(data: &mut [u32], lhs: Strided, [m, k]: [usize; 2]) {
    let pairs = k.div_ceil(2);
    for group in 0..m.div_ceil(2 * MR) {
        for chunk in 0..k.div_ceil(2 * ROWS) {
            let (col, count) = (chunk * 2 * ROWS, (k - chunk * 2 * ROWS).min(2 * ROWS));
            let rows: [__m512i; 16] = core::array::from_fn(|r| {
                let row = group * 2 * MR + r;
                if row < m {
                    // SAFETY: elements row·row_stride + col .. + count lie inside
                    // `lhs.data` (caller's contract, `col + count <= k`).
                    unsafe {
                        load_bf16_run(lhs.data.as_ptr().add(row * lhs.row_stride + col), count)
                    }
                } else {
                    _mm512_setzero_si512()
                }
            });
            let first = chunk * ROWS;
            for (pair, values) in (first..pairs).zip(transpose(rows)) {
                store_halves(
                    data,
                    [group * 2, group * 2 + 1].map(|b| (b * pairs + pair) * MR),
                    values,
                );
            }
        }
    }
}

/// `PairedLhs`'s layout for a column-major `lhs` (`lhs.row_stride == 1`): per 16 rows and
/// pair of columns, the two columns' 16 floats interleaved into 16 pairs.
///
/// # Safety
/// As `pack_rows`, with `lhs.row_stride == 1`.
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
unsafe fn pack_columns(data: &mut [u32], lhs: Strided, [m, k]: [usize; 2]) {
    let pairs = k.div_ceil(2);
    for group in 0..m.div_ceil(2 * MR) {
        let row = group * 2 * MR;
        let mask = lane_mask(m - row);
        let load = |col: usize| {
            if col < k {
                // SAFETY: the unmasked elements row + col·col_stride .. + min(16, m - row)
                // lie inside `lhs.data` (caller's contract).
                unsafe {
                    _mm512_maskz_loadu_ps(mask, lhs.data.as_ptr().add(row + col * lhs.col_stride))
                }
            } else {
                _mm512_setzero_ps()
            }
        };
        for pair in 0..pairs {
            let values = interleave_bf16(load(2 * pair), load(2 * pair + 1));
            store_halves(
                data,
                [group * 2, group * 2 + 1].map(|b| (b * pairs + pair) * MR),
                values,
            );
        }
    }
}

/// The low 8 lanes of `values` to `data[at[0]..]`, the high 8 to `data[at[1]..]`.
#[target_feature(enable = "avx512f")]
fn store_halves(data: &mut [u32], at: [usize; 2], values: __m512i) {
    let halves = [
        _mm512_castsi512_si256(values),
        _mm512_extracti64x4_epi64::<1>(values),
    ];
    for (at, half) in at.into_iter().zip(halves) {
        let out: &mut [u32; MR] = (&mut data[at..at + MR]).try_into().unwrap();
        // SAFETY: `out` is 32 writable bytes.
        unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast(), half) };
    }
}

thread_local! {
    /// The packed `rhs`, kept between calls so that the steady state allocates nothing.
    static PACKED_RHS: RefCell<Vec<Tile>> = const { RefCell::new(Vec::new()) };
}

/// `dst = or += lhs · rhs` for `m, n, k > 0`, one panel of `VECTORS` × 16 columns at a
/// time: pack the panel (`k` × 48 bf16 stays in L2), then per block of `KC` k-pairs every
/// row block of `lhs` over it.
pub(crate) fn multiply(dst: &mut [f32], lhs: &PairedLhs, rhs: Strided, n: usize, accumulate: bool) {
    let k_blocks = lhs.k.div_ceil(2 * ROWS);
    PACKED_RHS.with_borrow_mut(|packed| {
        if packed.len() < VECTORS * k_blocks {
            packed.resize(VECTORS * k_blocks, ZERO_TILE);
        }
        for col in (0..n).step_by(VECTORS * ROWS) {
            let width = (n - col).min(VECTORS * ROWS);
            let panel = Strided {
                data: &rhs.data[col * rhs.col_stride..],
                ..rhs
            };
            let packed = &mut packed[..width.div_ceil(ROWS) * k_blocks];
            pack_rhs(lhs.avx512, packed, panel, [lhs.k, width], k_blocks);
            // SAFETY: `lhs.avx512` proves AVX-512 F and BF16; `packed` holds one stream of
            // `k_blocks · 16 >= lhs.pairs` vectors per 16 columns of the panel.
            unsafe { multiply_panel(dst, lhs, packed, [col, n], accumulate) };
        }
    });
}

/// Columns `col ..` of `dst` (`m × n`), as many as `packed` has streams of 16.
///
/// # Safety
/// AVX-512 F and BF16 present; `packed` is `streams <= VECTORS` streams of
/// `packed.len() / streams >= lhs.pairs` rhs vectors, `col + 16 · (streams - 1) < n`;
/// `dst.len()` is a multiple of `n`.
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn multiply_panel(
    dst: &mut [f32],
    lhs: &PairedLhs,
    packed: &[Tile],
    [col, n]: [usize; 2],
    accumulate: bool,
) {
    let m = dst.len() / n;
    let streams = (n - col).min(VECTORS * ROWS).div_ceil(ROWS);
    let stream = packed.len() / streams * ROWS;
    let vectors: *const __m512bh = packed.as_ptr().cast();
    let masks = core::array::from_fn(|j| lane_mask(n.saturating_sub(col + j * ROWS)));
    // Blocks of equal depth: a short last block paid the sums' loads and stores for few
    // products (k = 288: 128 + 16 pairs).
    let depth = lhs.pairs.div_ceil(lhs.pairs.div_ceil(KC));
    for first in (0..lhs.pairs).step_by(depth) {
        let blocks = lhs.data.chunks_exact(lhs.pairs * MR).take(m.div_ceil(MR));
        for (block, a) in blocks.enumerate() {
            let row = block * MR;
            let call = Call {
                a: a[first * MR..].as_ptr(),
                // SAFETY: `first < pairs <= stream`.
                b: unsafe { vectors.add(first) },
                stream,
                count: (lhs.pairs - first).min(depth),
                c: dst[row * n + col..].as_mut_ptr(),
                c_stride: n,
                rows: (m - row).min(MR),
                masks,
                load: accumulate || first > 0,
            };
            // SAFETY: the caller's contract and the slicing above.
            unsafe {
                match streams {
                    1 => kernel::<1>(call),
                    2 => kernel::<2>(call),
                    _ => kernel::<VECTORS>(call),
                }
            }
        }
    }
}

/// One microkernel call: `c` (`rows × V·16` floats, `c_stride` apart, the columns past
/// each mask left alone) = or += `count` k-pairs of `a` (`MR` pairs each) times `b`
/// (`V` streams of vectors, `stream` vectors apart).
#[derive(Clone, Copy)]
struct Call {
    a: *const u32,
    b: *const __m512bh,
    stream: usize,
    count: usize,
    c: *mut f32,
    c_stride: usize,
    rows: usize,
    masks: [__mmask16; VECTORS],
    load: bool,
}

/// # Safety
/// AVX-512 F and BF16 present; `call`'s pointers cover what it describes.
#[target_feature(enable = "avx512f,avx512bf16")]
#[inline]
unsafe fn kernel<const V: usize>(call: Call) {
    let mut sums = [[_mm512_setzero_ps(); V]; MR];
    for (r, row) in sums.iter_mut().enumerate() {
        if call.load && r < call.rows {
            for (j, sum) in row.iter_mut().enumerate() {
                // SAFETY: row r, columns 16j + mask inside `c` (contract).
                *sum = unsafe {
                    _mm512_maskz_loadu_ps(call.masks[j], call.c.add(r * call.c_stride + 16 * j))
                };
            }
        }
    }
    for p in 0..call.count {
        // SAFETY: pair p < count of each stream (contract), 64-byte aligned as tile rows.
        let b: [__m512bh; V] =
            core::array::from_fn(|j| unsafe { *call.b.add(j * call.stream + p) });
        for (r, row) in sums.iter_mut().enumerate() {
            // SAFETY: pair p < count of `a` (contract).
            let pair = unsafe { *call.a.add(p * MR + r) };
            // SAFETY: both are 64 bytes of plain bits.
            let a: __m512bh = unsafe { core::mem::transmute(_mm512_set1_epi32(pair as i32)) };
            for (sum, b) in row.iter_mut().zip(b) {
                *sum = _mm512_dpbf16_ps(*sum, a, b);
            }
        }
    }
    for (r, row) in sums.iter().enumerate() {
        if r < call.rows {
            for (j, sum) in row.iter().enumerate() {
                // SAFETY: as for the loads.
                unsafe {
                    _mm512_mask_storeu_ps(
                        call.c.add(r * call.c_stride + 16 * j),
                        call.masks[j],
                        *sum,
                    )
                };
            }
        }
    }
}
