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

use crate::kernels::precision::Bf16Kernel;

use super::gemm_f32::{View, gemm_f32};

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

/// The AMX path: tile layout, packing (AVX-512 where the strides allow), and the kernel. Its
/// `pub(crate)` items (tiles, the tile session, the bf16 conversions) serve `bf16_conv` too,
/// and its rhs packing (`pack_rhs`, which needs only AVX-512 BF16) the `vdpbf16ps` path.
#[cfg(target_arch = "x86_64")]
pub(crate) mod amx {
    use super::super::buffers::prefetch;
    use super::{Strided, bf16_bits};
    use core::arch::asm;
    use core::arch::x86_64::*;
    use std::cell::RefCell;
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
    pub(super) fn supported() -> bool {
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
    pub(super) struct TiledLhs {
        amx: Amx,
        k: usize,
        k_blocks: usize,
        tiles: Vec<Tile>,
    }

    impl TiledLhs {
        pub(super) fn new(amx: Amx, m: usize, k: usize, lhs: Strided) -> Self {
            let m_blocks = m.div_ceil(2 * ROWS) * 2;
            let k_blocks = k.div_ceil(DEPTH);
            let mut tiles = vec![ZERO_TILE; m_blocks * k_blocks];
            for (index, tile) in tiles.iter_mut().enumerate() {
                let (mb, kb) = (index / k_blocks, index % k_blocks);
                if lhs.col_stride == 1 {
                    // SAFETY: `amx` proves AVX-512 F, BW and BF16; the caller asserted that `lhs`
                    // covers m×k.
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
    pub(super) fn multiply(
        dst: &mut [f32],
        lhs: &TiledLhs,
        rhs: Strided,
        n: usize,
        accumulate: bool,
    ) {
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
    /// run tile instructions.
    pub(crate) struct TileSession(());

    impl TileSession {
        pub(crate) fn start(_: Amx) -> Self {
            // SAFETY: AMX-TILE is present and the OS granted tile data (`Amx`);
            // `CONFIG` is a valid 64-byte palette-1 configuration.
            unsafe {
                asm!("ldtilecfg [{}]", in(reg) &CONFIG, options(nostack, readonly, preserves_flags));
            }
            Self(())
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
    pub(super) fn pack_rhs(
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
                    prefetch::<_MM_HINT_T0>(rhs.data, start + ahead.start..start + ahead.end);
                }
                // SAFETY: as above.
                unsafe { pack_rhs_tile_columns(tile, rhs, [k, n], [nb, kb]) };
            } else {
                pack_rhs_tile(tile, rhs, [k, n], [nb, kb]);
            }
        }
    }

    /// Tile `[mb][kb]` of `lhs` (`m × k`), any strides: row `r` holds `lhs[16 mb + r][32 kb ..]`.
    pub(super) fn pack_lhs_tile(
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
    pub(super) fn pack_rhs_tile(
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
    pub(super) unsafe fn pack_lhs_tile_contiguous(
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
    fn prefetch_rows<const HINT: i32>(
        rows: [usize; 2],
        rhs: Strided,
        k: usize,
        columns: Range<usize>,
    ) {
        for row in rows.into_iter().filter(|&row| row < k) {
            let start = row * rhs.row_stride;
            prefetch::<HINT>(rhs.data, start + columns.start..start + columns.end);
        }
    }

    /// `even` and `odd` rounded to bf16 (`to_bf16`) and interleaved: lane c holds the pair
    /// `(even[c], odd[c])`, the even one in the low half.
    #[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
    pub(crate) fn interleave_bf16(even: __m512, odd: __m512) -> __m512i {
        // Word 2c from word c (even's lane c), word 2c + 1 from word 16 + c (odd's lane c).
        let interleave = _mm512_set_epi16(
            31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5, 20,
            4, 19, 3, 18, 2, 17, 1, 16, 0,
        );
        _mm512_permutexvar_epi16(interleave, to_bf16(even, odd))
    }

    /// `pack_rhs_tile` for `rhs.row_stride == 1` (a transposed row-major matrix): each column of
    /// the tile is 32 consecutive floats, so pack them as pairs and transpose the 16×16 pairs.
    ///
    /// # Safety
    /// AVX-512 F, BW and BF16 present; `rhs` covers `k × n`.
    #[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
    pub(super) unsafe fn pack_rhs_tile_columns(
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
}

/// The `vdpbf16ps` path, for CPUs with AVX-512 BF16 but no AMX (AMD Zen 4 and 5, Intel Cooper
/// Lake): one instruction multiplies 16 pairs of bf16 by 16 pairs and adds each pair's two
/// products to one of 16 f32 sums, twice the products of an f32 FMA. `lhs` is packed once as
/// pairs along k, `rhs` per call into the AMX path's tiles, whose rows are those pairs for 16
/// columns (a tile row is one vector here).
#[cfg(target_arch = "x86_64")]
mod pairs {
    use super::Strided;
    use super::amx::{
        Avx512Bf16, ROWS, Tile, ZERO_TILE, interleave_bf16, lane_mask, load_bf16_run, pack_rhs,
        tile_bits, transpose,
    };
    use core::arch::x86_64::*;
    use std::cell::RefCell;

    /// Rows of `dst` per microkernel call; with `VECTORS` columns of 16 floats, 24 of the 32
    /// vector registers hold sums, the rest the rhs vectors and the broadcast lhs pair.
    pub(super) const MR: usize = 8;
    /// Vectors of 16 columns per microkernel call.
    pub(super) const VECTORS: usize = 3;
    /// k-pairs per cache block: a call's rhs (`VECTORS` × 64 bytes a pair, 24 KB) stays in L1
    /// while every row block of `lhs` passes over it.
    pub(super) const KC: usize = 128;

    /// `lhs` (`m × k`) rounded to bf16, as `[row block][k-pair][MR rows]` of 32-bit pairs (the
    /// even k in the low half), zeros past `m` and `k`: each k-pair's `MR` values that the
    /// microkernel broadcasts lie side by side.
    pub(super) struct PairedLhs {
        avx512: Avx512Bf16,
        k: usize,
        pairs: usize,
        pub(super) data: Vec<u32>,
    }

    impl PairedLhs {
        pub(super) fn new(avx512: Avx512Bf16, m: usize, k: usize, lhs: Strided) -> Self {
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
    pub(super) fn pack_any(data: &mut [u32], lhs: Strided, [m, k]: [usize; 2]) {
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
                        _mm512_maskz_loadu_ps(
                            mask,
                            lhs.data.as_ptr().add(row + col * lhs.col_stride),
                        )
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
    pub(super) fn multiply(
        dst: &mut [f32],
        lhs: &PairedLhs,
        rhs: Strided,
        n: usize,
        accumulate: bool,
    ) {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_util::random_values as random;

    /// Small integers: exact in bf16, and every partial sum is exact in f32.
    fn integers(len: usize, seed: u64) -> Vec<f32> {
        random(len, seed)
            .into_iter()
            .map(|x| (x * 8.0).round())
            .collect()
    }

    /// How the test lays out a `rows × cols` matrix in memory.
    #[derive(Clone, Copy, Debug)]
    enum Layout {
        RowMajor,
        /// Column-major: the transpose of a row-major matrix (row stride 1).
        Transposed,
        /// Neither stride 1: every other element of a matrix with 3 spare columns.
        Sparse,
    }

    /// A `rows × cols` matrix with the given values (row-major order) laid out as `layout` says.
    fn lay_out(values: &[f32], rows: usize, cols: usize, layout: Layout) -> (Vec<f32>, [usize; 2]) {
        let strides = match layout {
            Layout::RowMajor => [cols, 1],
            Layout::Transposed => [1, rows],
            Layout::Sparse => [2 * cols + 3, 2],
        };
        let len = if rows * cols == 0 {
            0
        } else {
            (rows - 1) * strides[0] + (cols - 1) * strides[1] + 1
        };
        let mut data = vec![f32::NAN; len];
        for row in 0..rows {
            for col in 0..cols {
                data[row * strides[0] + col * strides[1]] = values[row * cols + col];
            }
        }
        (data, strides)
    }

    fn strided(data: &[f32], [row_stride, col_stride]: [usize; 2]) -> Strided<'_> {
        Strided {
            data,
            row_stride,
            col_stride,
        }
    }

    /// `lhs · rhs` of the bf16-rounded operands (row-major values) in f64, and the sums of
    /// `|products|` that bound the f32 summation error.
    fn reference(lhs: &[f32], rhs: &[f32], [m, k, n]: [usize; 3]) -> (Vec<f64>, Vec<f64>) {
        let mut value = vec![0.0; m * n];
        let mut magnitude = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                for p in 0..k {
                    let product = f64::from(round_to_bf16(lhs[i * k + p]))
                        * f64::from(round_to_bf16(rhs[p * n + j]));
                    value[i * n + j] += product;
                    magnitude[i * n + j] += product.abs();
                }
            }
        }
        (value, magnitude)
    }

    /// Error allowed, relative to the sum of `|products|`: f32 sums in some order (the largest
    /// seen on random data is about 7e-8).
    const TOLERANCE: f64 = 1e-6;

    fn assert_close(got: &[f32], want: &[f64], magnitude: &[f64], what: &str) {
        assert_eq!(got.len(), want.len());
        for (index, ((&got, &want), &magnitude)) in got.iter().zip(want).zip(magnitude).enumerate()
        {
            let error = (f64::from(got) - want).abs();
            assert!(
                error <= TOLERANCE * magnitude,
                "{what}: element {index} is {got}, want {want} (error {error:e}, Σ|p| {magnitude:e})"
            );
        }
    }

    /// `lhs · rhs` through the module, with `lhs` and `rhs` given row-major and laid out as asked.
    fn multiply(
        lhs: &[f32],
        rhs: &[f32],
        [m, k, n]: [usize; 3],
        [lhs_layout, rhs_layout]: [Layout; 2],
        kernel: Option<Bf16Kernel>,
    ) -> Vec<f32> {
        let (lhs_data, lhs_strides) = lay_out(lhs, m, k, lhs_layout);
        let (rhs_data, rhs_strides) = lay_out(rhs, k, n, rhs_layout);
        let packed = pack(m, k, strided(&lhs_data, lhs_strides), kernel);
        let mut dst = vec![f32::NAN; m * n];
        multiply_bf16(&mut dst, &packed, strided(&rhs_data, rhs_strides), n, false);
        dst
    }

    /// `lhs` packed for `kernel`, or for this machine's when `None`.
    fn pack(m: usize, k: usize, lhs: Strided, kernel: Option<Bf16Kernel>) -> PackedLhs {
        match kernel {
            None => PackedLhs::new(m, k, lhs),
            Some(kernel) => PackedLhs::for_kernel(m, k, lhs, kernel),
        }
    }

    const SHAPES: [[usize; 3]; 20] = [
        [1, 1, 1],
        [1, 5, 1],
        [3, 7, 2],
        [16, 32, 16],
        [17, 33, 15],
        [31, 31, 33],
        [33, 65, 47],
        [32, 64, 32],
        [5, 2048, 7],
        [40, 1600, 9],
        [64, 75, 576],
        [64, 1600, 144],
        [64, 144, 200],
        [70, 300, 100],
        // Past the `vdpbf16ps` path's blocks: 8 rows, 48 columns, 256 k (128 pairs).
        [9, 257, 49],
        [16, 512, 96],
        [24, 513, 97],
        [7, 259, 113],
        [1, 1024, 130],
        [25, 3, 1],
    ];

    const LAYOUTS: [[Layout; 2]; 5] = [
        [Layout::RowMajor, Layout::RowMajor],
        [Layout::RowMajor, Layout::Transposed],
        [Layout::RowMajor, Layout::Sparse],
        [Layout::Sparse, Layout::RowMajor],
        [Layout::Transposed, Layout::Transposed],
    ];

    /// The CPU's kernels other than the fallback.
    fn fast_kernels() -> Vec<Bf16Kernel> {
        let mut kernels = Vec::new();
        if amx_supported() {
            kernels.push(Bf16Kernel::AmxTiles);
        } else {
            println!("note: AMX unavailable here, not tested");
        }
        if avx512_bf16_supported() {
            kernels.push(Bf16Kernel::Avx512Bf16);
        } else {
            eprintln!("note: AVX-512 BF16 unavailable here, vdpbf16ps not tested");
        }
        kernels
    }

    /// The default kernel, the fallback and the CPU's other kernels.
    fn paths() -> Vec<(Option<Bf16Kernel>, String)> {
        let mut paths = vec![
            (None, "default".into()),
            (Some(Bf16Kernel::F32Gemm), "fallback".into()),
        ];
        paths.extend(
            fast_kernels()
                .into_iter()
                .map(|kernel| (Some(kernel), kernel.to_string())),
        );
        paths
    }

    #[test]
    fn rounding_is_to_nearest_even() {
        let cases: [(u32, u16); 9] = [
            (0x3f80_0000, 0x3f80), // 1
            (0x3f80_8000, 0x3f80), // tie, down to even
            (0x3f81_8000, 0x3f82), // tie, up to even
            (0x3f80_8001, 0x3f81), // just past the tie
            (0xbf80_7fff, 0xbf80), // just below the tie, negative
            (0x7f7f_ffff, 0x7f80), // f32::MAX rounds to infinity
            (0xff80_0000, 0xff80), // -infinity
            (0x0000_0000, 0x0000),
            (0x8000_0000, 0x8000),
        ];
        for (bits, want) in cases {
            assert_eq!(bf16_bits(f32::from_bits(bits)), want, "{bits:#x}");
        }
        for nan in [0x7f80_0001, 0x7fc0_0000, 0xff80_0001, 0xffff_ffff] {
            let rounded = round_to_bf16(f32::from_bits(nan));
            assert!(rounded.is_nan(), "{nan:#x} became {rounded}");
            assert_eq!(rounded.is_sign_negative(), nan >> 31 == 1);
        }
    }

    #[test]
    fn matches_the_f64_reference() {
        for (kernel, path) in paths() {
            for (seed, [m, k, n]) in SHAPES.into_iter().enumerate() {
                let lhs = random(m * k, 2 * seed as u64);
                let rhs = random(k * n, 2 * seed as u64 + 1);
                let (want, magnitude) = reference(&lhs, &rhs, [m, k, n]);
                for layouts in LAYOUTS {
                    let got = multiply(&lhs, &rhs, [m, k, n], layouts, kernel);
                    let what = format!("{path} {m}×{k}×{n} {layouts:?}");
                    assert_close(&got, &want, &magnitude, &what);
                }
            }
        }
    }

    #[test]
    fn integer_products_are_exact() {
        for (kernel, path) in paths() {
            for (seed, [m, k, n]) in SHAPES.into_iter().enumerate() {
                let lhs = integers(m * k, 3 * seed as u64);
                let rhs = integers(k * n, 3 * seed as u64 + 1);
                let (want, _) = reference(&lhs, &rhs, [m, k, n]);
                for layouts in LAYOUTS {
                    let got = multiply(&lhs, &rhs, [m, k, n], layouts, kernel);
                    let want: Vec<f32> = want.iter().map(|&x| x as f32).collect();
                    assert_eq!(got, want, "{path} {m}×{k}×{n} {layouts:?}");
                }
            }
        }
    }

    #[test]
    fn fast_kernels_and_fallback_agree() {
        let shapes = SHAPES.into_iter().chain([[192, 1728, 77], [64, 1600, 144]]);
        for (seed, [m, k, n]) in shapes.enumerate() {
            let lhs = random(m * k, 5 * seed as u64);
            let rhs = random(k * n, 5 * seed as u64 + 1);
            let (_, magnitude) = reference(&lhs, &rhs, [m, k, n]);
            for layouts in LAYOUTS {
                let fallback = multiply(&lhs, &rhs, [m, k, n], layouts, Some(Bf16Kernel::F32Gemm));
                let fallback: Vec<f64> = fallback.into_iter().map(f64::from).collect();
                for kernel in fast_kernels() {
                    let got = multiply(&lhs, &rhs, [m, k, n], layouts, Some(kernel));
                    let what = format!("{kernel} against fallback, {m}×{k}×{n} {layouts:?}");
                    assert_close(&got, &fallback, &magnitude, &what);
                }
            }
        }
    }

    #[test]
    fn accumulates_into_dst() {
        // The second shape spans three of the `vdpbf16ps` path's k blocks.
        for [m, k, n] in [[33, 100, 40], [17, 601, 50]] {
            let lhs = random(m * k, 11);
            let rhs = random(k * n, 12);
            let before = random(m * n, 13);
            let (product, magnitude) = reference(&lhs, &rhs, [m, k, n]);
            let want: Vec<f64> = product
                .iter()
                .zip(&before)
                .map(|(p, &b)| p + f64::from(b))
                .collect();
            let magnitude: Vec<f64> = magnitude
                .iter()
                .zip(&before)
                .map(|(p, &b)| p + f64::from(b).abs())
                .collect();
            for (kernel, path) in paths() {
                let packed = pack(m, k, strided(&lhs, [k, 1]), kernel);
                let mut dst = before.clone();
                multiply_bf16(&mut dst, &packed, strided(&rhs, [n, 1]), n, true);
                assert_close(&dst, &want, &magnitude, &format!("{path} {m}×{k}×{n}"));
            }
        }
    }

    #[test]
    fn one_packed_lhs_serves_many_rhs() {
        let [m, k] = [20, 90];
        let lhs = random(m * k, 21);
        for (kernel, path) in paths() {
            let packed = pack(m, k, strided(&lhs, [k, 1]), kernel);
            for (seed, n) in [1usize, 50, 3, 200, 17].into_iter().enumerate() {
                let rhs = random(k * n, 22 + seed as u64);
                let (want, magnitude) = reference(&lhs, &rhs, [m, k, n]);
                let mut dst = vec![f32::NAN; m * n];
                multiply_bf16(&mut dst, &packed, strided(&rhs, [n, 1]), n, false);
                assert_close(&dst, &want, &magnitude, &format!("{path} n = {n}"));
            }
        }
    }

    #[test]
    fn threads_share_one_packed_lhs() {
        fn shareable<T: Send + Sync>(_: &T) {}
        let [m, k, n] = [40, 200, 70];
        let lhs = random(m * k, 71);
        let packed = PackedLhs::new(m, k, strided(&lhs, [k, 1]));
        shareable(&packed);
        std::thread::scope(|scope| {
            for seed in 0..4 {
                let (lhs, packed) = (&lhs, &packed);
                scope.spawn(move || {
                    let rhs = random(k * n, 72 + seed);
                    let (want, magnitude) = reference(lhs, &rhs, [m, k, n]);
                    for _ in 0..20 {
                        let mut dst = vec![f32::NAN; m * n];
                        multiply_bf16(&mut dst, packed, strided(&rhs, [n, 1]), n, false);
                        assert_close(&dst, &want, &magnitude, &format!("thread {seed}"));
                    }
                });
            }
        });
    }

    #[test]
    fn empty_depth_sets_or_keeps_dst() {
        for (kernel, _) in paths() {
            let packed = pack(3, 0, strided(&[], [0, 1]), kernel);
            let mut dst = vec![5.0; 12];
            multiply_bf16(&mut dst, &packed, strided(&[], [4, 1]), 4, true);
            assert_eq!(dst, vec![5.0; 12]);
            multiply_bf16(&mut dst, &packed, strided(&[], [4, 1]), 4, false);
            assert_eq!(dst, vec![0.0; 12]);
        }
    }

    #[test]
    fn empty_outputs_do_nothing() {
        let data = random(40, 31);
        for (kernel, _) in paths() {
            let pack = |m, k| pack(m, k, strided(&data, [k, 1]), kernel);
            multiply_bf16(&mut [], &pack(0, 5), strided(&data, [4, 1]), 4, false);
            multiply_bf16(&mut [], &pack(4, 5), strided(&data, [0, 1]), 0, true);
        }
    }

    #[test]
    fn nan_and_infinity_pass_through() {
        let [m, k, n] = [18, 40, 20];
        let mut lhs = random(m * k, 41);
        let rhs: Vec<f32> = random(k * n, 42)
            .into_iter()
            .map(|x| x.abs() + 0.5)
            .collect();
        lhs[k + 3] = f32::INFINITY; // row 1
        lhs[5 * k + 39] = f32::NAN; // row 5
        lhs[17 * k] = f32::NEG_INFINITY; // row 17, in the second row block
        let (want, magnitude) = reference(&lhs, &rhs, [m, k, n]);
        for (kernel, path) in paths() {
            let path = path.as_str();
            let got = multiply(&lhs, &rhs, [m, k, n], LAYOUTS[0], kernel);
            for (row, values) in got.chunks_exact(n).enumerate() {
                let range = row * n..(row + 1) * n;
                match row {
                    1 => assert!(
                        values.iter().all(|&x| x == f32::INFINITY),
                        "{path}: {values:?}"
                    ),
                    5 => assert!(values.iter().all(|x| x.is_nan()), "{path}: {values:?}"),
                    17 => assert!(
                        values.iter().all(|&x| x == f32::NEG_INFINITY),
                        "{path}: {values:?}"
                    ),
                    _ => assert_close(values, &want[range.clone()], &magnitude[range], path),
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "reaches past")]
    fn short_rhs_panics() {
        let lhs = random(6, 51);
        let packed = PackedLhs::new(2, 3, strided(&lhs, [3, 1]));
        let rhs = random(11, 52);
        multiply_bf16(&mut [0.0; 8], &packed, strided(&rhs, [4, 1]), 4, false);
    }

    #[test]
    #[should_panic(expected = "reaches past")]
    fn short_transposed_rhs_panics() {
        let lhs = random(6, 53);
        let packed = PackedLhs::new(2, 3, strided(&lhs, [3, 1]));
        let rhs = random(12, 54);
        multiply_bf16(&mut [0.0; 8], &packed, strided(&rhs, [1, 4]), 4, false);
    }

    #[test]
    #[should_panic(expected = "reaches past")]
    fn short_lhs_panics() {
        let lhs = random(5, 55);
        PackedLhs::new(2, 3, strided(&lhs, [3, 1]));
    }

    #[test]
    #[should_panic(expected = "dst holds")]
    fn wrong_dst_panics() {
        let lhs = random(6, 56);
        let packed = PackedLhs::new(2, 3, strided(&lhs, [3, 1]));
        let rhs = random(12, 57);
        multiply_bf16(&mut [0.0; 7], &packed, strided(&rhs, [4, 1]), 4, false);
    }

    #[test]
    fn environment_switches_are_honoured() {
        let amx = amx_supported() && !turned_off("TOWERS_NO_AMX");
        let avx512 = avx512_bf16_supported() && !turned_off("TOWERS_NO_AVX512BF16");
        let want = match (amx, avx512) {
            (true, _) => Bf16Kernel::AmxTiles,
            (false, true) => Bf16Kernel::Avx512Bf16,
            (false, false) => Bf16Kernel::F32Gemm,
        };
        assert_eq!(kernel(), want);
        assert_eq!(amx_available(), amx);
        println!(
            "AMX supported: {}, AVX-512 BF16 supported: {}, used: {}",
            amx_supported(),
            avx512_bf16_supported(),
            kernel()
        );
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn vector_packers_match_the_scalar_ones() {
        use amx::*;
        let Some(avx512) = Avx512Bf16::get() else {
            eprintln!("note: AVX-512 BF16 unavailable here, the vector packers are not used");
            return;
        };
        let mut values = random(13_000, 61);
        let specials = [
            f32::NAN,
            -f32::NAN,
            f32::from_bits(0x7f80_0001), // signalling NaN
            f32::from_bits(0x7fa1_2345), // NaN with a payload
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::from_bits(0x3f80_8000), // a tie
            f32::MAX,
            f32::from_bits(0x007f_ffff), // subnormals
            f32::from_bits(0x8000_0001),
            -0.0,
        ];
        for (index, special) in specials.into_iter().enumerate() {
            values[index * 97 + 3] = special;
        }
        for [rows, cols] in [[1, 1], [5, 3], [16, 32], [17, 33], [40, 70], [64, 100]] {
            for [row_stride, col_stride] in [
                [cols, 1],
                [1, rows],
                [cols + 5, 1],
                [1, rows + 2],
                [2 * cols, 2],
            ] {
                let matrix = strided(&values, [row_stride, col_stride]);
                matrix.assert_covers(rows, cols);
                let what = format!("{rows}×{cols}, strides ({row_stride}, {col_stride})");
                // As rhs: k × n = rows × cols.
                let (k_blocks, n_blocks) = (rows.div_ceil(32), cols.div_ceil(32) * 2);
                let mut fast = vec![Tile([1; 512]); k_blocks * n_blocks];
                let mut slow = vec![Tile([2; 512]); k_blocks * n_blocks];
                pack_rhs(avx512, &mut fast, matrix, [rows, cols], k_blocks);
                for (index, tile) in slow.iter_mut().enumerate() {
                    pack_rhs_tile(
                        tile,
                        matrix,
                        [rows, cols],
                        [index / k_blocks, index % k_blocks],
                    );
                }
                for (index, (fast, slow)) in fast.iter().zip(&slow).enumerate() {
                    assert_eq!(fast.0, slow.0, "rhs {what}, tile {index}");
                }
                // As lhs: m × k = rows × cols.
                if col_stride == 1 {
                    for block in [[0, 0], [1, 0], [0, 1], [2, 2], [4, 1]] {
                        let (mut fast, mut slow) = (Tile([1; 512]), Tile([2; 512]));
                        if block[1] * 32 < cols {
                            // SAFETY: `avx512` proves AVX-512 F, BW and BF16; `values` covers
                            // the matrix (asserted).
                            unsafe {
                                pack_lhs_tile_contiguous(&mut fast, matrix, [rows, cols], block)
                            };
                            pack_lhs_tile(&mut slow, matrix, [rows, cols], block);
                            assert_eq!(fast.0, slow.0, "lhs {what}, tile {block:?}");
                        }
                    }
                }
                // As lhs in pairs: the vector packers for row- and column-major matrices.
                let fast = pairs::PairedLhs::new(avx512, rows, cols, matrix).data;
                let mut slow = vec![1; fast.len()];
                pairs::pack_any(&mut slow, matrix, [rows, cols]);
                assert_eq!(fast, slow, "lhs in pairs {what}");
            }
        }
    }
}
