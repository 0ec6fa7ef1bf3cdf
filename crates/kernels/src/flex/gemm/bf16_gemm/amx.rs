//! The AMX path: tile layout, packing (AVX-512 where the strides allow), and the kernel. Its
//! `pub(crate)` items (tiles, the tile session, the bf16 conversions) serve `bf16_conv` too,
//! and its rhs packing (`pack_rhs`, which needs only AVX-512 BF16) the `vdpbf16ps` path.

use super::{Strided, bf16_bits};
use crate::flex::memory::buffers::prefetch;
use core::arch::asm;
use core::arch::x86_64::*;
use rayon::prelude::*;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ops::Range;
use std::sync::OnceLock;

/// Tile rows, and f32 columns of a C tile (or column pairs of a B tile).
pub(crate) const ROWS: usize = 16;
/// bf16 values in a tile row: the `k` depth of one `tdpbf16ps`.
pub(crate) const DEPTH: usize = 32;

/// One tile of bf16: 16 rows of 64 bytes, aligned so that no tile row straddles cache lines.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(crate) struct Tile(pub(crate) [u16; ROWS * DEPTH]);

pub(crate) const ZERO_TILE: Tile = Tile([0; ROWS * DEPTH]);

/// Side of the block of `dst` that one `compute_block` produces: 2 × 2 tiles.
pub(crate) const BLOCK: usize = 2 * ROWS;

/// A 32×32 block of f32, row-major: the results of a block that hangs over the edge of `dst`.
#[repr(C, align(64))]
pub(crate) struct Block(pub(crate) [f32; BLOCK * BLOCK]);

/// Proof that `supported()` said yes, which the tile instructions and the AVX-512 packers
/// need: only `Amx::get` makes one.
#[derive(Clone, Copy)]
pub(crate) struct Amx(());

impl Amx {
    pub(crate) fn get() -> Option<Self> {
        supported().then_some(Self(()))
    }

    /// AMX comes with AVX-512 F, BW and BF16 (`cpu_has_amx` checks them).
    pub(crate) fn avx512(self) -> Avx512Bf16 {
        Avx512Bf16(())
    }
}

/// Proof that the CPU has AVX-512 F, BW and BF16, which the packers and `vdpbf16ps` need:
/// only `Avx512Bf16::get` and `Amx::avx512` make one.
#[derive(Clone, Copy)]
pub(crate) struct Avx512Bf16(());

impl Avx512Bf16 {
    pub(crate) fn get() -> Option<Self> {
        avx512_bf16().then_some(Self(()))
    }
}

fn avx512_bf16() -> bool {
    is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512bf16")
}

/// Whether the CPU has AMX-BF16 and AVX-512 BF16 (for the packers) and Linux granted this
/// process the tile data state. Asked once: the permission request is a system call.
pub(crate) fn supported() -> bool {
    static SUPPORTED: OnceLock<bool> = OnceLock::new();
    *SUPPORTED.get_or_init(|| cpu_has_amx() && os_saves_tiles() && request_tile_permission())
}

/// cpuid leaf 7 subleaf 0, EDX bit 22 (AMX-BF16) and bit 24 (AMX-TILE).
fn cpu_has_amx() -> bool {
    let max_leaf = __cpuid(0).eax;
    if !avx512_bf16() || max_leaf < 7 {
        return false;
    }
    let edx = __cpuid_count(7, 0).edx;
    edx & (1 << 22) != 0 && edx & (1 << 24) != 0
}

/// XCR0 bits 17 (XTILECFG) and 18 (XTILEDATA): the OS saves tile state on context switches.
fn os_saves_tiles() -> bool {
    let osxsave = __cpuid(1).ecx & (1 << 27) != 0;
    if !osxsave {
        return false;
    }
    let (low, _high): (u32, u32);
    // SAFETY: OSXSAVE says the OS enabled xgetbv; with ecx = 0 it only reads XCR0.
    unsafe {
        asm!("xgetbv", in("ecx") 0, out("eax") low, out("edx") _high,
            options(nomem, nostack, preserves_flags));
    }
    low & (0b11 << 17) == 0b11 << 17
}

