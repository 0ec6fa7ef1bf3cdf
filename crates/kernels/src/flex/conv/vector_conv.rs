//! Stride-1 convolutions on AVX-512 vectors without windows (no im2col): products in f32 by
//! FMA, or in bf16 by `vdpbf16ps` on pairs of channels.
//!
//! As in [`crate::flex::conv::bf16_conv`] (the same idea on AMX tiles), the image is padded once and the
//! outputs are computed on the padded-width grid: output place `q = oy·wp + ox` (`wp` the padded
//! width) reads padded place `q + ky·wp + kx` at tap `(ky, kx)`, so 16 consecutive places of one
//! tap are one unaligned load of the padded image, with no copy per tap. A block of 8 output
//! channels × 48 places stays in 24 registers while the channels and taps stream through it:
//! each step loads three vectors of the image and broadcasts 8 kernel values into 24
//! multiply-adds. The price is the `kw - 1` columns past each row's end, computed and dropped.
//!
//! In bf16 a step takes two channels: the image is packed as pairs (channels `2p` and `2p + 1`
//! of a place side by side in 32 bits), the kernel likewise, and `vdpbf16ps` multiplies and adds
//! both. Operands are rounded to bf16 as the other bf16 paths round them (to nearest even,
//! subnormals flushed) and products are summed in f32, so results match theirs up to the order
//! of the sums.
//!
//! Measured in bench/HISTORY.md ("Mixed precision against TensorFlow", AMD EPYC): the windows
//! (im2col) and gemm's packing of them were a fifth of Inception v3's step; without them the
//! bf16 step went from 102–107 to 91 ms per image, and vectorizing along the outputs on narrow
//! images took the CIFAR-10 net's conv2 from 33 to 28 ms forward and backward.

use core::arch::x86_64::*;
use std::cell::RefCell;
use std::mem::MaybeUninit;
use std::sync::OnceLock;

use crate::flex::conv::bf16_conv::pack_pairs;
use crate::flex::gemm::bf16_gemm::amx::{Avx512Bf16, rounded_bits};
use crate::flex::gemm::bf16_gemm::{Strided, turned_off};
use crate::flex::gemm::transpose::transpose;
use crate::flex::memory::buffers::{written, zeroed, zeroed_chunks};
use crate::flex::memory::pixels::Pixels;

/// Output channels in a block: 8 broadcasts per step.
const MR: usize = 8;
/// Places in a block: three vectors of 16.
const NR: usize = 48;
/// Output channels whose kernel slice stays in cache while blocks of places pass.
const OUT_CHUNK: usize = 64;
/// Depth (channels, or pairs of them) summed per pass over the output: with the taps, the
/// kernel slice and the image rows of a block stay in L2.
const DEPTH_CHUNK: usize = 64;

/// What one step of a block multiplies.
#[derive(Clone, Copy)]
enum Lanes {
    /// One channel per step, f32 products (FMA).
    F32(Avx512F),
    /// Two channels per step, bf16 products summed in f32 (`vdpbf16ps`).
    Bf16Pairs(Avx512Bf16),
}

/// Proof that the CPU has AVX-512 F: only [`Avx512F::get`] makes one.
#[derive(Clone, Copy)]
struct Avx512F(());

impl Avx512F {
    fn get() -> Option<Self> {
        is_x86_feature_detected!("avx512f").then_some(Self(()))
    }
}

/// Whether this module runs stride-1 convolutions here, in f32 (`bf16 == false`) or in bf16:
/// the CPU has AVX-512 (and AVX-512 BF16 for bf16) and `TOWERS_NO_DIRECT_CONV` is not set.
pub(crate) fn available(bf16: bool) -> bool {
    static OFF: OnceLock<bool> = OnceLock::new();
    let off = *OFF.get_or_init(|| turned_off("TOWERS_NO_DIRECT_CONV"));
    !off && lanes(bf16).is_some()
}

fn lanes(bf16: bool) -> Option<Lanes> {
    match bf16 {
        false => Avx512F::get().map(Lanes::F32),
        true => Avx512Bf16::get().map(Lanes::Bf16Pairs),
    }
}

