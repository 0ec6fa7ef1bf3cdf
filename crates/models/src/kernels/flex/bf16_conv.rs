//! Stride-1 convolutions computed straight on AMX tiles (implicit GEMM), forward and weight
//! gradient, without an im2col copy; the weight gradient also on AVX-512 BF16 vectors
//! (`vdpbf16ps`) where there is no AMX, from the same packed operands.
//!
//! The image is padded once into bf16 and the outputs are computed on the padded-width grid:
//! output place `q = oy·wp + ox` (`wp` the padded width, `ox < wp`, the last `kw - 1` columns
//! discarded). On that grid, tap `(ky, kx)` of output place `q` reads padded input place
//! `q + ky·wp + kx`, the same shift for every place, so a tile of 16 consecutive places is a
//! tile of the packed image at an offset: `tileloadd` takes any address and row stride, and
//! every tap reads the one packed image. The price is the discarded columns: a fraction
//! `(kw - 1) / wp` of the products.
//!
//! With few channels (an RGB image fills 3 of a tile's 32-deep rows) the kernel's columns are
//! folded into the depth instead: `kw` copies of the image shifted by `kx` places, the taps
//! only the kernel's rows (`folds`).
//!
//! The weight gradient is, per tap, `dwᵀ[c × out] += xshift[c × places] · gradᵀ[places × out]`
//! with the same trick on the A side: the image rows read at the tap's offset.
//!
//! As in `bf16_gemm`, operands are rounded to bf16 (to nearest even, subnormals flushed, as AMX
//! treats them) and the products summed in f32; only the order of the sums differs from im2col
//! with `multiply_bf16`. Everything runs on the calling thread; the forward pass only where
//! `amx_available()`, the weight gradient where [`WeightGradEngine::get`] finds an engine (the
//! caller keeps im2col for elsewhere).

use super::bf16_gemm::amx::{
    Amx, Avx512Bf16, BLOCK, Block, DEPTH, ROWS, Tile, TileSession, ZERO_TILE, interleave_bf16,
    lane_mask, load_bf16_run, tile_bits, transpose,
};
use super::bf16_gemm::kernel;
use super::buffers::prefetch;
use crate::kernels::precision::Bf16Kernel;
use core::arch::asm;
use core::arch::x86_64::*;
use std::cell::RefCell;

/// Places of the weight gradient's depth packed and multiplied at a time: enough that loading
/// and storing the sums costs little against the products, few enough that the packed rows and
/// gradient of a chunk stay in L2.
const CHUNK: usize = 2048;

/// The sizes of one stride-1 convolution and of its padded grid.
#[derive(Clone, Copy, Debug)]
struct Geometry {
    c: usize,
    h: usize,
    w: usize,
    kh: usize,
    kw: usize,
    ph: usize,
    pw: usize,
    /// The padded image is `hp × wp`.
    hp: usize,
    wp: usize,
    oh: usize,
    ow: usize,
    /// Whether the kernel's columns are folded into the depth (`folds`).
    folded: bool,
}

/// Whether a kernel's columns go into the depth with the channels: depth channel
/// `v = ch·kw + kx` is channel `ch` shifted `kx` places, leaving only the kernel's rows as
/// taps. Few channels fill a 32-deep tile poorly (3 of 32 for an RGB image), so where that
/// takes fewer tile products, pack `kw` shifted copies of the image instead of one.
fn folds(c: usize, kw: usize) -> bool {
    (c * kw).div_ceil(DEPTH) < c.div_ceil(DEPTH) * kw
}

impl Geometry {
    fn new([c, h, w]: [usize; 3], [kh, kw]: [usize; 2], [ph, pw]: [usize; 2]) -> Self {
        let (hp, wp) = (h + 2 * ph, w + 2 * pw);
        assert!(
            kh >= 1 && kw >= 1 && kh <= hp && kw <= wp,
            "a {kh}×{kw} kernel does not fit a {hp}×{wp} padded image"
        );
        let (oh, ow) = (hp - kh + 1, wp - kw + 1);
        Self {
            c,
            h,
            w,
            kh,
            kw,
            ph,
            pw,
            hp,
            wp,
            oh,
            ow,
            folded: folds(c, kw),
        }
    }

    /// Channels in the depth of a tap's product.
    fn channels(&self) -> usize {
        if self.folded {
            self.c * self.kw
        } else {
            self.c
        }
    }

    /// The input channel of depth channel `v`, and how many places it is shifted.
    fn channel_source(&self, v: usize) -> (usize, usize) {
        if self.folded {
            (v / self.kw, v % self.kw)
        } else {
            (v, 0)
        }
    }

    fn taps(&self) -> usize {
        if self.folded {
            self.kh
        } else {
            self.kh * self.kw
        }
    }

    /// How far past its output place on the grid tap `tap` (row-major `ky·kw + kx`, or `ky`
    /// if folded) reads.
    fn tap_offset(&self, tap: usize) -> usize {
        if self.folded {
            tap * self.wp
        } else {
            tap / self.kw * self.wp + tap % self.kw
        }
    }

    /// The index of kernel entry `[ch][tap]` (`tap = ky·kw + kx`) among `[tap][depth channel]`.
    fn depth_index(&self, ch: usize, tap: usize) -> [usize; 2] {
        if self.folded {
            [tap / self.kw, ch * self.kw + tap % self.kw]
        } else {
            [tap, ch]
        }
    }

    fn max_offset(&self) -> usize {
        self.tap_offset(self.taps() - 1)
    }

    /// Output places on the padded-width grid, discarded columns included.
    fn grid_places(&self) -> usize {
        self.oh * self.wp
    }

    /// The weight gradient's places per output place: an image's grid, rounded up to whole
    /// steps of 32 places, over its outputs.
    fn waste(&self) -> f64 {
        self.grid_places().next_multiple_of(DEPTH) as f64 / (self.oh * self.ow).max(1) as f64
    }
}

/// A row length of at least `len` elements of `bytes` bytes that is an odd number of 64-byte
/// lines: the 16 rows of a tile then fall in 16 different L1 sets, where a power-of-two stride
/// would put them all in one and evict them from each other.
fn odd_lines(len: usize, bytes: usize) -> usize {
    let per_line = 64 / bytes;
    (len.div_ceil(per_line) | 1) * per_line
}

/// A kernel `[out, c, kh, kw]` (row-major f32) rounded to bf16 and laid out per tap for
/// `forward`.
pub(crate) struct PackedKernel {
    out: usize,
    c: usize,
    kh: usize,
    kw: usize,
    /// Tiles `[out block][tap][depth block]`: row `r` of a tile is output channel
    /// `16·block + r`, its 32 columns 32 depth channels (`Geometry::depth_index`); zeros past
    /// `out` and the depth, and out blocks padded to an even count so that `forward` always
    /// takes them in pairs.
    tiles: Vec<Tile>,
}

impl PackedKernel {
    pub(crate) fn new(weight: &[f32], [out, c, kh, kw]: [usize; 4]) -> Self {
        let taps = kh * kw;
        assert_eq!(
            weight.len(),
            out * c * taps,
            "weight is not [{out}, {c}, {kh}, {kw}]"
        );
        Self::from_fn([out, c, kh, kw], |o, ch, tap| {
            weight[(o * c + ch) * taps + tap]
        })
    }

    /// The kernel of the input gradient of a stride-1 convolution by `weight` (`[out, c, kh,
    /// kw]`): inputs and outputs swapped and the window flipped both ways, `[c, out, kh, kw]`,
    /// packed straight from `weight` (no flipped copy first).
    pub(crate) fn flipped_transposed(weight: &[f32], [out, c, kh, kw]: [usize; 4]) -> Self {
        let taps = kh * kw;
        assert_eq!(
            weight.len(),
            out * c * taps,
            "weight is not [{out}, {c}, {kh}, {kw}]"
        );
        // Read in the weight's own order (a read per element strided by `c·taps` was 4.5% of
        // Inception's step), written to element (i, o, flipped tap).
        Self::from_writes([c, out, kh, kw], |tiles| {
            for o in 0..out {
                for i in 0..c {
                    let first = (o * c + i) * taps;
                    for (tap, &value) in weight[first..first + taps].iter().enumerate() {
                        tiles.put(i, o, taps - 1 - tap, value);
                    }
                }
            }
        })
    }

