//! 3x3 stride-1 convolutions by Winograd's minimal filtering F(2×2, 3×3) (Lavin & Gray, "Fast
//! Algorithms for Convolutional Neural Networks", 2016), in f32.
//!
//! Each 2×2 block of outputs (a tile) is `Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A`, `g` a 3×3 kernel and `d`
//! the tile's 4×4 input patch: 16 products per tile and channel pair where the direct
//! convolution takes 36. Summed over the input channels, the 16 element-wise products become 16
//! matrix products, `M[p] = U[p] · V[p]` (`U[p]`: `[out × c]`, the transformed kernel's point
//! `p`; `V[p]`: `[c × tiles]`, the transformed patches'), which gemm runs at its full rate. The
//! transforms are additions only (`B`, `A`) or done once per call (`G`).
//!
//! Rounding: the transforms add up to four inputs (and `G` halves), so the result differs from
//! the direct sum by a few f32 roundings of the largest inputs, not of the output: fine for
//! training, and tested against Burn's convolution.
//!
//! The tiles of an image are taken a few tile rows at a time (`BLOCK_TILES`), so that the
//! transformed patches and products of a block stay in cache between the three steps. The
//! input gradient is the forward convolution of the output gradient by the flipped,
//! transposed kernel (`TransformedKernel::flipped_transposed`); the weight gradient sums
//! products of the same patches with the output gradient's tiles (`WeightSum`).

use std::cell::RefCell;
use std::ops::Range;
use std::sync::OnceLock;

use multiversion::multiversion;
use rayon::prelude::*;

use crate::flex::conv::weight_sum::add_product_f32;
use crate::flex::gemm::bf16_gemm::{Strided, turned_off};
use crate::flex::gemm::gemm_f32::{View, gemm_f32};
use crate::flex::memory::deinterleave;

/// Points of a transformed tile (4×4): `p = 4·i + j`.
const POINTS: usize = 16;

/// Tiles per block, at least: gemm reaches most of its rate from products this wide (80 G
/// multiply-adds/s on one Zen 5 core at 72 columns, 118 at 288), and the block's patches and
/// products (16 points of `c` or `out` values per tile) still mostly fit L2.
pub(crate) const BLOCK_TILES: usize = 256;

/// Channels below which, on either side, the direct kernels win: the transforms' cost grows
/// with `c + out` per tile and the products' with `c · out` (Inception's 32 -> 64 lost,
/// 64 -> 96 won, measured).
pub(crate) const MIN_CHANNELS: usize = 64;

/// Whether a convolution of `c` channels into `out` by a `kernel` at `stride`, producing
/// `out_size` (`[h, w]`) outputs per image, goes here: 3x3 at stride 1, with channels enough
/// on both sides and a block's worth of tiles per image (Inception v3's 71x71 and 35x35 maps;
/// not its 8x8 ones).
pub(crate) fn pays_off(
    [c, out]: [usize; 2],
    kernel: [usize; 2],
    stride: [usize; 2],
    out_size: [usize; 2],
) -> bool {
    let tiles = out_size[0].div_ceil(2) * out_size[1].div_ceil(2);
    kernel == [3, 3]
        && stride == [1, 1]
        && c.min(out) >= MIN_CHANNELS
        && tiles >= BLOCK_TILES / 4
        && allowed()
}

/// Whether `TOWERS_NO_WINOGRAD` (any value but empty or `0`, read once per process) leaves the
/// Winograd kernels on: off, every convolution takes the direct or im2col kernels, whose
/// results are the plain sums of products (for comparing runs exactly, or timing).
pub(crate) fn allowed() -> bool {
    static OFF: OnceLock<bool> = OnceLock::new();
    !*OFF.get_or_init(|| turned_off("TOWERS_NO_WINOGRAD"))
}

/// A 3x3 kernel transformed (`U = G g Gᵀ`), as 16 matrices `[out × c]`.
pub(crate) struct TransformedKernel {
    u: Vec<f32>,
    out: usize,
    c: usize,
}