/// A kernel `[out, c, kh, kw]` laid out for [`forward`] on images of one size, as its
/// [`Layout`] says; values are f32 bits or bf16 pairs (the even channel in the low half), zeros
/// past `out` and `c`.
pub(crate) struct PackedKernel {
    out: usize,
    c: usize,
    kh: usize,
    kw: usize,
    lanes: Lanes,
    layout: Layout,
    /// The grid of the images the layout was chosen for.
    grid: Grid,
    data: Vec<u32>,
}

/// Which way [`forward`] vectorizes, and so how the kernel is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// Along places on the padded-width grid: blocks of 8 output channels, each
    /// `[depth][tap][8]` (depth: channels, or pairs of them in bf16).
    Grid,
    /// Along output channels, 16 to a vector, for images whose grid would waste much (its
    /// dropped columns, its last partial block): `[depth][tap][out rounded up to 16]`.
    Channels,
}

impl Layout {
    /// Channels where the grid computes over 10% more places than the image has outputs and
    /// the outputs fill whole vectors.
    fn for_image(g: &Grid, out: usize) -> Self {
        let waste = g.places as f64 / (g.oh * g.ow).max(1) as f64;
        match waste > 1.1 && out.is_multiple_of(16) {
            true => Layout::Channels,
            false => Layout::Grid,
        }
    }
}

impl PackedKernel {
    /// The kernel of `weight` (`[out, c, kh, kw]`, row-major), in bf16 pairs or in f32, for
    /// images of `[h, w]` with zero `padding`; `None` where the CPU lacks the instructions.
    pub(crate) fn new(
        weight: &[f32],
        dims: [usize; 4],
        bf16: bool,
        image: ([usize; 2], [usize; 2]),
    ) -> Option<Self> {
        let [_, c, kh, kw] = dims;
        let taps = kh * kw;
        let kernel = Self::gathered(weight, dims, lanes(bf16)?, image, |o, ch, tap| {
            (o * c + ch) * taps + tap
        });
        Some(kernel)
    }

    /// The kernel of the input gradient of a stride-1 convolution by `weight` (`[out, c, kh,
    /// kw]`): inputs and outputs swapped and the window flipped both ways, `[c, out, kh, kw]`,
    /// packed straight from `weight`; for output gradients of `[h, w]` padded by `padding`.
    pub(crate) fn flipped_transposed(
        weight: &[f32],
        dims: [usize; 4],
        bf16: bool,
        image: ([usize; 2], [usize; 2]),
    ) -> Option<Self> {
        let [out, c, kh, kw] = dims;
        let taps = kh * kw;
        let kernel = Self::gathered(
            weight,
            [c, out, kh, kw],
            lanes(bf16)?,
            image,
            |o, ch, tap| (ch * c + o) * taps + (taps - 1 - tap),
        );
        Some(kernel)
    }

    /// A `[out, c, kh, kw]` kernel whose value at output `o`, channel `ch` and tap `tap` is
    /// `weight[source(o, ch, tap)]`, gathered on rayon's threads, each value where it lies:
    /// scattered from `weight` on the calling thread, Inception v3's kernels
    /// took ~20 ms of its training step while the other core waited.
    fn gathered(
        weight: &[f32],
        [out, c, kh, kw]: [usize; 4],
        lanes: Lanes,
        image: ([usize; 2], [usize; 2]),
        source: impl Fn(usize, usize, usize) -> usize + Sync,
    ) -> Self {
        assert_eq!(
            weight.len(),
            out * c * kh * kw,
            "weight is not {:?}",
            [out, c, kh, kw]
        );
        let grid = Grid::new(image.0, [kh, kw], image.1);
        let mut kernel = Self {
            out,
            c,
            kh,
            kw,
            lanes,
            layout: Layout::for_image(&grid, out),
            grid,
            data: Vec::new(),
        };
        let (depth, taps, rows) = (kernel.depth(), kh * kw, kernel.rows());
        // In bf16, every value rounded first (`rounded_bits`), not one by one as gathered.
        let rounded = match lanes {
            Lanes::F32(_) => Vec::new(),
            Lanes::Bf16Pairs(_) => rounded_bits(weight),
        };
        let inside = |o: usize, ch: usize| ch < c && o < out;
        // The bits at depth `d`: channel d in f32, channels 2d and 2d + 1 as a bf16 pair.
        let bits = |o: usize, d: usize, tap: usize| match lanes {
            Lanes::F32(_) if inside(o, d) => weight[source(o, d, tap)].to_bits(),
            Lanes::F32(_) => 0,
            Lanes::Bf16Pairs(_) => {
                let [even, odd] = [2 * d, 2 * d + 1].map(|ch| match inside(o, ch) {
                    true => u32::from(rounded[source(o, ch, tap)]),
                    false => 0,
                });
                even | odd << 16
            }
        };
        // A run of values per task, in loops without divisions: per value, the index arithmetic
        // took as long as the gather (~3% of Inception's bf16 step).
        let run = match kernel.layout {
            Layout::Grid => taps * MR,
            Layout::Channels => taps * rows,
        };
        kernel.data = zeroed_chunks(rows * depth * taps, run, |index, values| {
            match kernel.layout {
                // `[row block][depth][tap][MR]`: a run is one block's depth `d`.
                Layout::Grid => {
                    let (first, d) = (index / depth * MR, index % depth);
                    for (tap, values) in values.chunks_exact_mut(MR).enumerate() {
                        for (r, value) in values.iter_mut().enumerate() {
                            *value = bits(first + r, d, tap);
                        }
                    }
                }
                // `[depth][tap][rows]`: a run is depth `index`.
                Layout::Channels => {
                    for (tap, values) in values.chunks_exact_mut(rows).enumerate() {
                        for (o, value) in values.iter_mut().enumerate() {
                            *value = bits(o, index, tap);
                        }
                    }
                }
            }
        });
        kernel
    }