/// Linux (5.16 on) keeps tile data disabled until the process asks for it with
/// `arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`; the grant covers all its threads.
#[cfg(target_os = "linux")]
fn request_tile_permission() -> bool {
    const SYS_ARCH_PRCTL: i64 = 158;
    const ARCH_REQ_XCOMP_PERM: u64 = 0x1023;
    const XFEATURE_XTILEDATA: u64 = 18;
    let result: i64;
    // SAFETY: arch_prctl with these arguments touches no user memory; `syscall` clobbers
    // rcx and r11, declared here.
    unsafe {
        asm!("syscall",
            inlateout("rax") SYS_ARCH_PRCTL => result,
            in("rdi") ARCH_REQ_XCOMP_PERM, in("rsi") XFEATURE_XTILEDATA,
            lateout("rcx") _, lateout("r11") _, options(nostack));
    }
    result == 0
}

/// Other systems: not known how to ask, so no AMX.
#[cfg(not(target_os = "linux"))]
fn request_tile_permission() -> bool {
    false
}

/// `lhs` as tiles `[m-block][k-block]`, each 16 rows × 32 bf16; the m-blocks padded with zeros
/// to an even count so that the kernel always takes them in pairs.
pub(crate) struct TiledLhs {
    amx: Amx,
    k: usize,
    k_blocks: usize,
    tiles: Vec<Tile>,
}

impl TiledLhs {
    pub(crate) fn new(amx: Amx, m: usize, k: usize, lhs: Strided) -> Self {
        // What the contiguous packer's SAFETY below counts on.
        lhs.assert_covers(m, k);
        let m_blocks = m.div_ceil(2 * ROWS) * 2;
        let k_blocks = k.div_ceil(DEPTH);
        let mut tiles = vec![ZERO_TILE; m_blocks * k_blocks];
        for (index, tile) in tiles.iter_mut().enumerate() {
            let (mb, kb) = (index / k_blocks, index % k_blocks);
            if lhs.col_stride == 1 {
                // SAFETY: `amx` proves AVX-512 F, BW and BF16; `lhs` covers m×k (asserted).
                unsafe { pack_lhs_tile_contiguous(tile, lhs, [m, k], [mb, kb]) };
            } else {
                pack_lhs_tile(tile, lhs, [m, k], [mb, kb]);
            }
        }
        Self {
            amx,
            k,
            k_blocks,
            tiles,
        }
    }
}

thread_local! {
    /// The packed `rhs`, kept between calls so that the steady state allocates nothing; it
    /// grows to the largest `rhs` seen (half its f32 size, plus padding).
    static PACKED_RHS: RefCell<Vec<Tile>> = const { RefCell::new(Vec::new()) };
}

/// `dst = or += lhs · rhs` for `m, n, k > 0`: pack all of `rhs` (so that it is read through
/// memory in order), then for each pair of column blocks compute the 32×32 blocks of `dst`
/// under it, that panel staying in L2 while all of `lhs` passes over it.
pub(crate) fn multiply(dst: &mut [f32], lhs: &TiledLhs, rhs: Strided, n: usize, accumulate: bool) {
    let (k, k_blocks) = (lhs.k, lhs.k_blocks);
    let m = dst.len() / n;
    let n_blocks = n.div_ceil(2 * ROWS) * 2;
    PACKED_RHS.with_borrow_mut(|packed| {
        if packed.len() < n_blocks * k_blocks {
            packed.resize(n_blocks * k_blocks, ZERO_TILE);
        }
        let packed = &mut packed[..n_blocks * k_blocks];
        pack_rhs(lhs.amx.avx512(), packed, rhs, [k, n], k_blocks);
        let session = TileSession::start(lhs.amx);
        let mut edge = Block([0.0; BLOCK * BLOCK]);
        for (col_pair, panel) in packed.chunks_exact(2 * k_blocks).enumerate() {
            let (b0, b1) = panel.split_at(k_blocks);
            let row_pairs = lhs.tiles.chunks_exact(2 * k_blocks);
            for (row_pair, a) in row_pairs.enumerate() {
                let (a0, a1) = a.split_at(k_blocks);
                let [row, col] = [row_pair * BLOCK, col_pair * BLOCK];
                if row + BLOCK <= m && col + BLOCK <= n {
                    let c = &mut dst[row * n + col..];
                    compute_block(&session, [a0, a1], [b0, b1], (c, n), accumulate);
                } else {
                    compute_block(&session, [a0, a1], [b0, b1], (&mut edge.0, BLOCK), false);
                    write_edge(dst, &edge, [row, col], [m, n], accumulate);
                }
            }
        }
    });
}