/// The taps `g(o, ch, ky, kx)` of a square `[out, c, k, k]` `weight` and the `[out, c]` they
/// span, or, `flipped`, those of its input gradient's kernel: inputs and outputs swapped
/// (`[c, out]`), flipped in both directions. What the Winograd kernels transform.
pub(crate) fn square_taps(
    weight: &[f32],
    [out, c]: [usize; 2],
    k: usize,
    flipped: bool,
) -> (
    [usize; 2],
    impl Fn(usize, usize, usize, usize) -> f32 + Sync + '_,
) {
    assert_eq!(
        weight.len(),
        out * c * k * k,
        "not an [{out}, {c}, {k}, {k}] kernel"
    );
    let dims = if flipped { [c, out] } else { [out, c] };
    let tap = move |a: usize, b: usize, ky: usize, kx: usize| match flipped {
        false => weight[((a * c + b) * k + ky) * k + kx],
        true => weight[((b * c + a) * k + k - 1 - ky) * k + k - 1 - kx],
    };
    (dims, tap)
}

impl TransformedKernel {
    /// `weight`: `[out, c, 3, 3]`.
    pub(crate) fn new(weight: &[f32], dims: [usize; 2]) -> Self {
        let (dims, taps) = square_taps(weight, dims, 3, false);
        Self::from_fn(dims, taps)
    }

    /// The kernel of the input gradient of a convolution by `weight` (`[out, c, 3, 3]`): inputs
    /// and outputs swapped, flipped in both directions.
    pub(crate) fn flipped_transposed(weight: &[f32], dims: [usize; 2]) -> Self {
        let (dims, taps) = square_taps(weight, dims, 3, true);
        Self::from_fn(dims, taps)
    }

    /// `g(o, ch, ky, kx)` transformed.
    fn from_fn([out, c]: [usize; 2], g: impl Fn(usize, usize, usize, usize) -> f32) -> Self {
        // G = [[1, 0, 0], [½, ½, ½], [½, -½, ½], [0, 0, 1]] applied to three values.
        let spread = |v: [f32; 3]| {
            [
                v[0],
                (v[0] + v[1] + v[2]) / 2.0,
                (v[0] - v[1] + v[2]) / 2.0,
                v[2],
            ]
        };
        let mut u = vec![0f32; POINTS * out * c];
        for o in 0..out {
            for ch in 0..c {
                let columns: [[f32; 4]; 3] =
                    core::array::from_fn(|kx| spread(core::array::from_fn(|ky| g(o, ch, ky, kx))));
                for i in 0..4 {
                    let row = spread(core::array::from_fn(|kx| columns[kx][i]));
                    for (j, value) in row.into_iter().enumerate() {
                        u[((4 * i + j) * out + o) * c + ch] = value;
                    }
                }
            }
        }
        Self { u, out, c }
    }
}

/// The sizes of one convolution: input `[c, h, w]`, padding, outputs and tiles.
#[derive(Clone, Copy, Debug)]
struct Geometry {
    c: usize,
    h: usize,
    w: usize,
    ph: usize,
    pw: usize,
    oh: usize,
    ow: usize,
    /// Tiles per column and per row: `ceil(oh / 2)`, `ceil(ow / 2)`.
    th: usize,
    tw: usize,
}

/// Tile rows per block: at least `BLOCK_TILES` tiles, the image's tile rows split evenly.
fn block_rows(g: Geometry) -> usize {
    let blocks = (g.th * g.tw / BLOCK_TILES).max(1);
    g.th.div_ceil(blocks).max(1)
}

impl Geometry {
    fn new([c, h, w]: [usize; 3], [ph, pw]: [usize; 2]) -> Self {
        assert!(
            h + 2 * ph >= 3 && w + 2 * pw >= 3,
            "a 3x3 kernel does not fit a {h}x{w} image padded by {ph}x{pw}"
        );
        let (oh, ow) = (h + 2 * ph - 2, w + 2 * pw - 2);
        Self {
            c,
            h,
            w,
            ph,
            pw,
            oh,
            ow,
            th: oh.div_ceil(2),
            tw: ow.div_ceil(2),
        }
    }
}

