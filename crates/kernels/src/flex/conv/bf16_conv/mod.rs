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

use crate::flex::gemm::bf16_gemm::amx::{
    Amx, Avx512Bf16, BLOCK, Block, DEPTH, ROWS, Tile, TileSession, ZERO_TILE, interleave_bf16,
    lane_mask, rounded_bits, store_bf16_run, transpose,
};
use crate::flex::gemm::bf16_gemm::kernel;
use crate::flex::memory::pixels::Pixels;
use crate::precision::Bf16Kernel;
use core::arch::asm;
use core::arch::x86_64::*;
use rayon::prelude::*;
use std::cell::RefCell;
use std::ops::Range;

#[cfg(test)]
mod tests;
mod weight_grad;

pub(crate) use weight_grad::{WeightGradEngine, weight_grad, weight_grad_pays_off};

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
        let bits = rounded_bits(weight);
        Self::from_blocks([out, c, kh, kw], |tiles, outs| {
            for o in outs {
                for ch in 0..c {
                    for tap in 0..taps {
                        tiles.put(o, ch, tap, bits[(o * c + ch) * taps + tap]);
                    }
                }
            }
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
        let bits = rounded_bits(weight);
        // Read in runs of the weight's own order (a read per element strided by `c·taps` was
        // 4.5% of Inception's step): a block's inputs `i` lie side by side in each row `o`.
        Self::from_blocks([c, out, kh, kw], |tiles, inputs| {
            for o in 0..out {
                for i in inputs.clone() {
                    let first = (o * c + i) * taps;
                    for (tap, &value) in bits[first..first + taps].iter().enumerate() {
                        tiles.put(i, o, taps - 1 - tap, value);
                    }
                }
            }
        })
    }

    /// The kernel `[out, c, kh, kw]`, its tiles filled a block of 16 output channels at a time
    /// on rayon's threads (on the calling thread, one value at a time, they were a serial share
    /// of every step that grows with the cores): `fill(tiles, outs)` puts the elements of
    /// output channels `outs` into `tiles`, which holds that block's; those it leaves are zero.
    fn from_blocks(
        [out, c, kh, kw]: [usize; 4],
        fill: impl Fn(&mut KernelTiles, Range<usize>) + Sync,
    ) -> Self {
        // The geometry of the smallest image the kernel fits: its depth layout is that of all.
        let g = Geometry::new([c, kh, kw], [kh, kw], [0, 0]);
        let (depth_blocks, depth_taps) = (g.channels().div_ceil(DEPTH), g.taps());
        let steps = depth_taps * depth_blocks;
        let mut tiles = vec![ZERO_TILE; out.div_ceil(BLOCK) * 2 * steps];
        tiles
            .par_chunks_mut(steps.max(1))
            .enumerate()
            .for_each(|(block, tiles)| {
                let first = block * ROWS;
                let mut tiles = KernelTiles {
                    tiles,
                    first,
                    g,
                    depth_blocks,
                };
                fill(&mut tiles, first.min(out)..(first + ROWS).min(out));
            });
        Self {
            out,
            c,
            kh,
            kw,
            tiles,
        }
    }
}

/// The tiles of one block of 16 output channels of a [`PackedKernel`] while they are filled.
struct KernelTiles<'a> {
    tiles: &'a mut [Tile],
    /// The block's first output channel.
    first: usize,
    g: Geometry,
    depth_blocks: usize,
}

impl KernelTiles<'_> {
    /// Element `(o, ch, tap)` (`tap` row-major `ky·kw + kx`, `o` in the block) as bf16 `bits`.
    fn put(&mut self, o: usize, ch: usize, tap: usize, bits: u16) {
        let [tap_index, v] = self.g.depth_index(ch, tap);
        let tile = tap_index * self.depth_blocks + v / DEPTH;
        self.tiles[tile].0[(o - self.first) * DEPTH + v % DEPTH] = bits;
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
                let x = Pixels::F32(x);
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
    x: Pixels,
    [c, h, w]: [usize; 3],
    (first, wp, len): (usize, usize, usize),
) {
    let plane = h * w;
    for pair in 0..c.div_ceil(2) {
        let even = x.slice(2 * pair * plane..(2 * pair + 1) * plane);
        let odd =
            (2 * pair + 1 < c).then(|| x.slice((2 * pair + 1) * plane..(2 * pair + 2) * plane));
        for row in 0..h {
            let dst = &mut image[pair * len + first + row * wp..][..w];
            let ahead = (row + PREFETCH_ROWS) * w..(row + PREFETCH_ROWS + 1) * w;
            for plane in [Some(even), odd].into_iter().flatten() {
                plane.prefetch::<_MM_HINT_T0>(ahead.clone());
            }
            let row = row * w..(row + 1) * w;
            let odd = odd.map(|odd| odd.slice(row.clone()));
            match even.slice(row) {
                Pixels::F32(even) => interleave_row(avx, dst, even, odd.map(Pixels::f32)),
                Pixels::Bf16(even) => interleave_bits_row(avx, dst, even, odd.map(Pixels::bf16)),
            }
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

/// [`interleave_row`] of values already rounded to bf16 (their bit patterns).
fn interleave_bits_row(_: Avx512Bf16, dst: &mut [u32], even: &[u16], odd: Option<&[u16]>) {
    assert!(even.len() == dst.len() && odd.is_none_or(|odd| odd.len() == dst.len()));
    // SAFETY: `Avx512Bf16` proves AVX-512 F and BW.
    unsafe { interleave_bits_avx512(dst, even, odd) }
}

/// [`interleave_bits_row`], vectorized by the compiler.
#[target_feature(enable = "avx512f,avx512bw")]
fn interleave_bits_avx512(dst: &mut [u32], even: &[u16], odd: Option<&[u16]>) {
    match odd {
        Some(odd) => {
            for ((dst, &even), &odd) in dst.iter_mut().zip(even).zip(odd) {
                *dst = u32::from(even) | u32::from(odd) << 16;
            }
        }
        None => {
            for (dst, &even) in dst.iter_mut().zip(even) {
                *dst = u32::from(even);
            }
        }
    }
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