    /// Output channels as laid out: rounded up to whole blocks or vectors.
    fn rows(&self) -> usize {
        match self.layout {
            Layout::Grid => self.out.next_multiple_of(MR),
            Layout::Channels => self.out.next_multiple_of(16),
        }
    }

    /// Channels, or pairs of them, per place.
    fn depth(&self) -> usize {
        match self.lanes {
            Lanes::F32(_) => self.c,
            Lanes::Bf16Pairs(_) => self.c.div_ceil(2),
        }
    }
}

/// A stride-1 convolution's padded image and its grid of output places.
#[derive(Clone, Copy)]
struct Grid {
    h: usize,
    w: usize,
    ph: usize,
    pw: usize,
    /// Padded width: the grid's row length.
    wp: usize,
    oh: usize,
    ow: usize,
    /// Places computed per output channel: `oh` rows of `wp`, rounded up to whole blocks.
    places: usize,
    /// Values per depth plane of the packed image: the padded image, room for the farthest
    /// tap of the last block, zeros after.
    plane: usize,
}

impl Grid {
    fn new([h, w]: [usize; 2], [kh, kw]: [usize; 2], [ph, pw]: [usize; 2]) -> Self {
        let (hp, wp) = (h + 2 * ph, w + 2 * pw);
        assert!(
            kh <= hp && kw <= wp,
            "a {kh}×{kw} kernel does not fit a {hp}×{wp} padded image"
        );
        let (oh, ow) = (hp - kh + 1, wp - kw + 1);
        let places = (oh * wp).next_multiple_of(NR);
        let mut plane = (places + (kh - 1) * wp + kw - 1).next_multiple_of(16);
        // Planes 4 KiB apart would map a block's rows to the same cache sets.
        if plane.is_multiple_of(1024) {
            plane += 16;
        }
        Self {
            h,
            w,
            ph,
            pw,
            wp,
            oh,
            ow,
            places,
            plane,
        }
    }

    /// Where the 16 grid places from `first` land in an output plane (`oh × ow`): the lanes
    /// that are output places (not a dropped column, not past the last row) and the index of
    /// the first of them. Output places follow each other on the grid as in the plane, so
    /// those lanes, packed together in order, are the plane's values from that index on.
    fn vector(&self, first: usize) -> OutputVector {
        let valid = |q: usize| q < self.oh * self.wp && q % self.wp < self.ow;
        let lanes = (0..16)
            .filter(|&l| valid(first + l))
            .fold(0, |m, l| m | 1 << l);
        let row = (first / self.wp).min(self.oh);
        let at = row * self.ow + (first % self.wp).min(self.ow) * usize::from(row < self.oh);
        OutputVector { at, lanes }
    }