    /// The kernel whose element `(o, ch, tap)` (`tap` row-major `ky·kw + kx`) is
    /// `value(o, ch, tap)`.
    fn from_fn([out, c, kh, kw]: [usize; 4], value: impl Fn(usize, usize, usize) -> f32) -> Self {
        Self::from_writes([out, c, kh, kw], |tiles| {
            for o in 0..out {
                for ch in 0..c {
                    for tap in 0..kh * kw {
                        tiles.put(o, ch, tap, value(o, ch, tap));
                    }
                }
            }
        })
    }

    /// The kernel `[out, c, kh, kw]` whose elements `writes` puts into the tiles it is handed,
    /// in any order; those it leaves are zero.
    fn from_writes([out, c, kh, kw]: [usize; 4], writes: impl FnOnce(&mut KernelTiles)) -> Self {
        // The geometry of the smallest image the kernel fits: its depth layout is that of all.
        let g = Geometry::new([c, kh, kw], [kh, kw], [0, 0]);
        let (depth_blocks, depth_taps) = (g.channels().div_ceil(DEPTH), g.taps());
        let steps = depth_taps * depth_blocks;
        let mut tiles = KernelTiles {
            tiles: vec![ZERO_TILE; out.div_ceil(BLOCK) * 2 * steps],
            g,
            depth_blocks,
            depth_taps,
        };
        writes(&mut tiles);
        Self {
            out,
            c,
            kh,
            kw,
            tiles: tiles.tiles,
        }
    }
}

/// A [`PackedKernel`]'s tiles while they are filled.
struct KernelTiles {
    tiles: Vec<Tile>,
    g: Geometry,
    depth_blocks: usize,
    depth_taps: usize,
}

impl KernelTiles {
    /// Element `(o, ch, tap)` (`tap` row-major `ky·kw + kx`), rounded to bf16.
    fn put(&mut self, o: usize, ch: usize, tap: usize, value: f32) {
        let [tap_index, v] = self.g.depth_index(ch, tap);
        let tile = (o / ROWS * self.depth_taps + tap_index) * self.depth_blocks + v / DEPTH;
        self.tiles[tile].0[o % ROWS * DEPTH + v % DEPTH] = tile_bits(value);
    }
}

thread_local! {
    /// `forward`'s padded image in channel pairs, its table of tile offsets, and (for a folded
    /// kernel) the image padded in f32, kept between calls so that the steady state allocates
    /// nothing.
    static FORWARD: RefCell<(Vec<u32>, Vec<usize>, Vec<f32>)> =
        const { RefCell::new((Vec::new(), Vec::new(), Vec::new())) };
}

/// `y` (`[n, out, oh, ow]`, set) = the convolution of `x` (`[n, c, h, w]`) by the kernel, for n
/// images, on the calling thread (the caller splits the batch across threads).
pub(crate) fn forward(
    y: &mut [f32],
    x: &[f32],
    [n, c, h, w]: [usize; 4],
    kernel: &PackedKernel,
    padding: [usize; 2],
) {
    let amx = Amx::get().expect("the direct convolution needs AMX");
    assert_eq!(c, kernel.c, "the kernel has {} channels, x {c}", kernel.c);
    let g = Geometry::new([c, h, w], [kernel.kh, kernel.kw], padding);
    let (x_size, y_size) = (c * h * w, kernel.out * g.oh * g.ow);
    assert_eq!(x.len(), n * x_size, "x is not [{n}, {c}, {h}, {w}]");
    assert_eq!(
        y.len(),
        n * y_size,
        "y is not [{n}, {}, {}, {}]",
        kernel.out,
        g.oh,
        g.ow
    );
    if y.is_empty() {
        return;
    }
    if c == 0 {
        y.fill(0.0);
        return;
    }
    // Room for the last block of places at the farthest tap; zeros past the padded image.
    let len = odd_lines(g.grid_places().next_multiple_of(BLOCK) + g.max_offset(), 4);
    let c_blocks = g.channels().div_ceil(DEPTH);
    FORWARD.with_borrow_mut(|(image, offsets, padded)| {
        // Zeros once: each image rewrites only the inside of the padding.
        image.clear();
        image.resize(c_blocks * ROWS * len, 0);
        padded.clear();
        if g.folded {
            padded.resize(c * (len + g.kw), 0.0);
        }
        offsets.clear();
        offsets.extend((0..g.taps()).flat_map(|tap| {
            (0..c_blocks).map(move |cb| (cb * ROWS * len + g.tap_offset(tap)) * size_of::<u32>())
        }));
        let session = TileSession::start(amx);
        for i in 0..n {
            let x = &x[i * x_size..][..x_size];
            if g.folded {
                pack_folded(amx, image, padded, x, g, len);
            } else {
                let inside = (g.ph * g.wp + g.pw, g.wp, len);
                pack_pairs(amx.avx512(), image, x, [g.c, g.h, g.w], inside);
            }
            let y = &mut y[i * y_size..][..y_size];
            let image = Image {
                pairs: image,
                offsets,
                stride: len * size_of::<u32>(),
            };
            forward_image(&session, kernel, &image, y, g);
        }
    });
}

/// The padded image in channel pairs as `forward_block` reads it.
struct Image<'a> {
    /// `[channel pair][len]`, each u32 the bf16 of an even channel (low half) and the next.
    pairs: &'a [u32],
    /// The byte offset of each k-step's first tile row in `pairs`, `[tap][channel block]`.
    offsets: &'a [usize],
    /// Bytes from one channel pair to the next: the B tiles' row stride.
    stride: usize,
}

/// One image's output, 32 output channels × 32 grid places at a time.
fn forward_image(
    session: &TileSession,
    kernel: &PackedKernel,
    image: &Image,
    y: &mut [f32],
    g: Geometry,
) {
    let (steps, out, plane) = (image.offsets.len(), kernel.out, g.oh * g.ow);
    // Where the grid is the output (no discarded columns) whole blocks go straight to `y`.
    let direct = g.ow == g.wp;
    let mut edge = Block([0.0; BLOCK * BLOCK]);
    for (pair, a) in kernel.tiles.chunks_exact(2 * steps).enumerate() {
        let (a0, a1) = a.split_at(steps);
        let o = pair * BLOCK;
        for place in (0..g.grid_places()).step_by(BLOCK) {
            if direct && o + BLOCK <= out && place + BLOCK <= plane {
                let c = &mut y[o * plane + place..];
                forward_block(session, [a0, a1], image, place, (c, plane));
            } else {
                forward_block(session, [a0, a1], image, place, (&mut edge.0, BLOCK));
                scatter(y, &edge, [o, place], out, g);
            }
        }
    }
}

/// Copies the outputs in `edge` (output channels `o..`, grid places `place..`) that exist, the
/// places in the kept columns of the grid and the channels below `out`, into `y`.
fn scatter(y: &mut [f32], edge: &Block, [o, place]: [usize; 2], out: usize, g: Geometry) {
    let (rows, plane) = ((out - o).min(BLOCK), g.oh * g.ow);
    let end = (place + BLOCK).min(g.grid_places());
    let mut q = place;
    while q < end {
        let (oy, ox) = (q / g.wp, q % g.wp);
        if ox >= g.ow {
            q += g.wp - ox;
            continue;
        }
        let run = (end - q).min(g.ow - ox);
        for (r, values) in edge.0.chunks_exact(BLOCK).take(rows).enumerate() {
            let dst = &mut y[(o + r) * plane + oy * g.ow + ox..][..run];
            dst.copy_from_slice(&values[q - place..][..run]);
        }
        q += run;
    }
}