/// The tile configuration for `ldtilecfg` (palette 1): tmm0–7 all 16 rows × 64 bytes.
#[repr(C, align(64))]
struct TileConfig {
    palette: u8,
    start_row: u8,
    reserved: [u8; 14],
    bytes_per_row: [u16; 16],
    rows: [u8; 16],
}

static CONFIG: TileConfig = TileConfig {
    palette: 1,
    start_row: 0,
    reserved: [0; 14],
    bytes_per_row: [64, 64, 64, 64, 64, 64, 64, 64, 0, 0, 0, 0, 0, 0, 0, 0],
    rows: [16, 16, 16, 16, 16, 16, 16, 16, 0, 0, 0, 0, 0, 0, 0, 0],
};

/// Tiles configured on this thread; dropping it releases them (`tilerelease`), so that the
/// thread carries no tile state between calls. Its existence is what lets `compute_block`
/// run tile instructions. Neither `Send` nor `Sync` (the raw pointer's marker): the tile
/// configuration belongs to the thread that loaded it, so a session used or dropped on another
/// thread would run tile instructions there unconfigured, or release that thread's tiles.
pub(crate) struct TileSession(PhantomData<*const ()>);

impl TileSession {
    pub(crate) fn start(_: Amx) -> Self {
        // SAFETY: AMX-TILE is present and the OS granted tile data (`Amx`);
        // `CONFIG` is a valid 64-byte palette-1 configuration.
        unsafe {
            asm!("ldtilecfg [{}]", in(reg) &CONFIG, options(nostack, readonly, preserves_flags));
        }
        Self(PhantomData)
    }
}

impl Drop for TileSession {
    fn drop(&mut self) {
        // SAFETY: AMX-TILE is present (a session exists); tilerelease only resets tile state.
        unsafe { asm!("tilerelease", options(nomem, nostack, preserves_flags)) };
    }
}

/// One 32×32 block, `c = or += [a0; a1] · [b0 b1]` over all k-blocks, `c` being 32 rows of
/// 32 floats `row_stride` apart. The four C tiles live in tmm0–3 (loaded from `c` to add to
/// it, or zeroed), A in tmm4–5 and B in tmm6–7, so each loaded tile serves two `tdpbf16ps`;
/// the results go straight to `c`.
fn compute_block(
    _tiles: &TileSession,
    a: [&[Tile]; 2],
    b: [&[Tile]; 2],
    (c, row_stride): (&mut [f32], usize),
    accumulate: bool,
) {
    let k_blocks = a[0].len();
    assert!(k_blocks > 0 && [a[1], b[0], b[1]].iter().all(|t| t.len() == k_blocks));
    assert!(row_stride >= BLOCK && c.len() >= (BLOCK - 1) * row_stride + BLOCK);
    // SAFETY: the session configured tmm0–7 as 16 rows × 64 bytes; the loop reads
    // `k_blocks` tiles of 1024 bytes from each of the four slices (lengths asserted); the C
    // tiles read and write 32 rows of 128 bytes, `row_stride` floats apart, inside `c`
    // (asserted). Tile row r of tmm0 is at c + r·stride, of tmm1 at c + 64 + r·stride, of
    // tmm2 and tmm3 16 rows lower.
    unsafe {
        asm!(
            "mov {low}, {c_stride}",
            "shl {low}, 4",
            "add {low}, {c}",
            "test {accumulate:e}, {accumulate:e}",
            "jz 3f",
            "tileloadd tmm0, [{c} + {c_stride}]",
            "tileloadd tmm1, [{c} + {c_stride} + 64]",
            "tileloadd tmm2, [{low} + {c_stride}]",
            "tileloadd tmm3, [{low} + {c_stride} + 64]",
            "jmp 2f",
            "3:",
            "tilezero tmm0",
            "tilezero tmm1",
            "tilezero tmm2",
            "tilezero tmm3",
            "2:",
            "tileloadd tmm4, [{a0} + {stride}]",
            "tileloadd tmm6, [{b0} + {stride}]",
            "tdpbf16ps tmm0, tmm4, tmm6",
            "tileloadd tmm7, [{b1} + {stride}]",
            "tdpbf16ps tmm1, tmm4, tmm7",
            "tileloadd tmm5, [{a1} + {stride}]",
            "tdpbf16ps tmm2, tmm5, tmm6",
            "tdpbf16ps tmm3, tmm5, tmm7",
            "add {a0}, 1024",
            "add {a1}, 1024",
            "add {b0}, 1024",
            "add {b1}, 1024",
            "dec {count}",
            "jnz 2b",
            "tilestored [{c} + {c_stride}], tmm0",
            "tilestored [{c} + {c_stride} + 64], tmm1",
            "tilestored [{low} + {c_stride}], tmm2",
            "tilestored [{low} + {c_stride} + 64], tmm3",
            a0 = inout(reg) a[0].as_ptr() => _,
            a1 = inout(reg) a[1].as_ptr() => _,
            b0 = inout(reg) b[0].as_ptr() => _,
            b1 = inout(reg) b[1].as_ptr() => _,
            count = inout(reg) k_blocks => _,
            stride = in(reg) 64usize,
            c = in(reg) c.as_mut_ptr(),
            c_stride = in(reg) row_stride * size_of::<f32>(),
            accumulate = in(reg) u32::from(accumulate),
            low = out(reg) _,
            options(nostack),
        );
    }
}