    /// [`Self::vector`] for the three vectors of each block of places, in order.
    fn block_vectors(&self) -> Vec<[OutputVector; 3]> {
        (0..self.places)
            .step_by(NR)
            .map(|block| [0, 16, 32].map(|v| self.vector(block + v)))
            .collect()
    }
}

/// Where one vector of a block's sums goes in an output plane: the lanes that are output
/// places, stored packed together (in order) from index `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct OutputVector {
    at: usize,
    lanes: __mmask16,
}

thread_local! {
    /// [`forward`]'s packed image and, for [`Layout::Channels`], its sums, kept between calls
    /// so that the steady state allocates nothing.
    static SCRATCH: RefCell<(Vec<u32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// `y` (`[n, out, oh, ow]`) = the stride-1 convolution of `x` (`[n, c, h, w]`) by the kernel
/// with zero `padding`, for n images, on the calling thread (the caller splits the batch across
/// threads); returns `y`, every value written. `y` need not be initialized: on the grid each
/// output is stored once, straight from the sums, so zeroing it first would be a pass over the
/// whole output for nothing (3–4% of Inception's bf16 convolutions).
pub(crate) fn forward<'y>(
    y: &'y mut [MaybeUninit<f32>],
    x: Pixels,
    [n, c, h, w]: [usize; 4],
    kernel: &PackedKernel,
    padding: [usize; 2],
) -> &'y mut [f32] {
    assert_eq!(c, kernel.c, "the kernel has {} channels, x {c}", kernel.c);
    let g = kernel.grid;
    let packed_for = ([g.h, g.w], [g.ph, g.pw]);
    assert_eq!(
        ([h, w], padding),
        packed_for,
        "the kernel was packed for other images"
    );
    let out = kernel.out;
    let (x_size, y_size) = (c * h * w, out * g.oh * g.ow);
    assert_eq!(x.len(), n * x_size, "x is not [{n}, {c}, {h}, {w}]");
    let dims = [n, out, g.oh, g.ow];
    assert_eq!(y.len(), n * y_size, "y is not {dims:?}");
    if y.is_empty() {
        return &mut [];
    }
    let depth = kernel.depth();
    let offsets: Vec<usize> = (0..kernel.kh * kernel.kw)
        .map(|tap| tap / kernel.kw * g.wp + tap % kernel.kw)
        .collect();
    SCRATCH.with_borrow_mut(|(image, sums)| {
        // Zeros once: each image rewrites only the inside of the padding.
        image.clear();
        image.resize(depth.max(1) * g.plane, 0);
        let places = g.oh * g.ow;
        let vectors = match kernel.layout {
            Layout::Grid => g.block_vectors(),
            Layout::Channels => {
                sums.resize(places.next_multiple_of(PLACES) * kernel.rows(), 0.0);
                Vec::new()
            }
        };
        for (i, y) in y.chunks_exact_mut(y_size).enumerate() {
            pack_image(
                image,
                x.slice(i * x_size..(i + 1) * x_size),
                c,
                g,
                kernel.lanes,
            );
            match kernel.layout {
                Layout::Grid => convolve_grid(y, image, kernel, g, (&offsets, &vectors)),
                Layout::Channels => {
                    convolve_channels(sums, image, kernel, g, &offsets);
                    transpose_sums(zeroed(y), sums, places, kernel.rows());
                }
            }
        }
    });
    // SAFETY: every image's outputs were written: on the grid by `convolve_grid` (its blocks'
    // output lanes tile each plane, `Grid::block_vectors`), else zeroed and then transposed in.
    unsafe { written(y) }
}

/// `y` (`[out][places]`) from the sums of [`Layout::Channels`] (`[places][rows]`, `rows >=
/// out`): their transpose, in 16×16 AVX-512 blocks ([`transpose`]; value by value it was 2% of
/// Inception's bf16 step).
fn transpose_sums(y: &mut [f32], sums: &[f32], places: usize, rows: usize) {
    let out = y.len() / places.max(1);
    let sums = Strided::row_major(sums, rows);
    transpose(y, &sums, [places, out]);
}