/// One 32×32 block of outputs, `c = a · image` summed over every tap and channel block: C tiles
/// in tmm0–3 (rows output channels, columns places), the kernel in tmm4–5 and the image at
/// places `place ..+ 32` in tmm6–7, each tile serving two `tdpbf16ps`.
fn forward_block(
    _tiles: &TileSession,
    a: [&[Tile]; 2],
    image: &Image,
    place: usize,
    (c, row_stride): (&mut [f32], usize),
) {
    let steps = image.offsets.len();
    assert!(steps > 0 && a.iter().all(|a| a.len() == steps));
    let start = place * size_of::<u32>();
    let farthest = image.offsets.iter().max().unwrap() + start;
    assert!(farthest + (ROWS - 1) * image.stride + 2 * 64 <= size_of_val(image.pairs));
    assert!(row_stride >= BLOCK && c.len() >= (BLOCK - 1) * row_stride + BLOCK);
    // SAFETY: the session configured tmm0–7 as 16 rows × 64 bytes. The A tiles are `steps`
    // tiles of 1024 bytes from each slice (lengths asserted); each B pair reads 16 rows of 128
    // bytes `stride` apart from `pairs + start + offset`, inside `pairs` (asserted for the
    // largest offset); the C tiles write 32 rows of 128 bytes, `row_stride` floats apart,
    // inside `c` (asserted), tmm2–3 16 rows below tmm0–1.
    unsafe {
        asm!(
            "mov {low}, {c_stride}",
            "shl {low}, 4",
            "add {low}, {c}",
            "tilezero tmm0",
            "tilezero tmm1",
            "tilezero tmm2",
            "tilezero tmm3",
            "2:",
            "mov {b}, {image}",
            "add {b}, [{offsets}]",
            "tileloadd tmm4, [{a0} + {a_stride}]",
            "tileloadd tmm6, [{b} + {b_stride}]",
            "tdpbf16ps tmm0, tmm4, tmm6",
            "tileloadd tmm7, [{b} + {b_stride} + 64]",
            "tdpbf16ps tmm1, tmm4, tmm7",
            "tileloadd tmm5, [{a1} + {a_stride}]",
            "tdpbf16ps tmm2, tmm5, tmm6",
            "tdpbf16ps tmm3, tmm5, tmm7",
            "add {a0}, 1024",
            "add {a1}, 1024",
            "add {offsets}, 8",
            "dec {count}",
            "jnz 2b",
            "tilestored [{c} + {c_stride}], tmm0",
            "tilestored [{c} + {c_stride} + 64], tmm1",
            "tilestored [{low} + {c_stride}], tmm2",
            "tilestored [{low} + {c_stride} + 64], tmm3",
            a0 = inout(reg) a[0].as_ptr() => _,
            a1 = inout(reg) a[1].as_ptr() => _,
            offsets = inout(reg) image.offsets.as_ptr() => _,
            count = inout(reg) steps => _,
            image = in(reg) image.pairs.as_ptr().cast::<u8>().add(start),
            a_stride = in(reg) 64usize,
            b_stride = in(reg) image.stride,
            c = in(reg) c.as_mut_ptr(),
            c_stride = in(reg) row_stride * size_of::<f32>(),
            b = out(reg) _,
            low = out(reg) _,
            options(nostack),
        );
    }
}

/// Writes the inside of a padded image in channel pairs (`[channel pair][len]`, image row `y`
/// at `first + y · wp` of its plane; the padding left as it is: zeros) from `x` (`[c, h, w]`):
/// each u32 the bf16 of channel `2·pair` in its low half, of the next channel (zero past `c`)
/// in its high half, as `tdpbf16ps` and `vdpbf16ps` pair depth. The AMX convolution and the
/// vector one (`vector_conv`) both read this layout.
pub(crate) fn pack_pairs(
    avx: Avx512Bf16,
    image: &mut [u32],
    x: &[f32],
    [c, h, w]: [usize; 3],
    (first, wp, len): (usize, usize, usize),
) {
    let plane = h * w;
    for pair in 0..c.div_ceil(2) {
        let even = &x[2 * pair * plane..][..plane];
        let odd = (2 * pair + 1 < c).then(|| &x[(2 * pair + 1) * plane..][..plane]);
        for row in 0..h {
            let dst = &mut image[pair * len + first + row * wp..][..w];
            let ahead = (row + PREFETCH_ROWS) * w..(row + PREFETCH_ROWS + 1) * w;
            prefetch::<_MM_HINT_T0>(even, ahead.clone());
            if let Some(odd) = odd {
                prefetch::<_MM_HINT_T0>(odd, ahead);
            }
            let odd = odd.map(|odd| &odd[row * w..][..w]);
            interleave_row(avx, dst, &even[row * w..][..w], odd);
        }
    }
}

/// Rows ahead of the one being packed that [`pack_pairs`] asks for: the planes come from memory
/// (the layer before wrote them long ago), and two streams a plane apart, read a row at a time,
/// left the hardware prefetcher behind.
const PREFETCH_ROWS: usize = 2;

/// `pack_pairs` for a folded kernel: the image padded in f32 (`[c][len + kw]`, zeros outside
/// the image kept from call to call), then each pair of depth channels interleaved from two
/// of its planes at their shifts.
fn pack_folded(
    amx: Amx,
    image: &mut [u32],
    padded: &mut [f32],
    x: &[f32],
    g: Geometry,
    len: usize,
) {
    let stride = len + g.kw;
    for (ch, plane) in padded.chunks_exact_mut(stride).enumerate() {
        for row in 0..g.h {
            let x = &x[(ch * g.h + row) * g.w..][..g.w];
            plane[(row + g.ph) * g.wp + g.pw..][..g.w].copy_from_slice(x);
        }
    }
    let source = |v: usize| {
        let (ch, shift) = g.channel_source(v);
        &padded[ch * stride + shift..][..len]
    };
    let channels = g.channels();
    for (pair, dst) in image
        .chunks_exact_mut(len)
        .take(channels.div_ceil(2))
        .enumerate()
    {
        let odd = (2 * pair + 1 < channels).then(|| source(2 * pair + 1));
        interleave_row(amx.avx512(), dst, source(2 * pair), odd);
    }
}

/// `dst[i]` = the bf16 pair `(even[i], odd[i])`, `odd` zero where absent; all of equal length.
fn interleave_row(_: Avx512Bf16, dst: &mut [u32], even: &[f32], odd: Option<&[f32]>) {
    assert!(even.len() == dst.len() && odd.is_none_or(|odd| odd.len() == dst.len()));
    // SAFETY: `Avx512Bf16` proves AVX-512 F, BW and BF16; the lengths are asserted equal.
    unsafe { interleave_row_avx512(dst, even, odd) }
}

/// `interleave_row`, 16 pairs at a time.
///
/// # Safety
/// AVX-512 F, BW and BF16 present; `even`, `odd` (if any) and `dst` of equal length.
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
unsafe fn interleave_row_avx512(dst: &mut [u32], even: &[f32], odd: Option<&[f32]>) {
    for start in (0..dst.len()).step_by(ROWS) {
        let mask = lane_mask(dst.len() - start);
        // SAFETY: the unmasked lanes are `start ..` up to the common length.
        unsafe {
            let low = _mm512_maskz_loadu_ps(mask, even.as_ptr().add(start));
            let high = match odd {
                Some(odd) => _mm512_maskz_loadu_ps(mask, odd.as_ptr().add(start)),
                None => _mm512_setzero_ps(),
            };
            let pairs = interleave_bf16(low, high);
            _mm512_mask_storeu_epi32(dst.as_mut_ptr().add(start).cast(), mask, pairs);
        }
    }
}

/// Whether `weight_grad` beats im2col + `multiply_bf16` for this convolution of `[h, w]`
/// images.
///
/// On AMX tiles, as measured by `examples/bench_conv` on one Sapphire Rapids core: 1.1× to 3×
/// on the Inception and CIFAR shapes, but not for kernels one row high and wider than one (1x7:
/// 0.7×, a quarter of the grid's columns discarded and no foot rows to skip) nor for few
/// channels (RGB: 0.6×, packing the gradient outweighs the products); even at 16 channels and
/// for 7x1.
///
/// On AVX-512 vectors (2-core Zen 5, batch 32): for kernels more than one row high on grids
/// that waste little ([`Geometry::waste`] ≤ 1.15): Inception's 3x3s on 147x147 maps 36 -> 26
/// and 53 -> 46 ms, its 5x5s 11.3 -> 9.0, its 7x1s 10–20% faster; not for 1x1 kernels (10–40%
/// slower: im2col has no windows to build there) nor on 8x8 maps (3x3: 9.9 -> 14.8 ms, a third
/// of the grid's places dropped or rounded off).
pub(crate) fn weight_grad_pays_off(
    c: usize,
    [kh, kw]: [usize; 2],
    [h, w]: [usize; 2],
    padding: [usize; 2],
) -> bool {
    match WeightGradEngine::get() {
        Some(WeightGradEngine::Tiles(_)) => c >= 16 && (kh > 1 || kw == 1),
        Some(WeightGradEngine::Vectors(_)) => {
            let fits = kh <= h + 2 * padding[0] && kw <= w + 2 * padding[1];
            c >= 16 && kh > 1 && fits && Geometry::new([c, h, w], [kh, kw], padding).waste() <= 1.15
        }
        None => false,
    }
}