/// Adds or copies the part of `edge` (the block whose top-left corner is `[row, col]`) that
/// lies inside `dst` (`m × n`).
fn write_edge(
    dst: &mut [f32],
    edge: &Block,
    [row, col]: [usize; 2],
    [m, n]: [usize; 2],
    accumulate: bool,
) {
    let width = (n - col).min(BLOCK);
    for (r, values) in edge.0.chunks_exact(BLOCK).take(m - row).enumerate() {
        let out = &mut dst[(row + r) * n + col..][..width];
        if accumulate {
            out.iter_mut().zip(values).for_each(|(o, v)| *o += v);
        } else {
            out.copy_from_slice(&values[..width]);
        }
    }
}

/// `rhs` (`k × n`) into `tiles` (`[n-block][k-block]`), zeros past `n`.
pub(crate) fn pack_rhs(
    _: Avx512Bf16,
    tiles: &mut [Tile],
    rhs: Strided,
    [k, n]: [usize; 2],
    k_blocks: usize,
) {
    rhs.assert_covers(k, n);
    if rhs.col_stride == 1 {
        // SAFETY: `Avx512Bf16` proves AVX-512 F, BW and BF16; `rhs` covers k×n (asserted).
        unsafe { pack_rhs_rows(tiles, rhs, [k, n], k_blocks) };
        return;
    }
    for (index, tile) in tiles.iter_mut().enumerate() {
        let (nb, kb) = (index / k_blocks, index % k_blocks);
        if nb * ROWS >= n {
            *tile = ZERO_TILE;
        } else if rhs.row_stride == 1 {
            // The columns' values two tiles further down, into L1: each of the 16 columns is
            // a stream of its own (a channel's row for a weight gradient), too many for the
            // hardware prefetcher.
            let ahead = (kb + 2) * DEPTH..((kb + 3) * DEPTH).min(k);
            for col in nb * ROWS..((nb + 1) * ROWS).min(n) {
                let start = col * rhs.col_stride;
                prefetch::<_MM_HINT_T0, _>(rhs.data, start + ahead.start..start + ahead.end);
            }
            // SAFETY: as above.
            unsafe { pack_rhs_tile_columns(tile, rhs, [k, n], [nb, kb]) };
        } else {
            pack_rhs_tile(tile, rhs, [k, n], [nb, kb]);
        }
    }
}

/// Tile `[mb][kb]` of `lhs` (`m × k`), any strides: row `r` holds `lhs[16 mb + r][32 kb ..]`.
pub(crate) fn pack_lhs_tile(
    tile: &mut Tile,
    lhs: Strided,
    [m, k]: [usize; 2],
    [mb, kb]: [usize; 2],
) {
    for (index, out) in tile.0.iter_mut().enumerate() {
        let (row, col) = (mb * ROWS + index / DEPTH, kb * DEPTH + index % DEPTH);
        *out = if row < m && col < k {
            tile_bits(lhs.at(row, col))
        } else {
            0
        };
    }
}