/// Per-thread buffers, kept between calls so that the steady state allocates nothing.
#[derive(Default)]
struct Scratch {
    /// Transformed patches of a block: `[16][c][tiles]`.
    patches: Vec<f32>,
    /// Products of a block: `[16][out][tiles]`.
    products: Vec<f32>,
    /// A block's input rows transformed along the row: `[parity][4 points][rows][tw]`.
    rows: Vec<f32>,
    /// One input row with its zero padding, and a row's even and odd columns.
    padded: Vec<f32>,
    even: Vec<f32>,
    odd: Vec<f32>,
    /// A block's outputs (or output gradient) half transformed: `[2][4 points][tiles]`.
    sums: Vec<f32>,
    /// The output gradient of a block transformed, `[16][out][tiles]`, and a point of it
    /// transposed for gemm (`scratch`).
    gradient: Vec<f32>,
    scratch: Vec<f32>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Panics unless `x` holds `images` images `[c, h, w]` and `y` (the outputs, or their
/// gradient) as many of `per_image` values.
pub(crate) fn assert_batch([x, y]: [usize; 2], [images, c, h, w]: [usize; 4], per_image: usize) {
    assert_eq!(
        x,
        images * c * h * w,
        "x is not {images} [{c}, {h}, {w}] images"
    );
    assert_eq!(
        y,
        images * per_image,
        "not {images} outputs of {per_image} values"
    );
}

/// The blocks of tile rows of an image: `block_rows(g)` rows each, the last fewer.
fn blocks(g: Geometry) -> impl Iterator<Item = Range<usize>> {
    let rows = block_rows(g);
    (0..g.th)
        .step_by(rows)
        .map(move |first| first..(first + rows).min(g.th))
}

/// `y = conv(x, kernel)` for `images` images `[c, h, w]` (`x`) and outputs `[out, oh, ow]`
/// (`y`), on the calling thread.
pub(crate) fn forward(
    y: &mut [f32],
    x: &[f32],
    [images, c, h, w]: [usize; 4],
    kernel: &TransformedKernel,
    padding: [usize; 2],
) {
    assert_eq!(kernel.c, c, "a kernel for {} channels, not {c}", kernel.c);
    let g = Geometry::new([c, h, w], padding);
    let out = kernel.out;
    assert_batch([x.len(), y.len()], [images, c, h, w], out * g.oh * g.ow);
    SCRATCH.with_borrow_mut(|s| {
        for (y, x) in y
            .chunks_exact_mut((out * g.oh * g.ow).max(1))
            .zip(x.chunks_exact((c * h * w).max(1)))
        {
            for rows in blocks(g) {
                let tiles = rows.len() * g.tw;
                transform_input(s, x, g, rows.clone());
                multiply(s, kernel, tiles);
                transform_output(s, y, g, out, rows);
            }
        }
    });
}

/// `M[p] = U[p] · V[p]` for each point `p`, into `s.products` (`[16][out][tiles]`).
fn multiply(s: &mut Scratch, kernel: &TransformedKernel, tiles: usize) {
    let sizes = [POINTS, kernel.out, kernel.c, tiles];
    multiply_points(&mut s.products, &kernel.u, &s.patches, sizes);
}

/// `products[p] = u[p] · patches[p]` for each of `points` points: `u` `[points][out × c]`,
/// `patches` `[points][c × tiles]`, `products` `[points][out × tiles]`, all row-major.
pub(crate) fn multiply_points(
    products: &mut Vec<f32>,
    u: &[f32],
    patches: &[f32],
    [points, out, c, tiles]: [usize; 4],
) {
    products.resize(points * out * tiles, 0.0);
    let kernels = u.chunks_exact((out * c).max(1));
    let operands = patches.chunks_exact((c * tiles).max(1));
    let products = products.chunks_exact_mut((out * tiles).max(1));
    for ((dst, lhs), rhs) in products.zip(kernels).zip(operands) {
        // SAFETY: `dst` is out×tiles, `lhs` out×c and `rhs` c×tiles, all row-major in separate
        // buffers.
        unsafe {
            gemm_f32(
                [out, tiles, c],
                View::rows(dst.as_mut_ptr(), tiles),
                false,
                View::rows(lhs.as_ptr(), c),
                View::rows(rhs.as_ptr(), tiles),
            );
        }
    }
}

/// One thread's running sums of a Winograd weight gradient in the transformed domain, `dU[p] =
/// Σ dM[p] · V[p]ᵀ` over tiles, each point's `[c][out]` (transposed, as the convolutions' own
/// weight-gradient product leaves it): what each module's `WeightSum` adds into, merges and
/// transforms back.
pub(crate) struct PointSums {
    du: Vec<f32>,
    pub(crate) out: usize,
    pub(crate) c: usize,
}

impl PointSums {
    /// Zeros for `points` points of an `[out, c]` kernel.
    pub(crate) fn new(points: usize, [out, c]: [usize; 2]) -> Self {
        Self {
            du: vec![0.0; points * out * c],
            out,
            c,
        }
    }

    /// `dU[p] += dm[p] · patches[p]ᵀ` for each point `p`, by [`add_product_f32`] (`scratch` for
    /// its transposes): `dm` `[points][out × tiles]` (the output gradient's tiles
    /// transformed), `patches` `[points][c × tiles]`.
    pub(crate) fn add(
        &mut self,
        dm: &[f32],
        patches: &[f32],
        tiles: usize,
        scratch: &mut Vec<f32>,
    ) {
        let (out, c) = (self.out, self.c);
        let sums = self.du.chunks_exact_mut((out * c).max(1));
        let gradients = dm.chunks_exact((out * tiles).max(1));
        for ((du, dm), v) in sums
            .zip(gradients)
            .zip(patches.chunks_exact((c * tiles).max(1)))
        {
            let (dm, v) = (Strided::row_major(dm, tiles), Strided::row_major(v, tiles));
            add_product_f32(du, &dm, &v, [out, c, tiles], scratch);
        }
    }

    /// These sums plus another thread's.
    pub(crate) fn plus(mut self, other: &Self) -> Self {
        self.du.iter_mut().zip(&other.du).for_each(|(a, b)| *a += b);
        self
    }

    /// Point `p`'s sum for output `index / c`, channel `index % c` (a kernel's place in
    /// `[out, c, ..]`).
    pub(crate) fn at(&self, p: usize, index: usize) -> f32 {
        let (out, c) = (self.out, self.c);
        self.du[p * out * c + (index % c) * out + index / c]
    }
}

/// `V = Bᵀ d B` for every channel and tile of the tile rows `rows`, into `s.patches`
/// (`[16][c][tiles]`): each input row of the block along the row first, then down each tile's
/// four rows, all tile rows at once.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn transform_input(s: &mut Scratch, x: &[f32], g: Geometry, rows: Range<usize>) {
    let (c, tw) = (g.c, g.tw);
    let tiles = rows.len() * tw;
    // Input row `2·(rows.start + r) + parity` along the row, for r in 0..=rows.len(), as
    // [parity][point][r][tw]: a tile row's rows 0 and 2 are then the even rows at r and r + 1,
    // its rows 1 and 3 the odd ones, each a run over all the block's tiles.
    let line = tiles + tw;
    s.patches.resize(POINTS * c * tiles, 0.0);
    s.rows.resize(8 * line, 0.0);
    for ch in 0..c {
        let plane = &x[ch * g.h * g.w..][..g.h * g.w];
        for (parity, lines) in s.rows.chunks_exact_mut(4 * line).enumerate() {
            for r in 0..=rows.len() {
                let row = (2 * (rows.start + r) + parity)
                    .checked_sub(g.ph)
                    .filter(|&row| row < g.h)
                    .map(|row| &plane[row * g.w..][..g.w]);
                let along = four_mut(lines, line, r * tw..(r + 1) * tw);
                transform_row(along, row, g.pw, [&mut s.padded, &mut s.even, &mut s.odd]);
            }
        }
        let along = |parity: usize, j: usize| &s.rows[(4 * parity + j) * line..][..line];
        for j in 0..4 {
            let (even, odd) = (along(0, j), along(1, j));
            let (d0, d2) = (&even[..tiles], &even[tw..]);
            let (d1, d3) = (&odd[..tiles], &odd[tw..]);
            // Bᵀ = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]] down the rows.
            let v = |p: usize| (p * c + ch) * tiles;
            let patches = &mut s.patches;
            combine(&mut patches[v(j)..][..tiles], d0, d2, |a, b| a - b);
            combine(&mut patches[v(4 + j)..][..tiles], d1, d2, |a, b| a + b);
            combine(&mut patches[v(8 + j)..][..tiles], d2, d1, |a, b| a - b);
            combine(&mut patches[v(12 + j)..][..tiles], d1, d3, |a, b| a - b);
        }
    }
}

/// `range` of each of the first four `line`-long lines of `buffer`.
fn four_mut(buffer: &mut [f32], line: usize, range: Range<usize>) -> [&mut [f32]; 4] {
    let mut rest = buffer;
    core::array::from_fn(|_| {
        let (head, tail) = std::mem::take(&mut rest).split_at_mut(line);
        rest = tail;
        &mut head[range.clone()]
    })
}

/// `dst[t] = f(a[t], b[t])`.
#[inline(always)]
fn combine(dst: &mut [f32], a: &[f32], b: &[f32], f: impl Fn(f32, f32) -> f32) {
    for ((dst, &a), &b) in dst.iter_mut().zip(a).zip(b) {
        *dst = f(a, b);
    }
}

/// One input row (`None`: a padding row) transformed along the row: for each tile `t`, whose
/// patch reads padded columns `2t .. 2t + 4` (`c0 .. c3`), the four values `(c0 - c2, c1 + c2,
/// c2 - c1, c1 - c3)` into `along` (`tw` each).
#[inline(always)]
fn transform_row(
    along: [&mut [f32]; 4],
    row: Option<&[f32]>,
    pw: usize,
    [padded, even, odd]: [&mut Vec<f32>; 3],
) {
    let [h0, h1, h2, h3] = along;
    let tw = h0.len();
    let Some(row) = row else {
        [h0, h1, h2, h3].into_iter().for_each(|h| h.fill(0.0));
        return;
    };
    // Padded columns 0 .. 2tw + 2, input column `q - pw` at `q`.
    let width = 2 * tw + 2;
    padded.clear();
    padded.resize(width, 0.0);
    let start = pw.min(width);
    let count = row.len().min(width - start);
    padded[start..start + count].copy_from_slice(&row[..count]);
    even.resize(tw + 1, 0.0);
    odd.resize(tw + 1, 0.0);
    deinterleave(padded, even, odd);
    let (e0, e1, o0, o1) = (&even[..tw], &even[1..], &odd[..tw], &odd[1..]);
    combine(h0, e0, e1, |a, b| a - b);
    combine(h1, o0, e1, |a, b| a + b);
    combine(h2, e1, o0, |a, b| a - b);
    combine(h3, o0, o1, |a, b| a - b);
}

/// `Y = Aᵀ M A` (`Aᵀ = [[1, 1, 1, 0], [0, 1, -1, -1]]`) for every output channel and tile of
/// the tile rows `rows`, from `s.products` (`[16][out][tiles]`) into the image's outputs `y`:
/// down the rows for all tiles at once, then along each output row.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn transform_output(s: &mut Scratch, y: &mut [f32], g: Geometry, out: usize, rows: Range<usize>) {
    let tw = g.tw;
    let tiles = rows.len() * tw;
    // [output row of the tile][point j][tiles]
    s.sums.resize(8 * tiles, 0.0);
    s.even.resize(tw, 0.0);
    s.odd.resize(tw, 0.0);
    for o in 0..out {
        let m = |p: usize| &s.products[(p * out + o) * tiles..][..tiles];
        let (top, bottom) = s.sums.split_at_mut(4 * tiles);
        for j in 0..4 {
            let (m0, m1, m2, m3) = (m(j), m(4 + j), m(8 + j), m(12 + j));
            let (top, bottom) = (
                &mut top[j * tiles..][..tiles],
                &mut bottom[j * tiles..][..tiles],
            );
            for (((((top, bottom), &m0), &m1), &m2), &m3) in
                top.iter_mut().zip(bottom).zip(m0).zip(m1).zip(m2).zip(m3)
            {
                *top = m0 + m1 + m2;
                *bottom = m1 - m2 - m3;
            }
        }
        let plane = &mut y[o * g.oh * g.ow..][..g.oh * g.ow];
        for (k, ty) in rows.clone().enumerate() {
            for a in 0..2 {
                let Some(row) = plane.get_mut((2 * ty + a) * g.ow..(2 * ty + a + 1) * g.ow) else {
                    continue;
                };
                let sum = |j: usize| &s.sums[(4 * a + j) * tiles + k * tw..][..tw];
                let (s0, s1, s2, s3) = (sum(0), sum(1), sum(2), sum(3));
                let (even, odd) = (&mut s.even, &mut s.odd);
                for ((((even, odd), &s0), &s1), &s2) in
                    even.iter_mut().zip(odd.iter_mut()).zip(s0).zip(s1).zip(s2)
                {
                    *even = s0 + s1 + s2;
                    *odd = s1 - s2;
                }
                combine_in_place(odd, s3, |a, b| a - b);
                interleave(row, even, odd);
            }
        }
    }
}