thread_local! {
    /// `weight_grad`'s buffers, kept between calls so that the steady state allocates nothing.
    static WEIGHT_GRAD: RefCell<WeightGradScratch> = const {
        RefCell::new(WeightGradScratch {
            sums: Vec::new(),
            rows: Vec::new(),
            grid: Vec::new(),
            pairs: Vec::new(),
            runs: Vec::new(),
            offsets: Vec::new(),
        })
    };
}

struct WeightGradScratch {
    /// The sums, `[tap][channel][output channel]` (`dwᵀ` per tap, both sides padded to 32).
    sums: Vec<f32>,
    /// A chunk of the padded images, `[channel][a_len]` bf16 (the A tiles).
    rows: Vec<u16>,
    /// A chunk of the output gradient, its runs end to end, `[output channel][32 capacity]`
    /// bf16, zeros at the discarded places.
    grid: Vec<u16>,
    /// `grid` transposed into place pairs, `[16 capacity][b_row]` (the B tiles).
    pairs: Vec<u32>,
    /// The stretches of the depth, and the byte offset in `rows` of each 32 places of a chunk.
    runs: Vec<Run>,
    offsets: Vec<usize>,
}

/// `dw` (`[out, c, kh, kw]`) += Σ over the n images and output places of
/// `grad[i, o, y, x] · xpad[i, c, y + ky, x + kx]`, on the calling thread.
///
/// Per tap, `dwᵀ[c × out] += xshift[c × places] · gradᵀ[places × out]`, the places running
/// over all images: image `i`'s padded grid is rows `i·hp ..` of one tall grid of width `wp`,
/// on which the tap offset is the same everywhere. The depth runs over the output places of
/// that grid (the `kh - 1` rows at the foot of each image skipped), the gradient zero at the
/// discarded columns, in chunks that stay in L2 while every tap passes over them.
pub(crate) fn weight_grad(
    dw: &mut [f32],
    x: &[f32],
    dims: [usize; 4],
    grad: &[f32],
    kernel: [usize; 3],
    padding: [usize; 2],
) {
    let engine = WeightGradEngine::get().expect("the direct weight gradient needs AVX-512 BF16");
    weight_grad_on(engine, dw, x, dims, grad, kernel, padding);
}

/// What multiplies [`weight_grad`]'s packed chunks.
#[derive(Clone, Copy)]
pub(crate) enum WeightGradEngine {
    /// AMX tiles, 32 channels × 32 output channels a block.
    Tiles(Amx),
    /// `vdpbf16ps` on AVX-512 vectors, [`VECTOR_ROWS`] channels × 32 output channels a block.
    Vectors(Avx512Bf16),
}

impl WeightGradEngine {
    /// As the bf16 products run here ([`kernel`]): on AMX tiles, else AVX-512 BF16; `None`
    /// where neither runs (or the environment turned them off).
    pub(crate) fn get() -> Option<Self> {
        match kernel() {
            Bf16Kernel::AmxTiles => Amx::get().map(Self::Tiles),
            Bf16Kernel::Avx512Bf16 => Avx512Bf16::get().map(Self::Vectors),
            Bf16Kernel::F32Gemm => None,
        }
    }

    fn avx512(self) -> Avx512Bf16 {
        match self {
            Self::Tiles(amx) => amx.avx512(),
            Self::Vectors(avx512) => avx512,
        }
    }
}

/// [`weight_grad`] on `engine`.
fn weight_grad_on(
    engine: WeightGradEngine,
    dw: &mut [f32],
    x: &[f32],
    [n, c, h, w]: [usize; 4],
    grad: &[f32],
    [out, kh, kw]: [usize; 3],
    padding: [usize; 2],
) {
    let g = Geometry::new([c, h, w], [kh, kw], padding);
    let taps = g.taps();
    assert_eq!(
        dw.len(),
        out * c * kh * kw,
        "dw is not [{out}, {c}, {kh}, {kw}]"
    );
    assert_eq!(x.len(), n * c * h * w, "x is not [{n}, {c}, {h}, {w}]");
    let grad_shape = [n, out, g.oh, g.ow];
    assert_eq!(
        grad.len(),
        grad_shape.iter().product::<usize>(),
        "grad is not {grad_shape:?}"
    );
    if dw.is_empty() || n == 0 || h * w == 0 {
        return; // No products, or all with the zeros of the padding.
    }
    let planes = [Planes::input(x, g, n), Planes::output(grad, g, n, out)];
    WEIGHT_GRAD.with_borrow_mut(|s| {
        runs(&mut s.runs, g, n);
        let layout = Layout::new(&s.runs, g, [g.channels(), out]);
        let [c_pad, out_pad] = layout.padded;
        s.sums.clear();
        s.sums.resize(taps * c_pad * out_pad, 0.0);
        // Zeros once for the channels past `c` and the pairs past `out`, never written.
        s.rows.clear();
        s.rows.resize(c_pad * layout.a_len, 0);
        s.grid.resize(out * layout.capacity * DEPTH, 0);
        s.pairs.clear();
        s.pairs.resize(layout.capacity * ROWS * layout.b_row, 0);
        let session = match engine {
            WeightGradEngine::Tiles(amx) => Some(TileSession::start(amx)),
            WeightGradEngine::Vectors(_) => None,
        };
        // Out of the scratch while the chunks borrow it, the rest of which they fill.
        let runs = std::mem::take(&mut s.runs);
        for chunk in chunks(&runs, layout.capacity) {
            pack_chunk(engine.avx512(), s, chunk, &planes, &layout);
            match &session {
                Some(session) => multiply_chunk(session, s, &layout),
                None => multiply_chunk_vectors(engine.avx512(), s, &layout, [g.channels(), out]),
            }
        }
        s.runs = runs;
        add_transposed(dw, &s.sums, g, layout.padded);
    });
}

/// How `weight_grad` lays out its buffers for one call.
struct Layout {
    g: Geometry,
    /// `c` and `out` rounded up to whole 32×32 blocks.
    padded: [usize; 2],
    /// Steps (32 places) in a chunk, at most.
    capacity: usize,
    /// The row lengths of `rows` (bf16) and `pairs` (u32).
    a_len: usize,
    b_row: usize,
}

impl Layout {
    fn new(runs: &[Run], g: Geometry, [c, out]: [usize; 2]) -> Self {
        let padded = [c.next_multiple_of(BLOCK), out.next_multiple_of(BLOCK)];
        let all_steps = runs.iter().map(|r| r.steps).sum::<usize>();
        let capacity = all_steps.min(CHUNK / DEPTH);
        let longest = chunks(runs, capacity).map(|chunk| span(chunk, g)).max();
        Self {
            g,
            padded,
            capacity,
            a_len: odd_lines(longest.unwrap_or(0), 2),
            b_row: odd_lines(padded[1], 4),
        }
    }
}

/// The places of the tall grid that a chunk's image rows must hold: to the end of its last
/// step, plus the farthest tap.
fn span(chunk: &[Run], g: Geometry) -> usize {
    let last = chunk[chunk.len() - 1];
    last.place + last.steps * DEPTH + g.max_offset() - chunk[0].place
}

/// Packs a chunk: the image rows from its first place over its span, the gradient of its
/// runs end to end (zeros past each run's valid places) paired up along places, and the
/// offset of each step in the rows.
fn pack_chunk(
    _: Avx512Bf16,
    s: &mut WeightGradScratch,
    chunk: &[Run],
    [input, output]: &[Planes; 2],
    layout: &Layout,
) {
    let (base, span) = (chunk[0].place, span(chunk, layout.g));
    s.offsets.clear();
    for run in chunk {
        let places = (0..run.steps).map(|step| run.place - base + step * DEPTH);
        s.offsets
            .extend(places.map(|place| place * size_of::<u16>()));
    }
    let grid_len = layout.capacity * DEPTH;
    // SAFETY: `Avx512Bf16` proves AVX-512 F, BW and BF16, which these need.
    unsafe {
        let depth = s
            .rows
            .chunks_exact_mut(layout.a_len)
            .take(layout.g.channels());
        for (v, line) in depth.enumerate() {
            let (ch, shift) = layout.g.channel_source(v);
            input.fill_line(&mut line[..span], ch, base + shift);
        }
        for (o, line) in s.grid.chunks_exact_mut(grid_len).enumerate() {
            let mut at = 0;
            for run in chunk {
                output.fill_line(&mut line[at..at + run.valid], o, run.place);
                line[at + run.valid..at + run.steps * DEPTH].fill(0);
                at += run.steps * DEPTH;
            }
        }
        let shape = [output.channels, grid_len, layout.b_row];
        pair_up(&mut s.pairs, &s.grid, shape, s.offsets.len());
    }
}