/// Tile `[nb][kb]` of `rhs` (`k × n`), any strides, in the VNNI layout `tdpbf16ps` wants: row
/// `r` holds, for 16 columns, the pair `(rhs[32 kb + 2r][c], rhs[32 kb + 2r + 1][c])`.
pub(crate) fn pack_rhs_tile(
    tile: &mut Tile,
    rhs: Strided,
    [k, n]: [usize; 2],
    [nb, kb]: [usize; 2],
) {
    for (index, out) in tile.0.iter_mut().enumerate() {
        let (r, c, half) = (index / DEPTH, index % DEPTH / 2, index % 2);
        let (row, col) = (kb * DEPTH + 2 * r + half, nb * ROWS + c);
        *out = if row < k && col < n {
            tile_bits(rhs.at(row, col))
        } else {
            0
        };
    }
}

/// `pack_lhs_tile` for `lhs.col_stride == 1`: each tile row is 32 consecutive floats.
///
/// # Safety
/// AVX-512 F, BW and BF16 present; `lhs` covers `m × k`.
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
pub(crate) unsafe fn pack_lhs_tile_contiguous(
    tile: &mut Tile,
    lhs: Strided,
    [m, k]: [usize; 2],
    [mb, kb]: [usize; 2],
) {
    let (col, count) = (kb * DEPTH, (k - kb * DEPTH).min(DEPTH));
    for r in 0..ROWS {
        let row = mb * ROWS + r;
        let values = if row < m {
            // SAFETY: elements row·row_stride + col .. + count lie inside `lhs.data`
            // (caller's contract, `col + count <= k`).
            unsafe { load_bf16_run(lhs.data.as_ptr().add(row * lhs.row_stride + col), count) }
        } else {
            _mm512_setzero_si512()
        };
        store_row(tile, r, values);
    }
}

/// `pack_rhs` for `rhs.col_stride == 1` (a row-major matrix), two rows of `rhs` at a time
/// so that the reads run through memory in order: tile row `r` interleaves 16 consecutive
/// floats of rows `2r` and `2r + 1` of the k-block.
///
/// # Safety
/// AVX-512 F, BW and BF16 present; `rhs` covers `k × n`.
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
unsafe fn pack_rhs_rows(tiles: &mut [Tile], rhs: Strided, [k, n]: [usize; 2], k_blocks: usize) {
    let load = |row: usize, col: usize| {
        if row < k && col < n {
            // SAFETY: the unmasked elements row·row_stride + col .. + min(16, n - col) lie
            // inside `rhs.data` (caller's contract).
            unsafe {
                let start = rhs.data.as_ptr().add(row * rhs.row_stride + col);
                _mm512_maskz_loadu_ps(lane_mask(n - col), start)
            }
        } else {
            _mm512_setzero_ps()
        }
    };
    let n_blocks = tiles.len() / k_blocks;
    for pair in 0..k_blocks * ROWS {
        let (kb, r) = (pair / ROWS, pair % ROWS);
        // The rows 16 ahead into L1 for this panel, this pair's next panel into L2.
        prefetch_rows::<_MM_HINT_T0>([2 * pair + 16, 2 * pair + 17], rhs, k, 0..n);
        prefetch_rows::<_MM_HINT_T1>([2 * pair, 2 * pair + 1], rhs, k, n..2 * n);
        for nb in 0..n_blocks {
            let col = nb * ROWS;
            let pairs = interleave_bf16(load(2 * pair, col), load(2 * pair + 1, col));
            store_row(&mut tiles[nb * k_blocks + kb], r, pairs);
        }
    }
}

/// Asks for `columns` of `rows` (those below `k`) of `rhs` to be brought to cache: `HINT`
/// `_MM_HINT_T0` for L1, `_MM_HINT_T1` for L2. The packers read `rhs` a panel of a few
/// vectors at a time, so the rows they read lie a whole matrix row apart (an image row for
/// a 1x1 convolution, whose rhs is its input) and the hardware prefetcher misses them: a
/// third of such a convolution's time on 17x17 maps went to those loads.
fn prefetch_rows<const HINT: i32>(rows: [usize; 2], rhs: Strided, k: usize, columns: Range<usize>) {
    for row in rows.into_iter().filter(|&row| row < k) {
        let start = row * rhs.row_stride;
        prefetch::<HINT, _>(rhs.data, start + columns.start..start + columns.end);
    }
}