/// One image's output (`[out][oh × ow]`) from its packed image, block by block: each block's
/// sums on the grid go straight to the output places among them (`vectors`, per block of
/// places), the dropped columns never stored.
fn convolve_grid(
    y: &mut [MaybeUninit<f32>],
    image: &[u32],
    kernel: &PackedKernel,
    g: Grid,
    (offsets, vectors): (&[usize], &[[OutputVector; 3]]),
) {
    let (depth, taps) = (kernel.depth(), offsets.len());
    let (out, plane) = (kernel.out, g.oh * g.ow);
    let out_blocks = out.div_ceil(MR);
    assert!(y.len() == out * plane && image.len() >= depth * g.plane);
    assert_eq!(vectors.len(), g.places / NR);
    if depth == 0 {
        y.fill(MaybeUninit::new(0.0));
        return;
    }
    for first in (0..depth).step_by(DEPTH_CHUNK) {
        let count = (depth - first).min(DEPTH_CHUNK);
        for blocks in (0..out_blocks).step_by(OUT_CHUNK / MR) {
            for (place, &vectors) in (0..g.places).step_by(NR).zip(vectors) {
                for ob in blocks..(blocks + OUT_CHUNK / MR).min(out_blocks) {
                    let block = Block {
                        image: image[first * g.plane + place..].as_ptr(),
                        plane: g.plane,
                        depth: count,
                        offsets,
                        weights: kernel.data[(ob * depth + first) * taps * MR..].as_ptr(),
                        outputs: y[ob * MR * plane..].as_mut_ptr().cast(),
                        stride: plane,
                        rows: (out - ob * MR).min(MR),
                        vectors,
                        accumulate: first > 0,
                    };
                    // SAFETY: `lanes` proves the instructions; the block's reads stay inside
                    // `image`: depth plane `first + count - 1` at most, place `place + 47 +
                    // offset < places + max offset <= plane`; its `rows` output channels
                    // inside `y`, each vector's lanes at `at ..` inside a plane (`Grid::vector`
                    // counts only output places); its kernel values, `count · taps · 8` from
                    // the block's start, inside `kernel.data`.
                    unsafe {
                        let sums = match kernel.lanes {
                            Lanes::F32(_) => block_f32(&block),
                            Lanes::Bf16Pairs(_) => block_bf16(&block),
                        };
                        store_outputs(&block, &sums);
                    }
                }
            }
        }
    }
}

/// Places in a block of [`Layout::Channels`]: 6 broadcasts per step.
const PLACES: usize = 6;

/// The sums of every output place (`[places rounded up to 6][out rounded up to 16]`) from the
/// packed image, vectorized along the output channels: blocks of 6 places × up to 64 outputs.
fn convolve_channels(
    sums: &mut [f32],
    image: &[u32],
    kernel: &PackedKernel,
    g: Grid,
    offsets: &[usize],
) {
    let (depth, taps, rows) = (kernel.depth(), offsets.len(), kernel.rows());
    let places = (g.oh * g.ow).next_multiple_of(PLACES);
    assert!(sums.len() >= places * rows && image.len() >= depth * g.plane);
    if depth == 0 {
        sums.fill(0.0);
        return;
    }
    // Each output place's position on the grid; the last block's extra places repeat the last.
    let last = g.oh * g.ow - 1;
    let at = |q: usize| {
        let q = q.min(last);
        q / g.ow * g.wp + q % g.ow
    };
    for first in (0..depth).step_by(DEPTH_CHUNK) {
        let count = (depth - first).min(DEPTH_CHUNK);
        for o in (0..rows).step_by(64) {
            let vectors = ((rows - o) / 16).min(4);
            for q in (0..places).step_by(PLACES) {
                let block = ChannelBlock {
                    image: image[first * g.plane..].as_ptr(),
                    plane: g.plane,
                    depth: count,
                    offsets,
                    places: core::array::from_fn(|i| at(q + i)),
                    weights: kernel.data[first * taps * rows + o..].as_ptr(),
                    weight_stride: rows,
                    sums: sums[q * rows + o..].as_mut_ptr(),
                    stride: rows,
                    accumulate: first > 0,
                };
                // SAFETY: `lanes` proves the instructions; the block reads depth planes
                // `first .. first + count` at grid places plus tap offsets (inside each
                // plane), `vectors · 16 <= rows - o` kernel values per (depth, tap) row, and
                // writes 6 rows of as many sums inside `sums`.
                unsafe {
                    match (kernel.lanes, vectors) {
                        (Lanes::F32(_), 4) => channels_f32::<4>(&block),
                        (Lanes::F32(_), 3) => channels_f32::<3>(&block),
                        (Lanes::F32(_), 2) => channels_f32::<2>(&block),
                        (Lanes::F32(_), _) => channels_f32::<1>(&block),
                        (Lanes::Bf16Pairs(_), 4) => channels_bf16::<4>(&block),
                        (Lanes::Bf16Pairs(_), 3) => channels_bf16::<3>(&block),
                        (Lanes::Bf16Pairs(_), 2) => channels_bf16::<2>(&block),
                        (Lanes::Bf16Pairs(_), _) => channels_bf16::<1>(&block),
                    }
                }
            }
        }
    }
}

