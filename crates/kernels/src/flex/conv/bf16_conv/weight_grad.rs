//! The weight gradient, per tap `dwᵀ[c × out] += xshift[c × places] · gradᵀ[places × out]` over
//! the places of all images as one tall grid, on AMX tiles or AVX-512 BF16 vectors
//! ([`WeightGradEngine`]), from chunks of the image rows and the gradient packed to bf16.

use super::*;
use std::mem::MaybeUninit;
use std::ops::Range;

/// The most [`Geometry::waste`] at which the vectors' weight gradient still beats im2col: the
/// CIFAR-10 net's 12x12 maps (1.33) gain, Inception's 8x8 ones (1.5) lose.
const MAX_VECTOR_WASTE: f64 = 1.4;

/// Whether `weight_grad` beats im2col + `multiply_bf16` for this convolution of `[h, w]`
/// images.
///
/// On AMX tiles, as measured on one Sapphire Rapids core by a convolution benchmark of the time
/// (since removed; `bench_inception_step N bf16 convs` times Inception's convolutions): 1.1×
/// to 3× on the Inception and CIFAR shapes, but not for kernels one row high and wider than one
/// (1x7: 0.7×, a quarter of the grid's columns discarded and no foot rows to skip) nor for few
/// channels (RGB: 0.6×, packing the gradient outweighs the products); even at 16 channels and
/// for 7x1.
///
/// On AVX-512 vectors (2-core Zen 5, batch 32): for kernels more than one row high on grids
/// that waste little ([`Geometry::waste`] ≤ [`MAX_VECTOR_WASTE`]): Inception's 3x3s on 147x147
/// maps 36 -> 26 and 53 -> 46 ms, its 5x5s 11.3 -> 9.0, its 7x1s 10–20% faster, the CIFAR-10
/// net's 5x5 on 12x12 maps (waste 1.33; batch 128) 7.9 -> 5.5 ms; not for 1x1 kernels (10–40%
/// slower: im2col has no windows to build there) nor for 3x3s on 8x8 maps (waste 1.5: 9.9 ->
/// 14.8 ms, and Inception's 448 -> 384 at batch 128 33 -> 46 ms).
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
            let waste = Geometry::new([c, h, w], [kh, kw], padding).waste();
            c >= 16 && kh > 1 && fits && waste <= MAX_VECTOR_WASTE
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
///
/// `outs`: the output channels of `grad` (`[n, out, oh, ow]`, `kernel` `[out, kh, kw]`) whose
/// rows `dw` holds (`[outs.len(), c, kh, kw]`): threads that split the output channels between
/// them each take a range.
pub(crate) fn weight_grad(
    dw: &mut [f32],
    x: Pixels,
    dims: [usize; 4],
    (grad, outs): (&[f32], Range<usize>),
    kernel: [usize; 3],
    padding: [usize; 2],
) {
    let engine = WeightGradEngine::get().expect("the direct weight gradient needs AVX-512 BF16");
    weight_grad_on(engine, dw, x, dims, (grad, outs), kernel, padding);
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
pub(crate) fn weight_grad_on(
    engine: WeightGradEngine,
    dw: &mut [f32],
    x: Pixels,
    [n, c, h, w]: [usize; 4],
    (grad, outs): (&[f32], Range<usize>),
    [all, kh, kw]: [usize; 3],
    padding: [usize; 2],
) {
    let g = Geometry::new([c, h, w], [kh, kw], padding);
    let taps = g.taps();
    assert!(outs.end <= all, "output channels {outs:?} of {all}");
    let out = outs.len();
    assert_eq!(
        dw.len(),
        out * c * kh * kw,
        "dw is not [{out}, {c}, {kh}, {kw}]"
    );
    assert_eq!(x.len(), n * c * h * w, "x is not [{n}, {c}, {h}, {w}]");
    let grad_shape = [n, all, g.oh, g.ow];
    assert_eq!(
        grad.len(),
        grad_shape.iter().product::<usize>(),
        "grad is not {grad_shape:?}"
    );
    if dw.is_empty() || n == 0 || h * w == 0 {
        return; // No products, or all with the zeros of the padding.
    }
    let planes = [
        Planes::input(x, g, n),
        Planes::output(Pixels::F32(grad), g, n, (all, outs)),
    ];
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
    data: Pixels<'a>,
    images: usize,
    /// The planes of each image in `data`, and the first of them that channel 0 reads.
    per_image: usize,
    first: usize,
    /// The channels read.
    channels: usize,
    rows: usize,
    cols: usize,
    top: usize,
    left: usize,
    g: Geometry,
}

impl<'a> Planes<'a> {
    /// `x`, inside its padding.
    fn input(x: Pixels<'a>, g: Geometry, images: usize) -> Self {
        Self {
            data: x,
            images,
            per_image: g.c,
            first: 0,
            channels: g.c,
            rows: g.h,
            cols: g.w,
            top: g.ph,
            left: g.pw,
            g,
        }
    }

    /// The output gradient's channels `outs` of `per_image`, at the top left of each image's
    /// grid.
    fn output(
        grad: Pixels<'a>,
        g: Geometry,
        images: usize,
        (per_image, outs): (usize, Range<usize>),
    ) -> Self {
        Self {
            data: grad,
            images,
            per_image,
            first: outs.start,
            channels: outs.len(),
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
            let plane_start = (i * self.per_image + self.first + ch) * size;
            let mut copy = |values: core::ops::Range<usize>, at: usize| {
                // `plane[values]` lands on the places `at ..`; keep what lies in the line.
                let (lo, hi) = (at.max(start), (at + values.len()).min(end));
                if lo < hi {
                    let from = plane_start + values.start + lo - at;
                    // The next channel's same rows, which the chunk reads next, asked for as
                    // these are read: a chunk reads every channel's plane in turn, far more
                    // streams than the hardware prefetcher follows.
                    convert(&mut line[lo - start..hi - start], (self.data, from), size);
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

/// `dst` = `data[from ..]` in bf16 (f32 values rounded as the tiles' packers round), asking
/// for the values `ahead` further on to be brought to cache as it goes.
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
fn convert(dst: &mut [u16], (data, from): (Pixels, usize), ahead: usize) {
    let to = from + dst.len();
    for (k, dst) in dst.chunks_mut(DEPTH).enumerate() {
        let (at, next) = (from + k * DEPTH, from + k * DEPTH + ahead);
        data.prefetch::<_MM_HINT_T0>(next..next + DEPTH);
        match data.slice(at..to.min(at + DEPTH)) {
            // SAFETY: the features are enabled here; `dst` and the values are of one length,
            // at most 32; `store_bf16_run` writes only initialized words, so `dst` stays so.
            Pixels::F32(values) => unsafe {
                let dst = &mut *(dst as *mut [u16] as *mut [MaybeUninit<u16>]);
                store_bf16_run(dst, values)
            },
            Pixels::Bf16(values) => dst.copy_from_slice(values),
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