/// `even` and `odd` rounded to bf16 (`to_bf16`) and interleaved: lane c holds the pair
/// `(even[c], odd[c])`, the even one in the low half.
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
pub(crate) fn interleave_bf16(even: __m512, odd: __m512) -> __m512i {
    // Word 2c from word c (even's lane c), word 2c + 1 from word 16 + c (odd's lane c).
    let interleave = _mm512_set_epi16(
        31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5, 20, 4,
        19, 3, 18, 2, 17, 1, 16, 0,
    );
    _mm512_permutexvar_epi16(interleave, to_bf16(even, odd))
}

/// `pack_rhs_tile` for `rhs.row_stride == 1` (a transposed row-major matrix): each column of
/// the tile is 32 consecutive floats, so pack them as pairs and transpose the 16×16 pairs.
///
/// # Safety
/// AVX-512 F, BW and BF16 present; `rhs` covers `k × n`.
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
pub(crate) unsafe fn pack_rhs_tile_columns(
    tile: &mut Tile,
    rhs: Strided,
    [k, n]: [usize; 2],
    [nb, kb]: [usize; 2],
) {
    let (row, count) = (kb * DEPTH, (k - kb * DEPTH).min(DEPTH));
    let columns: [__m512i; ROWS] = core::array::from_fn(|c| {
        let col = nb * ROWS + c;
        if col < n {
            // SAFETY: elements row + col·col_stride .. + count lie inside `rhs.data`
            // (caller's contract, `row + count <= k`).
            unsafe { load_bf16_run(rhs.data.as_ptr().add(row + col * rhs.col_stride), count) }
        } else {
            _mm512_setzero_si512()
        }
    });
    for (r, values) in transpose(columns).into_iter().enumerate() {
        store_row(tile, r, values);
    }
}

/// The first `count` (at most 16) lanes.
pub(crate) fn lane_mask(count: usize) -> __mmask16 {
    if count >= 16 {
        u16::MAX
    } else {
        (1 << count) - 1
    }
}

/// `count` (1 to 32) floats from `source` rounded to bf16, packed in order, zeros after.
///
/// # Safety
/// AVX-512 F, BW and BF16 present; `source .. source + count` readable.
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
pub(crate) unsafe fn load_bf16_run(source: *const f32, count: usize) -> __m512i {
    // SAFETY: only the first `count` floats are unmasked.
    let low = unsafe { _mm512_maskz_loadu_ps(lane_mask(count), source) };
    let high = if count > 16 {
        // SAFETY: as above; `source + 16` is within the readable range since count > 16.
        unsafe { _mm512_maskz_loadu_ps(lane_mask(count - 16), source.add(16)) }
    } else {
        _mm512_setzero_ps()
    };
    to_bf16(low, high)
}

/// `low` then `high` rounded to 32 bf16 by `vcvtne2ps2bf16`: to nearest even, NaN kept
/// (quieted), and subnormals flushed to zero, which AMX would do with them anyway.
#[target_feature(enable = "avx512f,avx512bf16")]
pub(crate) fn to_bf16(low: __m512, high: __m512) -> __m512i {
    let words: __m512bh = _mm512_cvtne2ps_pbh(high, low);
    // SAFETY: both are 64 bytes of plain bits.
    unsafe { core::mem::transmute::<__m512bh, __m512i>(words) }
}

/// `values` rounded to bf16, as the bit patterns [`tile_bits`] gives them, 32 at a time where
/// the CPU has AVX-512 BF16, on rayon's threads: the kernels' packers round every value of a
/// kernel twice a step, and one at a time on the calling thread they took a sixth of
/// Inception's Mixed_7b 3x3 while the other cores waited.
pub(crate) fn rounded_bits(values: &[f32]) -> Vec<u16> {
    const TASK: usize = 1 << 14;
    let avx512 = Avx512Bf16::get();
    let mut bits = Vec::with_capacity(values.len());
    let tasks = (bits.spare_capacity_mut()[..values.len()].par_chunks_mut(TASK))
        .zip(values.par_chunks(TASK));
    tasks.for_each(|(bits, values)| match avx512 {
        Some(_) => {
            for (bits, values) in bits.chunks_mut(DEPTH).zip(values.chunks(DEPTH)) {
                // SAFETY: `Avx512Bf16::get` found the features; both chunks have
                // `values.len()` values, at most 32.
                unsafe { store_bf16_run(bits, values) };
            }
        }
        None => (bits.iter_mut().zip(values)).for_each(|(b, &v)| {
            b.write(tile_bits(v));
        }),
    });
    // SAFETY: the tasks wrote each of the first `values.len()` words.
    unsafe { bits.set_len(values.len()) };
    bits
}