/// One block of [`Layout::Channels`]: 6 places × `V` vectors of 16 output channels.
struct ChannelBlock<'a> {
    /// The packed image at the block's first depth plane.
    image: *const u32,
    plane: usize,
    depth: usize,
    offsets: &'a [usize],
    /// The block's places on the grid.
    places: [usize; PLACES],
    /// The kernel's row for the first depth plane and tap at the block's first output;
    /// rows `weight_stride` apart, `[depth][tap]`.
    weights: *const u32,
    weight_stride: usize,
    /// The block's first sum; places `stride` apart.
    sums: *mut f32,
    stride: usize,
    accumulate: bool,
}

/// One block of [`Layout::Channels`] in f32.
///
/// # Safety
/// AVX-512 F present; the block's pointers as [`convolve_channels`] makes them, `V <= 4`.
#[target_feature(enable = "avx512f")]
unsafe fn channels_f32<const V: usize>(b: &ChannelBlock) {
    // SAFETY: the caller's contract.
    unsafe {
        let mut acc = load_sums::<PLACES, V>(b.sums, b.stride, b.accumulate);
        let mut w = b.weights.cast::<f32>();
        for d in 0..b.depth {
            let base = b.image.add(d * b.plane).cast::<f32>();
            for &offset in b.offsets {
                let k: [__m512; V] = core::array::from_fn(|v| _mm512_loadu_ps(w.add(16 * v)));
                for (acc, &place) in acc.iter_mut().zip(&b.places) {
                    let x = _mm512_set1_ps(*base.add(place + offset));
                    for (acc, k) in acc.iter_mut().zip(k) {
                        *acc = _mm512_fmadd_ps(k, x, *acc);
                    }
                }
                w = w.add(b.weight_stride);
            }
        }
        store_sums(b.sums, b.stride, acc);
    }
}

/// One block of [`Layout::Channels`] in bf16 pairs.
///
/// # Safety
/// AVX-512 F and BF16 present; the block's pointers as [`convolve_channels`] makes them,
/// `V <= 4`.
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn channels_bf16<const V: usize>(b: &ChannelBlock) {
    // SAFETY: the caller's contract; a vector of 16 pairs is 32 bf16 bit patterns.
    unsafe {
        let mut acc = load_sums::<PLACES, V>(b.sums, b.stride, b.accumulate);
        let mut w = b.weights;
        for d in 0..b.depth {
            let base = b.image.add(d * b.plane);
            for &offset in b.offsets {
                let k: [__m512bh; V] = core::array::from_fn(|v| {
                    core::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(
                        w.add(16 * v).cast(),
                    ))
                });
                for (acc, &place) in acc.iter_mut().zip(&b.places) {
                    let x = _mm512_set1_epi32(*base.add(place + offset) as i32);
                    let x = core::mem::transmute::<__m512i, __m512bh>(x);
                    for (acc, k) in acc.iter_mut().zip(k) {
                        *acc = _mm512_dpbf16_ps(*acc, k, x);
                    }
                }
                w = w.add(b.weight_stride);
            }
        }
        store_sums(b.sums, b.stride, acc);
    }
}

/// One block's operands: 8 output channels × 48 places.
struct Block<'a> {
    /// The packed image at the block's first depth plane and place.
    image: *const u32,
    plane: usize,
    depth: usize,
    /// Each tap's offset on the grid.
    offsets: &'a [usize],
    /// The kernel's `[depth][tap][8]` values for the block's output channels.
    weights: *const u32,
    /// The plane of the block's first output channel; planes `stride` apart, `rows` of them
    /// (the last block's other rows are the kernel's zeros, computed and not stored).
    outputs: *mut f32,
    stride: usize,
    rows: usize,
    /// Where each vector of sums goes in a plane.
    vectors: [OutputVector; 3],
    /// Add to the outputs already there (a later depth chunk) rather than set them.
    accumulate: bool,
}