/// `dst[t] = f(dst[t], b[t])`.
#[inline(always)]
fn combine_in_place(dst: &mut [f32], b: &[f32], f: impl Fn(f32, f32) -> f32) {
    for (dst, &b) in dst.iter_mut().zip(b) {
        *dst = f(*dst, b);
    }
}

/// `row[2t] = even[t]`, `row[2t + 1] = odd[t]`, as far as `row` goes.
#[inline(always)]
pub(crate) fn interleave(row: &mut [f32], even: &[f32], odd: &[f32]) {
    let whole = row.len() / 2;
    for ((pair, &even), &odd) in row.chunks_exact_mut(2).zip(even).zip(odd) {
        pair[0] = even;
        pair[1] = odd;
    }
    if row.len() % 2 == 1 {
        row[2 * whole] = even[whole];
    }
}

/// One thread's running sum of a convolution's weight gradient in a transformed domain, for
/// [`crate::flex::conv::passes`] to run on each thread's share of the images and add up.
pub(crate) trait TransformedWeightSum: Send + Sized {
    /// Adds the gradient of `images` images `[c, h, w]` (`x`), padded by `padding`, whose
    /// outputs had the gradient `grad`.
    fn add(&mut self, x: &[f32], images: [usize; 4], grad: &[f32], padding: [usize; 2]);