/// `bits` = `values` rounded to bf16 (`load_bf16_run`): up to 32 at a time, every word of
/// `bits` written (so it may start uninitialized).
///
/// # Safety
/// AVX-512 F, BW and BF16 present. (`bits` and `values` of one length, at most 32: asserted.)
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
pub(crate) unsafe fn store_bf16_run(bits: &mut [MaybeUninit<u16>], values: &[f32]) {
    assert!(
        bits.len() == values.len() && values.len() <= DEPTH,
        "a run of 0 to 32 values"
    );
    // In u64, so that 32 values shift by 32 and none by 0 (an empty run stores nothing).
    let mask = ((1u64 << values.len()) - 1) as __mmask32;
    // SAFETY: the caller's contract; only the first `values.len()` words are stored.
    unsafe {
        let words = load_bf16_run(values.as_ptr(), values.len());
        _mm512_mask_storeu_epi16(bits.as_mut_ptr().cast(), mask, words);
    }
}

/// The bits `to_bf16` gives `x`, one at a time: `bf16_bits`, with subnormals flushed to
/// (signed) zero.
pub(crate) fn tile_bits(x: f32) -> u16 {
    let bits = x.to_bits();
    if bits & 0x7f80_0000 == 0 {
        (bits >> 16) as u16 & 0x8000
    } else {
        bf16_bits(x)
    }
}

/// Tile row `r` (64 bytes) from `values`.
#[target_feature(enable = "avx512f")]
fn store_row(tile: &mut Tile, r: usize, values: __m512i) {
    let row: &mut [u16; DEPTH] = (&mut tile.0[r * DEPTH..][..DEPTH]).try_into().unwrap();
    // SAFETY: `row` is 64 writable bytes.
    unsafe { _mm512_storeu_si512(row.as_mut_ptr().cast(), values) };
}

/// Transposes 16×16 32-bit lanes: within 128-bit lanes (two unpack stages), then the
/// 128-bit lanes themselves (two shuffle stages).
#[target_feature(enable = "avx512f")]
pub(crate) fn transpose(x: [__m512i; 16]) -> [__m512i; 16] {
    let t: [__m512i; 16] = core::array::from_fn(|i| {
        let (a, b) = (x[i & !1], x[i | 1]);
        if i % 2 == 0 {
            _mm512_unpacklo_epi32(a, b)
        } else {
            _mm512_unpackhi_epi32(a, b)
        }
    });
    // u[4i + q]: in 128-bit lane L, column 4L + q of rows 4i .. 4i + 4.
    let u: [__m512i; 16] = core::array::from_fn(|i| {
        let (base, q) = (i & !3, i % 4);
        let (a, b) = (t[base + q / 2], t[base + 2 + q / 2]);
        if q % 2 == 0 {
            _mm512_unpacklo_epi64(a, b)
        } else {
            _mm512_unpackhi_epi64(a, b)
        }
    });
    // Lane L of u[q], u[4 + q], u[8 + q], u[12 + q] together make row 4L + q.
    let mut out = [_mm512_setzero_si512(); 16];
    for q in 0..4 {
        let (a, b, c, d) = (u[q], u[4 + q], u[8 + q], u[12 + q]);
        let even_ab = _mm512_shuffle_i32x4::<0x88>(a, b);
        let odd_ab = _mm512_shuffle_i32x4::<0xdd>(a, b);
        let even_cd = _mm512_shuffle_i32x4::<0x88>(c, d);
        let odd_cd = _mm512_shuffle_i32x4::<0xdd>(c, d);
        out[q] = _mm512_shuffle_i32x4::<0x88>(even_ab, even_cd);
        out[8 + q] = _mm512_shuffle_i32x4::<0xdd>(even_ab, even_cd);
        out[4 + q] = _mm512_shuffle_i32x4::<0x88>(odd_ab, odd_cd);
        out[12 + q] = _mm512_shuffle_i32x4::<0xdd>(odd_ab, odd_cd);
    }
    out
}