/// A block's sums: `MR` rows of three vectors, computed from zero.
///
/// The kernels return them and [`store_outputs`] stores them: a kernel that also stored them,
/// row by row up to the block's rows, was compiled with its sums kept on the stack, a store
/// after every multiply-add (the bf16 convolutions 2.8x slower). On its own, returned, nothing
/// takes their address while they are summed.
type Sums = [[__m512; 3]; MR];

/// One block's sums in f32.
///
/// # Safety
/// AVX-512 F present; the block's pointers as [`convolve_grid`] makes them.
#[inline(never)]
#[target_feature(enable = "avx512f")]
unsafe fn block_f32(b: &Block) -> Sums {
    // SAFETY: the caller's contract.
    unsafe {
        let mut acc = [[_mm512_setzero_ps(); 3]; MR];
        let mut w = b.weights.cast::<f32>();
        for d in 0..b.depth {
            let base = b.image.add(d * b.plane).cast::<f32>();
            for &offset in b.offsets {
                let p = base.add(offset);
                let v = [0, 16, 32].map(|j| _mm512_loadu_ps(p.add(j)));
                for (i, acc) in acc.iter_mut().enumerate() {
                    let s = _mm512_set1_ps(*w.add(i));
                    for (acc, v) in acc.iter_mut().zip(v) {
                        *acc = _mm512_fmadd_ps(s, v, *acc);
                    }
                }
                w = w.add(MR);
            }
        }
        acc
    }
}

/// One block's sums in bf16 pairs.
///
/// # Safety
/// AVX-512 F and BF16 present; the block's pointers as [`convolve_grid`] makes them.
#[inline(never)]
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn block_bf16(b: &Block) -> Sums {
    // SAFETY: the caller's contract; a vector of 16 pairs is 32 bf16 bit patterns.
    unsafe {
        let mut acc = [[_mm512_setzero_ps(); 3]; MR];
        let mut w = b.weights;
        for d in 0..b.depth {
            let base = b.image.add(d * b.plane);
            for &offset in b.offsets {
                let p = base.add(offset);
                let v = [0, 16, 32].map(|j| {
                    core::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(p.add(j).cast()))
                });
                for (i, acc) in acc.iter_mut().enumerate() {
                    let s = _mm512_set1_epi32(*w.add(i) as i32);
                    let s = core::mem::transmute::<__m512i, __m512bh>(s);
                    for (acc, v) in acc.iter_mut().zip(v) {
                        *acc = _mm512_dpbf16_ps(*acc, s, v);
                    }
                }
                w = w.add(MR);
            }
        }
        acc
    }
}

/// Stores a block's sums at each vector's output lanes, packed, in the planes of the block's
/// `rows` output channels, added to what an earlier depth chunk stored there when
/// `accumulate`.
///
/// # Safety
/// AVX-512 F present; the block's outputs as [`convolve_grid`] makes them.
#[target_feature(enable = "avx512f")]
unsafe fn store_outputs(b: &Block, acc: &Sums) {
    for (r, acc) in acc.iter().enumerate().take(b.rows) {
        for (&acc, v) in acc.iter().zip(b.vectors) {
            // SAFETY: the caller's contract; only the vector's lanes are read and written.
            unsafe {
                let at = b.outputs.add(r * b.stride + v.at);
                let full = v.lanes == u16::MAX;
                let sum = match (b.accumulate, full) {
                    (false, _) => acc,
                    (true, true) => _mm512_add_ps(acc, _mm512_loadu_ps(at)),
                    (true, false) => _mm512_add_ps(acc, _mm512_maskz_expandloadu_ps(v.lanes, at)),
                };
                match full {
                    true => _mm512_storeu_ps(at, sum),
                    false => _mm512_mask_compressstoreu_ps(at.cast(), v.lanes, sum),
                }
            }
        }
    }
}