    /// This sum plus another thread's.
    fn merge(self, other: Self) -> Self;

    /// The weight gradient, `[out, c, kh, kw]`.
    fn into_weights(self) -> Vec<f32>;
}

/// One thread's running sum of a 3x3 convolution's weight gradient in the transformed domain:
/// `dU[p] = Σ dM[p] · V[p]ᵀ` over tiles, `dM = A dy Aᵀ` the output gradient's tiles transformed
/// (the adjoint of the forward's `Aᵀ M A`) and `V` the input's patches as the forward
/// transforms them; the gradient is then `Gᵀ dU G` (`into_weights`).
pub(crate) struct WeightSum(PointSums);

impl WeightSum {
    pub(crate) fn new(dims: [usize; 2]) -> Self {
        Self(PointSums::new(POINTS, dims))
    }
}

impl TransformedWeightSum for WeightSum {
    fn add(&mut self, x: &[f32], [images, c, h, w]: [usize; 4], grad: &[f32], padding: [usize; 2]) {
        assert_eq!(c, self.0.c, "a sum for {} channels, not {c}", self.0.c);
        let g = Geometry::new([c, h, w], padding);
        let out = self.0.out;
        assert_batch([x.len(), grad.len()], [images, c, h, w], out * g.oh * g.ow);
        SCRATCH.with_borrow_mut(|s| {
            for (grad, x) in grad
                .chunks_exact((out * g.oh * g.ow).max(1))
                .zip(x.chunks_exact((c * h * w).max(1)))
            {
                for rows in blocks(g) {
                    let tiles = rows.len() * g.tw;
                    transform_input(s, x, g, rows.clone());
                    transform_gradient(s, grad, g, out, rows);
                    self.0.add(&s.gradient, &s.patches, tiles, &mut s.scratch);
                }
            }
        });
    }