/// A block's image rows (from a word, each step a byte offset further), gradient pairs (from
/// an output channel) and sums (a row stride): what [`for_each_block`] hands each block.
type BlockOperands<'a, 'b> = (
    (&'a Rows<'a, u16>, usize, &'a [usize]),
    (&'a Rows<'a, u32>, usize),
    (&'b mut [f32], usize),
);

/// Calls `block` on each block of `rows` channels × `cols` output channels × one tap of a
/// packed chunk, over the first `c` channels and `out` output channels; taps innermost, as
/// they share the gradient panel and overlapping image rows.
fn for_each_block(
    s: &mut WeightGradScratch,
    layout: &Layout,
    [c, out]: [usize; 2],
    [rows, cols]: [usize; 2],
    mut block: impl FnMut(BlockOperands),
) {
    let [c_pad, out_pad] = layout.padded;
    let a = Rows {
        data: &s.rows,
        len: layout.a_len,
    };
    let b = Rows {
        data: &s.pairs,
        len: layout.b_row,
    };
    for ch in (0..c).step_by(rows) {
        for o in (0..out).step_by(cols) {
            for (tap, sums) in s.sums.chunks_exact_mut(c_pad * out_pad).enumerate() {
                let a_start = ch * a.len + layout.g.tap_offset(tap);
                let c = (&mut sums[ch * out_pad + o..], out_pad);
                block(((&a, a_start, &s.offsets[..]), (&b, o), c));
            }
        }
    }
}

/// Adds a packed chunk's products to the sums on AMX tiles, 32 channels × 32 output channels
/// × one tap at a time (the padding to whole blocks included).
fn multiply_chunk(session: &TileSession, s: &mut WeightGradScratch, layout: &Layout) {
    let block = [BLOCK, BLOCK];
    for_each_block(s, layout, layout.padded, block, |(a, b, c)| {
        weight_grad_block(session, a, b, c)
    });
}

/// Channels (broadcast rows) in a block of [`multiply_chunk_vectors`].
const VECTOR_ROWS: usize = 8;

/// [`multiply_chunk`] on AVX-512 vectors: blocks of [`VECTOR_ROWS`] channels × 32 output
/// channels (16 for a last odd block), over only the `c` depth channels and `out` output
/// channels there are, not their padding to whole tiles.
fn multiply_chunk_vectors(
    avx512: Avx512Bf16,
    s: &mut WeightGradScratch,
    layout: &Layout,
    [c, out]: [usize; 2],
) {
    for_each_block(
        s,
        layout,
        [c, out],
        [VECTOR_ROWS, 2 * ROWS],
        |(a, (b, o), c)| {
            // SAFETY: `avx512` proves AVX-512 F and BF16.
            unsafe {
                match out - o > ROWS {
                    true => weight_grad_vectors::<2>(avx512, a, (b, o), c),
                    false => weight_grad_vectors::<1>(avx512, a, (b, o), c),
                }
            }
        },
    );
}

/// One block of `dwᵀ` for one tap on AVX-512 BF16, `c += a · b` over the depth steps:
/// [`VECTOR_ROWS`] channels (rows of `c`) × `V` vectors of 16 output channels. Per place pair,
/// each channel's pair is broadcast from its image row (a 32-bit load at any word, so odd tap
/// offsets read the same packed rows) and multiplied with the gradient's pairs of 16 output
/// channels (`b` as the B tiles take it) by `vdpbf16ps`.
#[target_feature(enable = "avx512f,avx512bf16")]
fn weight_grad_vectors<const V: usize>(
    _: Avx512Bf16,
    (a, a_start, offsets): (&Rows<u16>, usize, &[usize]),
    (b, o): (&Rows<u32>, usize),
    (c, row_stride): (&mut [f32], usize),
) {
    let steps = offsets.len();
    let farthest = a_start + offsets.iter().max().map_or(0, |&at| at / size_of::<u16>());
    assert!(farthest + (VECTOR_ROWS - 1) * a.len + DEPTH <= a.data.len());
    assert!(o + V * ROWS <= b.len && steps * ROWS * b.len <= b.data.len());
    assert!(c.len() >= (VECTOR_ROWS - 1) * row_stride + V * ROWS);
    let mut sums = [[_mm512_setzero_ps(); V]; VECTOR_ROWS];
    for (r, row) in sums.iter_mut().enumerate() {
        for (v, sum) in row.iter_mut().enumerate() {
            // SAFETY: row r's 16 floats from column 16v lie inside `c` (asserted).
            *sum = unsafe { _mm512_loadu_ps(c.as_ptr().add(r * row_stride + v * ROWS)) };
        }
    }
    for (step, &offset) in offsets.iter().enumerate() {
        let rows = a.data[a_start + offset / size_of::<u16>()..].as_ptr();
        for pair in 0..ROWS {
            let b_row = b.data[(step * ROWS + pair) * b.len + o..].as_ptr();
            // SAFETY: `V` vectors of 16 pairs from `b_row` lie inside `b` (asserted).
            let b: [__m512bh; V] = core::array::from_fn(|v| unsafe {
                core::mem::transmute(_mm512_loadu_si512(b_row.add(v * ROWS).cast()))
            });
            for (r, row) in sums.iter_mut().enumerate() {
                // SAFETY: the two words at `2 pair` of row r, inside the step's 32 (asserted).
                let a = unsafe {
                    rows.add(r * a.len + 2 * pair)
                        .cast::<i32>()
                        .read_unaligned()
                };
                // SAFETY: both are 64 bytes of plain bits.
                let a: __m512bh = unsafe { core::mem::transmute(_mm512_set1_epi32(a)) };
                for (sum, &b) in row.iter_mut().zip(&b) {
                    *sum = _mm512_dpbf16_ps(*sum, a, b);
                }
            }
        }
    }
    for (r, row) in sums.iter().enumerate() {
        for (v, sum) in row.iter().enumerate() {
            // SAFETY: as for the loads.
            unsafe { _mm512_storeu_ps(c.as_mut_ptr().add(r * row_stride + v * ROWS), *sum) };
        }
    }
}

/// A stretch of the weight gradient's depth: `steps` blocks of 32 places of the tall grid
/// from `place`, of which the first `valid` places are output places (of one image, or of
/// images that lie end to end); the gradient is zero on the rest.
#[derive(Clone, Copy, Debug)]
struct Run {
    place: usize,
    steps: usize,
    valid: usize,
}

/// Sets `runs` to the output places of the tall grid, skipping the `kh - 1` rows at the foot
/// of each image, which hold none (a quarter of the grid for 5×5 on 12×12).
fn runs(runs: &mut Vec<Run>, g: Geometry, n: usize) {
    runs.clear();
    let mut segments = (0..n)
        .map(|i| i * g.hp * g.wp)
        .map(|start| start..start + g.grid_places());
    let mut current = segments.next();
    while let Some(segment) = current {
        // Images without foot rows (kh = 1) lie end to end: one segment.
        let mut end = segment.end;
        current = segments.next();
        while let Some(next) = current.clone().filter(|next| next.start == end) {
            end = next.end;
            current = segments.next();
        }
        // A run fills at most a chunk.
        runs.extend((segment.start..end).step_by(CHUNK).map(|place| {
            let valid = (end - place).min(CHUNK);
            Run {
                place,
                steps: valid.div_ceil(DEPTH),
                valid,
            }
        }));
    }
}

/// `runs` grouped, in order, into chunks of at most `capacity` steps.
fn chunks(runs: &[Run], capacity: usize) -> impl Iterator<Item = &[Run]> {
    let mut rest = runs;
    std::iter::from_fn(move || {
        let mut steps = 0;
        let count = rest
            .iter()
            .take_while(|run| {
                steps += run.steps;
                steps <= capacity
            })
            .count();
        let (chunk, tail) = rest.split_at(count);
        rest = tail;
        (!chunk.is_empty()).then_some(chunk)
    })
}

/// `dw[o][ch][tap] += sums[t][v][o]` with `[t, v]` the depth index of `[ch][tap]`, `sums`
/// padded to `[taps][c_pad][out_pad]`.
fn add_transposed(dw: &mut [f32], sums: &[f32], g: Geometry, [c_pad, out_pad]: [usize; 2]) {
    let taps = g.kh * g.kw;
    for (o, dw) in dw.chunks_exact_mut(g.c * taps).enumerate() {
        for (ch, dw) in dw.chunks_exact_mut(taps).enumerate() {
            for (tap, dw) in dw.iter_mut().enumerate() {
                let [t, v] = g.depth_index(ch, tap);
                *dw += sums[(t * c_pad + v) * out_pad + o];
            }
        }
    }
}

/// The planes of one NCHW tensor placed on the tall grid: plane `(i, ch)` row `r` column `col`
/// lands on grid place `(i·hp + top + r)·wp + left + col`.
struct Planes<'a> {
    data: &'a [f32],
    images: usize,
    channels: usize,
    rows: usize,
    cols: usize,
    top: usize,
    left: usize,
    g: Geometry,
}

impl<'a> Planes<'a> {
    /// `x`, inside its padding.
    fn input(x: &'a [f32], g: Geometry, images: usize) -> Self {
        Self {
            data: x,
            images,
            channels: g.c,
            rows: g.h,
            cols: g.w,
            top: g.ph,
            left: g.pw,
            g,
        }
    }

    /// The output gradient, at the top left of each image's grid.
    fn output(grad: &'a [f32], g: Geometry, images: usize, channels: usize) -> Self {
        Self {
            data: grad,
            images,
            channels,
            rows: g.oh,
            cols: g.ow,
            top: 0,
            left: 0,
            g,
        }
    }

    /// `line[j]` = channel `ch` at grid place `start + j` in bf16, zero where the grid has no
    /// value of it.
    #[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
    fn fill_line(&self, line: &mut [u16], ch: usize, start: usize) {
        line.fill(0);
        let (wp, grid_plane, size) = (self.g.wp, self.g.hp * self.g.wp, self.rows * self.cols);
        let end = start + line.len();
        for i in start / grid_plane..end.div_ceil(grid_plane).min(self.images) {
            // The grid place of the plane's first value, and the plane rows the line reaches.
            let origin = i * grid_plane + self.top * wp + self.left;
            let first = start.saturating_sub(origin) / wp;
            let last = end.saturating_sub(origin).div_ceil(wp).min(self.rows);
            if first >= last {
                continue;
            }
            let plane = &self.data[(i * self.channels + ch) * size..][..size];
            // The rows the next chunk will read from this plane, into L2: a chunk reads every
            // channel's plane in turn, far more streams than the hardware prefetcher follows.
            let next = last * self.cols..((2 * last - first) * self.cols).min(size);
            prefetch::<_MM_HINT_T1>(plane, next);
            let mut copy = |values: core::ops::Range<usize>, at: usize| {
                // `plane[values]` lands on the places `at ..`; keep what lies in the line.
                let (lo, hi) = (at.max(start), (at + values.len()).min(end));
                if lo < hi {
                    let src = &plane[values.start + lo - at..values.start + hi - at];
                    convert(&mut line[lo - start..hi - start], src);
                }
            };
            if self.cols == wp {
                // Rows as wide as the grid lie end to end on it: one run, not one per row.
                copy(first * wp..last * wp, origin + first * wp);
            } else {
                for row in first..last {
                    copy(row * self.cols..(row + 1) * self.cols, origin + row * wp);
                }
            }
        }
    }
}

/// `dst` = `src` rounded to bf16 (as the tiles' packers round).
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
fn convert(dst: &mut [u16], src: &[f32]) {
    assert_eq!(dst.len(), src.len());
    for (dst, src) in dst.chunks_mut(DEPTH).zip(src.chunks(DEPTH)) {
        // SAFETY: the features are enabled here; `src` has `src.len()` floats to read, and the
        // store writes only the first `src.len()` (at most 32) words of `dst`, as long.
        unsafe {
            let words = load_bf16_run(src.as_ptr(), src.len());
            let mask = (u64::MAX >> (64 - src.len())) as __mmask32;
            _mm512_mask_storeu_epi16(dst.as_mut_ptr().cast(), mask, words);
        }
    }
}

/// `pairs[j][o]` (rows of `b_row`) = the bf16 pair `(grid[o][2j], grid[o][2j + 1])` for the
/// first `steps` blocks of 32 places, zero for `o >= out`: the gradient transposed into VNNI
/// pairs along places, as B tiles take it.
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
fn pair_up(pairs: &mut [u32], grid: &[u16], [out, chunk, b_row]: [usize; 3], steps: usize) {
    assert!(grid.len() == out * chunk && steps * DEPTH <= chunk);
    assert!(b_row >= out && pairs.len() >= steps * ROWS * b_row);
    for o in (0..out).step_by(ROWS) {
        for place in (0..steps * DEPTH).step_by(DEPTH) {
            // SAFETY: row `o + r < out` of `grid` holds `chunk` words, of which 32 are read
            // from `place`, a multiple of 32 below `chunk`.
            let lines: [__m512i; ROWS] = core::array::from_fn(|r| unsafe {
                if o + r < out {
                    _mm512_loadu_si512(grid.as_ptr().add((o + r) * chunk + place).cast())
                } else {
                    _mm512_setzero_si512()
                }
            });
            for (j, column) in transpose(lines).into_iter().enumerate() {
                let at = (place / 2 + j) * b_row + o;
                let lanes = lane_mask(out - o);
                // SAFETY: row `place / 2 + j < chunk / 2` of `pairs` has `b_row >= out` words,
                // of which those of `o ..` below `out` are written.
                unsafe {
                    _mm512_mask_storeu_epi32(pairs.as_mut_ptr().add(at).cast(), lanes, column)
                };
            }
        }
    }
}

/// A row-major matrix of rows `len` elements apart.
struct Rows<'a, T> {
    data: &'a [T],
    len: usize,
}