/// A block's `R × V` vectors of sums so far, rows `stride` apart from `sums`: zeros, or (when
/// `accumulate`) what an earlier depth chunk left.
///
/// # Safety
/// AVX-512 F present; the `R` rows of `16 · V` values from `sums` writable.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn load_sums<const R: usize, const V: usize>(
    sums: *const f32,
    stride: usize,
    accumulate: bool,
) -> [[__m512; V]; R] {
    // Zeros, then loads under one test: a test per vector (`from_fn` with a `match`) made the
    // compiler keep the sums on the stack, Inception's step 118 -> 156 ms per image.
    let mut acc = [[_mm512_setzero_ps(); V]; R];
    if accumulate {
        for (i, acc) in acc.iter_mut().enumerate() {
            for (v, acc) in acc.iter_mut().enumerate() {
                // SAFETY: the caller's contract.
                *acc = unsafe { _mm512_loadu_ps(sums.add(i * stride + 16 * v)) };
            }
        }
    }
    acc
}

/// Stores what [`load_sums`] loaded, after the block's products.
///
/// # Safety
/// As [`load_sums`].
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn store_sums<const R: usize, const V: usize>(
    sums: *mut f32,
    stride: usize,
    acc: [[__m512; V]; R],
) {
    for (i, acc) in acc.into_iter().enumerate() {
        for (v, acc) in acc.into_iter().enumerate() {
            // SAFETY: the caller's contract.
            unsafe { _mm512_storeu_ps(sums.add(i * stride + 16 * v), acc) };
        }
    }
}

/// `x` (`[c, h, w]`, f32 or already bf16) into the interior of `image`'s padded planes: f32
/// bits, or bf16 pairs. The padding is left as it is (zero).
fn pack_image(image: &mut [u32], x: Pixels, c: usize, g: Grid, lanes: Lanes) {
    // Where the image's first row starts in its padded plane.
    let first = g.ph * g.wp + g.pw;
    match lanes {
        Lanes::F32(_) => {
            let size = g.h * g.w;
            for (ch, plane) in image.chunks_exact_mut(g.plane).take(c).enumerate() {
                for y in 0..g.h {
                    let dst = &mut plane[first + y * g.wp..][..g.w];
                    let row = (ch * size + y * g.w)..(ch * size + (y + 1) * g.w);
                    match x.slice(row) {
                        Pixels::F32(x) => dst.iter_mut().zip(x).for_each(|(d, x)| *d = x.to_bits()),
                        // A bf16's bits are the high half of the same f32's.
                        Pixels::Bf16(x) => dst
                            .iter_mut()
                            .zip(x)
                            .for_each(|(d, &x)| *d = u32::from(x) << 16),
                    }
                }
            }
        }
        Lanes::Bf16Pairs(avx) => pack_pairs(avx, image, x, [c, g.h, g.w], (first, g.wp, g.plane)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each block vector's lanes are the output places among its 16 grid places, and packed
    /// from its `at` they fall where those places are in the output plane: over all blocks,
    /// every output written once, in order. Grids with dropped columns, blocks across row ends
    /// and past the last row, rows longer and shorter than a block, and no dropped column.
    #[test]
    fn block_vectors_tile_the_output_plane() {
        let cases = [
            ([9, 13], [3, 3], [1, 1]),
            ([149, 149], [3, 3], [0, 0]),
            ([17, 17], [1, 7], [0, 3]),
            ([8, 8], [3, 3], [1, 1]),
            ([5, 6], [1, 1], [0, 0]),
            ([35, 35], [5, 5], [2, 2]),
        ];
        for (image, kernel, padding) in cases {
            let g = Grid::new(image, kernel, padding);
            let mut next = 0;
            for (block, vectors) in g.block_vectors().into_iter().enumerate() {
                for (v, vector) in vectors.into_iter().enumerate() {
                    let first = block * NR + 16 * v;
                    let places = (first..first + 16).filter(|q| q / g.wp < g.oh && q % g.wp < g.ow);
                    let lanes = places.clone().fold(0u16, |m, q| m | 1 << (q - first));
                    assert_eq!(vector.lanes, lanes, "{image:?} {kernel:?}: block {block}");
                    for (k, q) in places.enumerate() {
                        assert_eq!(vector.at + k, q / g.wp * g.ow + q % g.wp, "{image:?}");
                        assert_eq!(vector.at + k, next, "{image:?} {kernel:?}: out of order");
                        next += 1;
                    }
                }
            }
            assert_eq!(next, g.oh * g.ow, "{image:?} {kernel:?}: not every output");
        }
    }
}