    fn merge(self, other: Self) -> Self {
        Self(self.0.plus(&other.0))
    }

    /// `Gᵀ dU G`, `[out, c, 3, 3]`, on rayon's threads.
    fn into_weights(self) -> Vec<f32> {
        let (out, c) = (self.0.out, self.0.c);
        // Gᵀ on four values: G's columns are (1, ½, ½, 0), (0, ½, -½, 0), (0, ½, ½, 1).
        let gather = |v: [f32; 4]| {
            [
                v[0] + (v[1] + v[2]) / 2.0,
                (v[1] - v[2]) / 2.0,
                (v[1] + v[2]) / 2.0 + v[3],
            ]
        };
        let mut weights = vec![0f32; out * c * 9];
        let kernels = weights.par_chunks_exact_mut(9).enumerate();
        kernels.for_each(|(index, kernel)| {
            let du = |i: usize, j: usize| self.0.at(4 * i + j, index);
            let rows: [[f32; 3]; 4] =
                core::array::from_fn(|i| gather(core::array::from_fn(|j| du(i, j))));
            for kx in 0..3 {
                let column = gather(core::array::from_fn(|i| rows[i][kx]));
                for ky in 0..3 {
                    kernel[3 * ky + kx] = column[ky];
                }
            }
        });
        weights
    }
}