/// One 32×32 block of `dwᵀ` for one tap, `c += a · b` over the depth steps: C tiles in tmm0–3
/// (rows input channels, columns output channels); the image rows from `a.data[a_start ..]`,
/// step `s` at byte offset `offsets[s]` further, in tmm4–5; the gradient pairs at output
/// channels `o ..`, 16 pair rows a step, in tmm6–7.
fn weight_grad_block(
    _tiles: &TileSession,
    (a, a_start, offsets): (&Rows<u16>, usize, &[usize]),
    (b, o): (&Rows<u32>, usize),
    (c, row_stride): (&mut [f32], usize),
) {
    let steps = offsets.len();
    assert!(steps > 0);
    let farthest = a_start + offsets.iter().max().unwrap() / size_of::<u16>();
    assert!(farthest + (2 * ROWS - 1) * a.len + DEPTH <= a.data.len());
    assert!(o + 2 * ROWS <= b.len && (steps * ROWS - 1) * b.len + o + 2 * ROWS <= b.data.len());
    assert!(row_stride >= BLOCK && c.len() >= (BLOCK - 1) * row_stride + BLOCK);
    let c_halves = [c.as_mut_ptr(), c[ROWS * row_stride..].as_mut_ptr()];
    // SAFETY: the session configured tmm0–7 as 16 rows × 64 bytes. A tile `s` of tmm4 reads
    // rows `0..16` (tmm5: `16..32`) of `a` at words `a_start + offsets[s] / 2 ..+ 32`, B tile
    // `s` pair rows `16 s ..+ 16` at words `o ..+ 32`, all inside the slices (asserted); the
    // C tiles read and write 32 rows of 128 bytes, `row_stride` floats apart, inside `c`
    // (asserted), from the two row halves in `c_halves`.
    unsafe {
        asm!(
            "mov {a0}, [{c}]",
            "tileloadd tmm0, [{a0} + {c_stride}]",
            "tileloadd tmm1, [{a0} + {c_stride} + 64]",
            "mov {a0}, [{c} + 8]",
            "tileloadd tmm2, [{a0} + {c_stride}]",
            "tileloadd tmm3, [{a0} + {c_stride} + 64]",
            "2:",
            "mov {a0}, {a}",
            "add {a0}, [{offsets}]",
            "lea {a1}, [{a0} + {a_half}]",
            "tileloadd tmm4, [{a0} + {a_stride}]",
            "tileloadd tmm6, [{b0} + {b_stride}]",
            "tdpbf16ps tmm0, tmm4, tmm6",
            "tileloadd tmm7, [{b0} + {b_stride} + 64]",
            "tdpbf16ps tmm1, tmm4, tmm7",
            "tileloadd tmm5, [{a1} + {a_stride}]",
            "tdpbf16ps tmm2, tmm5, tmm6",
            "tdpbf16ps tmm3, tmm5, tmm7",
            "add {offsets}, 8",
            "add {b0}, {b_step}",
            "dec {count}",
            "jnz 2b",
            "mov {a0}, [{c}]",
            "tilestored [{a0} + {c_stride}], tmm0",
            "tilestored [{a0} + {c_stride} + 64], tmm1",
            "mov {a0}, [{c} + 8]",
            "tilestored [{a0} + {c_stride}], tmm2",
            "tilestored [{a0} + {c_stride} + 64], tmm3",
            a = in(reg) a.data.as_ptr().add(a_start),
            a_half = in(reg) ROWS * a.len * size_of::<u16>(),
            offsets = inout(reg) offsets.as_ptr() => _,
            b0 = inout(reg) b.data.as_ptr().add(o) => _,
            count = inout(reg) steps => _,
            a_stride = in(reg) a.len * size_of::<u16>(),
            b_stride = in(reg) b.len * size_of::<u32>(),
            b_step = in(reg) ROWS * b.len * size_of::<u32>(),
            c = in(reg) c_halves.as_ptr(),
            c_stride = in(reg) row_stride * size_of::<f32>(),
            a0 = out(reg) _,
            a1 = out(reg) _,
            options(nostack),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::bf16_gemm::{
        PackedLhs, Strided, amx_available, multiply_bf16, round_to_bf16,
    };
    use super::*;

    use crate::test_util::random_values as random;

    /// One convolution to test: `c → out` channels, kernel, padding, image, batch.
    #[derive(Clone, Copy, Debug)]
    struct Case {
        c: usize,
        out: usize,
        kernel: [usize; 2],
        padding: [usize; 2],
        image: [usize; 2],
        n: usize,
    }

    const fn case(
        c: usize,
        out: usize,
        kernel: [usize; 2],
        padding: [usize; 2],
        image: [usize; 2],
        n: usize,
    ) -> Case {
        Case {
            c,
            out,
            kernel,
            padding,
            image,
            n,
        }
    }

    const CASES: [Case; 16] = [
        case(64, 64, [5, 5], [2, 2], [12, 12], 3), // CIFAR conv2
        case(3, 64, [5, 5], [2, 2], [24, 24], 2),  // CIFAR conv1
        case(48, 64, [3, 3], [1, 1], [35, 35], 1), // Inception 3x3
        case(40, 48, [1, 7], [0, 3], [17, 17], 2), // Inception 1x7
        case(40, 48, [7, 1], [3, 0], [17, 17], 1), // Inception 7x1
        case(70, 40, [1, 1], [0, 0], [13, 13], 2), // 1x1, edge blocks
        case(96, 64, [1, 1], [0, 0], [8, 8], 2),   // 1x1, whole blocks straight to y
        case(5, 17, [3, 3], [1, 1], [9, 11], 2),   // odd sizes
        case(33, 31, [3, 3], [0, 0], [10, 10], 2), // no padding
        case(4, 3, [5, 5], [1, 1], [3, 3], 2),     // the kernel fills the padded image
        case(2, 5, [3, 4], [0, 0], [3, 4], 1),     // ... and the unpadded one
        case(8, 16, [3, 3], [1, 1], [40, 60], 2),  // several weight-gradient chunks
        case(31, 20, [3, 3], [1, 1], [9, 7], 2),   // unfolded, odd channels
        case(63, 33, [2, 2], [1, 0], [6, 5], 2),   // unfolded, even kernel
        case(1, 1, [1, 1], [0, 0], [1, 1], 1),
        case(7, 9, [2, 3], [2, 1], [1, 1], 3), // more padding than image
    ];

    impl Case {
        fn out_size(&self) -> [usize; 2] {
            let [[kh, kw], [ph, pw], [h, w]] = [self.kernel, self.padding, self.image];
            [h + 2 * ph - kh + 1, w + 2 * pw - kw + 1]
        }

        fn shape(&self) -> [usize; 4] {
            [self.n, self.c, self.image[0], self.image[1]]
        }

        fn weight_shape(&self) -> [usize; 4] {
            [self.out, self.c, self.kernel[0], self.kernel[1]]
        }

        /// `x[i][ch][row][col]` of the padded image, rounded to bf16.
        fn padded(&self, x: &[f32], [i, ch, row, col]: [usize; 4]) -> f64 {
            let [[ph, pw], [h, w]] = [self.padding, self.image];
            let (Some(row), Some(col)) = (row.checked_sub(ph), col.checked_sub(pw)) else {
                return 0.0;
            };
            if row >= h || col >= w {
                return 0.0;
            }
            f64::from(round_to_bf16(x[((i * self.c + ch) * h + row) * w + col]))
        }

        /// Calls `f(output index, weight index, x index (padded, as for `padded`), y index)`
        /// for every product of the convolution.
        fn for_each_product(&self, mut f: impl FnMut([usize; 4], usize, usize)) {
            let [[kh, kw], [oh, ow]] = [self.kernel, self.out_size()];
            for i in 0..self.n {
                for o in 0..self.out {
                    for oy in 0..oh {
                        for ox in 0..ow {
                            let y = ((i * self.out + o) * oh + oy) * ow + ox;
                            for ch in 0..self.c {
                                for ky in 0..kh {
                                    for kx in 0..kw {
                                        let weight = ((o * self.c + ch) * kh + ky) * kw + kx;
                                        f([i, ch, oy + ky, ox + kx], weight, y);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }

        /// The forward output of the bf16-rounded operands in f64, and the sums of |products|.
        fn forward_reference(&self, x: &[f32], weight: &[f32]) -> (Vec<f64>, Vec<f64>) {
            let [oh, ow] = self.out_size();
            let mut value = vec![0.0; self.n * self.out * oh * ow];
            let mut magnitude = value.clone();
            self.for_each_product(|at, w, y| {
                let product = self.padded(x, at) * f64::from(round_to_bf16(weight[w]));
                value[y] += product;
                magnitude[y] += product.abs();
            });
            (value, magnitude)
        }

        /// The weight gradient of the bf16-rounded operands in f64, and the sums of |products|.
        fn weight_grad_reference(&self, x: &[f32], grad: &[f32]) -> (Vec<f64>, Vec<f64>) {
            let mut value = vec![0.0; self.weight_shape().iter().product::<usize>()];
            let mut magnitude = value.clone();
            self.for_each_product(|at, w, y| {
                let product = self.padded(x, at) * f64::from(round_to_bf16(grad[y]));
                value[w] += product;
                magnitude[w] += product.abs();
            });
            (value, magnitude)
        }

        /// The windows `[c·kh·kw, oh·ow]` of image `i` (f32, not rounded).
        fn im2col(&self, x: &[f32], i: usize) -> Vec<f32> {
            let [[ph, pw], [h, w], [kh, kw], [oh, ow]] =
                [self.padding, self.image, self.kernel, self.out_size()];
            let mut windows = Vec::with_capacity(self.c * kh * kw * oh * ow);
            for ch in 0..self.c {
                for ky in 0..kh {
                    for kx in 0..kw {
                        for oy in 0..oh {
                            for ox in 0..ow {
                                let (row, col) =
                                    ((oy + ky).wrapping_sub(ph), (ox + kx).wrapping_sub(pw));
                                windows.push(if row < h && col < w {
                                    x[((i * self.c + ch) * h + row) * w + col]
                                } else {
                                    0.0
                                });
                            }
                        }
                    }
                }
            }
            windows
        }
    }

    /// Error allowed, relative to the sum of |products|, as in `bf16_gemm`.
    const TOLERANCE: f64 = 1e-6;

    fn assert_close(got: &[f32], want: &[f64], magnitude: &[f64], what: &str) {
        assert_eq!(got.len(), want.len(), "{what}");
        for (index, ((&got, &want), &magnitude)) in got.iter().zip(want).zip(magnitude).enumerate()
        {
            let error = (f64::from(got) - want).abs();
            assert!(
                error <= TOLERANCE * magnitude,
                "{what}: element {index} is {got}, want {want} (error {error:e}, Σ|p| {magnitude:e})"
            );
        }
    }

    fn has_amx() -> bool {
        if !amx_available() {
            println!("note: AMX unavailable here, the direct convolution is not tested");
        }
        amx_available()
    }

    fn forward_of(case: &Case, x: &[f32], weight: &[f32]) -> Vec<f32> {
        let [oh, ow] = case.out_size();
        let kernel = PackedKernel::new(weight, case.weight_shape());
        let mut y = vec![f32::NAN; case.n * case.out * oh * ow];
        forward(&mut y, x, case.shape(), &kernel, case.padding);
        y
    }

    #[test]
    fn cases_cover_both_depth_layouts() {
        let folded = |case: &&Case| folds(case.c, case.kernel[1]);
        assert!(CASES.iter().any(|case| folded(&case)));
        let unfolded = CASES.iter().filter(|case| !folded(case));
        assert!(
            unfolded
                .filter(|case| case.kernel[1] > 1)
                .any(|case| case.c % 32 != 0)
        );
    }

    #[test]
    fn forward_matches_the_f64_reference() {
        if !has_amx() {
            return;
        }
        for (seed, case) in CASES.iter().enumerate() {
            let x = random(case.shape().iter().product::<usize>(), 2 * seed as u64);
            let weight = random(
                case.weight_shape().iter().product::<usize>(),
                2 * seed as u64 + 1,
            );
            let (want, magnitude) = case.forward_reference(&x, &weight);
            let y = forward_of(case, &x, &weight);
            assert_close(&y, &want, &magnitude, &format!("forward {case:?}"));
        }
    }

    /// The weight gradient's engines that run here: AMX tiles, AVX-512 vectors.
    fn weight_grad_engines() -> Vec<WeightGradEngine> {
        let tiles = Amx::get().map(WeightGradEngine::Tiles);
        let vectors = Avx512Bf16::get().map(WeightGradEngine::Vectors);
        let engines: Vec<_> = [tiles, vectors].into_iter().flatten().collect();
        if engines.is_empty() {
            println!("note: no AVX-512 BF16 here, the direct weight gradient is not tested");
        }
        engines
    }

    #[test]
    fn weight_grad_matches_the_f64_reference() {
        for engine in weight_grad_engines() {
            weight_grad_on_matches_the_f64_reference(engine);
        }
    }

    fn weight_grad_on_matches_the_f64_reference(engine: WeightGradEngine) {
        for (seed, case) in CASES.iter().enumerate() {
            let [oh, ow] = case.out_size();
            let x = random(case.shape().iter().product::<usize>(), 3 * seed as u64);
            let grad = random(case.n * case.out * oh * ow, 3 * seed as u64 + 1);
            let before = random(
                case.weight_shape().iter().product::<usize>(),
                3 * seed as u64 + 2,
            );
            let (sum, magnitude) = case.weight_grad_reference(&x, &grad);
            let want: Vec<f64> = sum
                .iter()
                .zip(&before)
                .map(|(s, &b)| s + f64::from(b))
                .collect();
            let magnitude: Vec<f64> = magnitude
                .iter()
                .zip(&before)
                .map(|(m, &b)| m + f64::from(b).abs())
                .collect();
            let mut dw = before.clone();
            let [kh, kw] = case.kernel;
            weight_grad_on(
                engine,
                &mut dw,
                &x,
                case.shape(),
                &grad,
                [case.out, kh, kw],
                case.padding,
            );
            assert_close(&dw, &want, &magnitude, &format!("weight gradient {case:?}"));
        }
    }

    #[test]
    fn forward_agrees_with_im2col_and_multiply_bf16() {
        if !has_amx() {
            return;
        }
        for (seed, case) in CASES.iter().enumerate() {
            let [[kh, kw], [oh, ow]] = [case.kernel, case.out_size()];
            let (taps, places) = (case.c * kh * kw, oh * ow);
            let x = random(case.shape().iter().product::<usize>(), 5 * seed as u64);
            let weight = random(
                case.weight_shape().iter().product::<usize>(),
                5 * seed as u64 + 1,
            );
            let lhs = Strided::row_major(&weight, taps);
            let packed = PackedLhs::new(case.out, taps, lhs);
            let direct = forward_of(case, &x, &weight);
            for (i, direct) in direct.chunks_exact(case.out * places).enumerate() {
                let windows = case.im2col(&x, i);
                let mut want = vec![f32::NAN; case.out * places];
                let rhs = Strided::row_major(&windows, places);
                multiply_bf16(&mut want, &packed, rhs, places, false);
                // Only the order of the f32 sums differs: compare within its error bound.
                let windows: Vec<f32> = windows.iter().map(|&x| round_to_bf16(x).abs()).collect();
                let weights: Vec<f32> = weight.iter().map(|&w| round_to_bf16(w).abs()).collect();
                let mut magnitude = vec![0.0; case.out * places];
                let rhs = Strided::row_major(&windows, places);
                let abs = PackedLhs::new(
                    case.out,
                    taps,
                    Strided {
                        data: &weights,
                        ..lhs
                    },
                );
                multiply_bf16(&mut magnitude, &abs, rhs, places, false);
                let want: Vec<f64> = want.into_iter().map(f64::from).collect();
                let magnitude: Vec<f64> = magnitude.into_iter().map(f64::from).collect();
                assert_close(
                    direct,
                    &want,
                    &magnitude,
                    &format!("against im2col, {case:?}"),
                );
            }
        }
    }

    #[test]
    fn empty_batches_and_channels() {
        if !has_amx() {
            return;
        }
        let kernel = PackedKernel::new(&random(3 * 4 * 9, 1), [3, 4, 3, 3]);
        forward(&mut [], &[], [0, 4, 5, 5], &kernel, [1, 1]);
        let mut dw = vec![2.0; 3 * 4 * 9];
        weight_grad(&mut dw, &[], [0, 4, 5, 5], &[], [3, 3, 3], [1, 1]);
        assert_eq!(dw, vec![2.0; 3 * 4 * 9]);
        // No channels: the outputs are zero.
        let kernel = PackedKernel::new(&[], [3, 0, 3, 3]);
        let mut y = vec![f32::NAN; 2 * 3 * 25];
        forward(&mut y, &[], [2, 0, 5, 5], &kernel, [1, 1]);
        assert_eq!(y, vec![0.0; 2 * 3 * 25]);
        weight_grad(
            &mut [],
            &[],
            [2, 0, 5, 5],
            &random(2 * 3 * 25, 2),
            [3, 3, 3],
            [1, 1],
        );
        // An empty image inside its padding: zeros out, nothing in.
        for c in [3, 32] {
            let weight = random(5 * c * 9, 3);
            let kernel = PackedKernel::new(&weight, [5, c, 3, 3]);
            let mut y = vec![f32::NAN; 2 * 5 * 2 * 4];
            forward(&mut y, &[], [2, c, 0, 4], &kernel, [2, 1]);
            assert_eq!(y, vec![0.0; 2 * 5 * 2 * 4]);
            let mut dw = weight.clone();
            weight_grad(&mut dw, &[], [2, c, 0, 4], &y, [5, 3, 3], [2, 1]);
            assert_eq!(dw, weight);
        }
    }

    #[test]
    fn one_thread_serves_changing_shapes() {
        if !has_amx() {
            return;
        }
        // The scratch grows and shrinks between calls: no stale values may leak.
        for (seed, case) in CASES.iter().chain(CASES.iter().rev()).enumerate() {
            let x = random(case.shape().iter().product::<usize>(), 7 * seed as u64);
            let weight = random(
                case.weight_shape().iter().product::<usize>(),
                7 * seed as u64 + 1,
            );
            let (want, magnitude) = case.forward_reference(&x, &weight);
            assert_close(
                &forward_of(case, &x, &weight),
                &want,
                &magnitude,
                &format!("{case:?}"),
            );
        }
    }

    #[test]
    #[should_panic(expected = "does not fit")]
    fn kernel_larger_than_the_padded_image_panics() {
        if !amx_available() {
            panic!("does not fit (AMX unavailable, nothing to test)");
        }
        let kernel = PackedKernel::new(&random(9, 1), [1, 1, 3, 3]);
        forward(&mut [0.0; 1], &random(4, 2), [1, 1, 2, 2], &kernel, [0, 0]);
    }
}