/// `dM = A dy Aᵀ` (`A = [[1, 0], [1, 1], [1, -1], [0, -1]]`) for every output channel and tile
/// of the tile rows `rows` (`dy` zero past the outputs), into `s.gradient` (`[16][out][tiles]`).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn transform_gradient(s: &mut Scratch, grad: &[f32], g: Geometry, out: usize, rows: Range<usize>) {
    let (tw, tiles) = (g.tw, rows.len() * g.tw);
    s.gradient.resize(POINTS * out * tiles, 0.0);
    // The tiles' top and bottom output rows along the row: [row of the tile][point j][tiles].
    s.sums.resize(8 * tiles, 0.0);
    for o in 0..out {
        let plane = &grad[o * g.oh * g.ow..][..g.oh * g.ow];
        for (a, lines) in s.sums.chunks_exact_mut(4 * tiles).enumerate() {
            for (k, ty) in rows.clone().enumerate() {
                let row = plane.get((2 * ty + a) * g.ow..(2 * ty + a + 1) * g.ow);
                let along = four_mut(lines, tiles, k * tw..(k + 1) * tw);
                spread_row(along, row, [&mut s.even, &mut s.odd]);
            }
        }
        let (top, bottom) = s.sums.split_at(4 * tiles);
        let at = |p: usize| (p * out + o) * tiles;
        for j in 0..4 {
            let (t, b) = (&top[j * tiles..][..tiles], &bottom[j * tiles..][..tiles]);
            let dm = &mut s.gradient;
            dm[at(j)..][..tiles].copy_from_slice(t);
            combine(&mut dm[at(4 + j)..][..tiles], t, b, |t, b| t + b);
            combine(&mut dm[at(8 + j)..][..tiles], t, b, |t, b| t - b);
            combine(&mut dm[at(12 + j)..][..tiles], t, b, |_, b| -b);
        }
    }
}

/// One output-gradient row (`None`: past the outputs) spread along the row: for each tile `t`
/// with the values `(e, o)` at columns `2t, 2t + 1` (zero past the row), `(e, e + o, e - o,
/// -o)` into `along` (`tw` each).
#[inline(always)]
fn spread_row(along: [&mut [f32]; 4], row: Option<&[f32]>, [even, odd]: [&mut Vec<f32>; 2]) {
    let [h0, h1, h2, h3] = along;
    let tw = h0.len();
    let Some(row) = row else {
        [h0, h1, h2, h3].into_iter().for_each(|h| h.fill(0.0));
        return;
    };
    even.resize(tw, 0.0);
    odd.resize(tw, 0.0);
    deinterleave(row, even, odd);
    if row.len() % 2 == 1 {
        (even[tw - 1], odd[tw - 1]) = (row[row.len() - 1], 0.0);
    }
    h0.copy_from_slice(even);
    combine(h1, even, odd, |e, o| e + o);
    combine(h2, even, odd, |e, o| e - o);
    for (h3, &o) in h3.iter_mut().zip(odd.iter()) {
        *h3 = -o;
    }
}

/// The weight gradient of `case`'s images `x` under `grad` as two threads sum it: each half of
/// the batch into a sum from `new`, the two merged.
#[cfg(test)]
pub(crate) fn summed_in_two<S: TransformedWeightSum>(
    case: &crate::test_util::ConvCase,
    x: &[f32],
    grad: &[f32],
    new: impl Fn() -> S,
) -> Vec<f32> {
    let [n, c, h, w] = case.images;
    let [oh, ow] = case.out_size();
    let first = n / 2;
    let (x_split, grad_split) = (first * c * h * w, first * case.out * oh * ow);
    let mut sum = new();
    sum.add(
        &x[..x_split],
        [first, c, h, w],
        &grad[..grad_split],
        case.padding,
    );
    let mut other = new();
    let rest = [n - first, c, h, w];
    other.add(&x[x_split..], rest, &grad[grad_split..], case.padding);
    sum.merge(other).into_weights()
}

/// A transformed kernel from a `[out, c, kh, kw]` weight and its `[out, c]`.
#[cfg(test)]
type KernelOf<K> = fn(&[f32], [usize; 2]) -> K;

/// A module's `forward`: `y`, `x`, `[images, c, h, w]`, the kernel and the padding.
#[cfg(test)]
type ConvolutionBy<K> = fn(&mut [f32], &[f32], [usize; 4], &K, [usize; 2]);

/// `case`s against the direct sums in f64, for a Winograd module whose kernels take `[out, c]`:
/// the forward convolution (`kernel`, `forward`), the weight gradient summed in two (`sum`),
/// and the input gradient as the forward's adjoint (the `flipped` kernel, padded by `k - 1 -
/// p`).
#[cfg(test)]
pub(crate) fn check_against_direct_sums<K, S: TransformedWeightSum>(
    cases: &[crate::test_util::ConvCase],
    [kernel, flipped]: [KernelOf<K>; 2],
    forward: ConvolutionBy<K>,
    sum: fn([usize; 2]) -> S,
) {
    for case in cases {
        let [n, c, _, _] = case.images;
        let [oh, ow] = case.out_size();
        case.check_forward(1e-5, |y, x, weight| {
            forward(
                y,
                x,
                case.images,
                &kernel(weight, [case.out, c]),
                case.padding,
            );
        });
        case.check_weight_grad(1e-5, |x, grad| {
            summed_in_two(case, x, grad, || sum([case.out, c]))
        });
        case.check_adjoint(
            |y, x, weight| {
                forward(
                    y,
                    x,
                    case.images,
                    &kernel(weight, [case.out, c]),
                    case.padding,
                )
            },
            |dx, grad, weight| {
                let images = [n, case.out, oh, ow];
                let flipped = flipped(weight, [case.out, c]);
                forward(dx, grad, images, &flipped, case.flipped_padding());
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::ConvCase;

    /// Odd and even outputs, paddings 0..=2 (the input gradient pads by 2 - p), several blocks
    /// per image, a last block of fewer rows.
    const CASES: [ConvCase; 5] = [
        case([2, 3, 9, 9], 4, [1, 1]),
        case([1, 5, 20, 17], 3, [0, 0]),
        case([2, 2, 23, 8], 6, [2, 1]),
        case([1, 7, 4, 5], 2, [2, 2]),
        case([3, 1, 3, 3], 1, [0, 0]),
    ];

    const fn case(images: [usize; 4], out: usize, padding: [usize; 2]) -> ConvCase {
        ConvCase {
            images,
            out,
            kernel: [3, 3],
            padding,
        }
    }

    /// `TOWERS_NO_WINOGRAD` as this process has it: CI's second unit-test pass sets it, and the
    /// convolution tests then run the Winograd shapes on the other kernels.
    #[test]
    fn environment_switch_is_honoured() {
        let on = !turned_off("TOWERS_NO_WINOGRAD");
        assert_eq!(allowed(), on);
        assert_eq!(pays_off([64, 64], [3, 3], [1, 1], [35, 35]), on);
        assert!(!pays_off([32, 64], [3, 3], [1, 1], [35, 35]));
        assert!(!pays_off([64, 64], [3, 3], [1, 1], [8, 8]));
    }

    /// Forward, the weight gradient and the input gradient (the flipped, transposed kernel,
    /// padded by 2 - p).
    #[test]
    fn matches_the_direct_sums() {
        let kernels = [
            TransformedKernel::new,
            TransformedKernel::flipped_transposed,
        ];
        check_against_direct_sums(&CASES, kernels, forward, WeightSum::new);
    }
}
