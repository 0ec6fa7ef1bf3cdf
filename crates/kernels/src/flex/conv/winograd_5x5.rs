//! 5x5 stride-1 convolutions by Winograd's minimal filtering F(2×2, 5×5), in f32: 36 products
//! per 2×2 block of outputs (a tile) and channel pair where the direct convolution takes 100.
//!
//! The same scheme as [`crate::flex::conv::winograd`]'s F(2×2, 3×3) with 6×6 patches: a tile's outputs are
//! `Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A`, summed over the input channels as 36 matrix products
//! `M[p] = U[p] · V[p]`, the transforms those of Toom-Cook at the points 0, ±1, ±2 and ∞ (the
//! `Bᵀ` of Lavin & Gray's F(4×4, 3×3)). Their entries reach 5 (`Bᵀ`) and 1/24 (`G`), so the
//! result differs from the direct sum by some tens of f32 roundings of the inputs' magnitude:
//! fine for training, and tested against the direct sums in f64.
//!
//! The CIFAR-10 net's conv2 (5x5, 64 -> 64 on 12x12 maps) has only 36 tiles per image, too
//! few columns for gemm's rate, so a block takes several whole images where one image has
//! fewer tiles than [`BLOCK_TILES`]; larger images (Inception's 35x35 5x5s) go a few tile rows
//! at a time, as in [`crate::flex::conv::winograd`]. The transforms are written once, as loops over all the
//! block's tiles with the matrices' entries as constants, which the compiler vectorizes.

use std::cell::RefCell;
use std::ops::Range;

use multiversion::multiversion;
use rayon::prelude::*;

use crate::flex::conv::winograd::{
    PointSums, TransformedWeightSum, allowed, assert_batch, multiply_points, square_taps,
};
use crate::flex::gemm::bf16_gemm::Strided;
use crate::flex::gemm::transpose::transpose;

/// Points of a transformed tile along one side, and in all.
const SIDE: usize = 6;
const POINTS: usize = SIDE * SIDE;

/// `G`: 5 kernel taps to 6 points.
const G: [[f32; 5]; SIDE] = [
    [1.0 / 4.0, 0.0, 0.0, 0.0, 0.0],
    [-1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0],
    [-1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0],
    [1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0, 1.0 / 3.0, 2.0 / 3.0],
    [1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0, -1.0 / 3.0, 2.0 / 3.0],
    [0.0, 0.0, 0.0, 0.0, 1.0],
];

/// Channels below which, on either side, the direct kernels are kept (Inception's 48 -> 64 and the
/// CIFAR-10 net's 64 -> 64 won, measured; fewer not tried).
pub(crate) const MIN_CHANNELS: usize = 32;

/// Whether a convolution of `c` channels into `out` by a `kernel` at `stride`, each thread
/// taking `share` images, goes here: 5x5 at stride 1 with channels enough on both sides (the
/// CIFAR-10 net's conv2, Inception v3's 35x35 5x5s) and the share filling its groups' lanes
/// ([`fills_lanes`]), unless `TOWERS_NO_WINOGRAD` is set.
pub(crate) fn pays_off(
    [c, out]: [usize; 2],
    kernel: [usize; 2],
    stride: [usize; 2],
    share: usize,
) -> bool {
    kernel == [5, 5]
        && stride == [1, 1]
        && c.min(out) >= MIN_CHANNELS
        && fills_lanes(share)
        && allowed()
}

/// Whether `images` on one thread leave at most an eighth of their groups' lanes idle.
///
/// Every group costs 16 images' transforms and products however few it holds, and F(2x2, 5x5)
/// saves only 10–15% over the direct kernels: at batch 32 on 16 threads (2 images a thread)
/// it did the work of 256 images for 32, and Inception's Mixed_5b–5d took 2.5–3x as long as on
/// 2 threads (oversubscribed on 2 cores, 2026-11-27; bench/HISTORY.md).
fn fills_lanes(images: usize) -> bool {
    let lanes = images.div_ceil(LANES) * LANES;
    images > 0 && 8 * images >= 7 * lanes
}

/// A 5x5 kernel transformed (`U = G g Gᵀ`), as 36 matrices `[out × c]`.
pub(crate) struct TransformedKernel {
    u: Vec<f32>,
    out: usize,
    c: usize,
}

impl TransformedKernel {
    /// `weight`: `[out, c, 5, 5]`.
    pub(crate) fn new(weight: &[f32], dims: [usize; 2]) -> Self {
        let (dims, taps) = square_taps(weight, dims, 5, false);
        Self::from_fn(dims, taps)
    }

    /// The kernel of the input gradient of a convolution by `weight` (`[out, c, 5, 5]`): inputs
    /// and outputs swapped, flipped in both directions.
    pub(crate) fn flipped_transposed(weight: &[f32], dims: [usize; 2]) -> Self {
        let (dims, taps) = square_taps(weight, dims, 5, true);
        Self::from_fn(dims, taps)
    }

    /// `g(o, ch, ky, kx)` transformed, a kernel per task, then the `[out·c][36]` results
    /// transposed into the points' matrices by 16×16 blocks (one at a time on the calling
    /// thread was the serial part of the call).
    fn from_fn([out, c]: [usize; 2], g: impl Fn(usize, usize, usize, usize) -> f32 + Sync) -> Self {
        let kernels: Vec<f32> = (0..out * c)
            .into_par_iter()
            .flat_map_iter(|index| {
                let (o, ch) = (index / c, index % c);
                let taps: [[f32; 5]; 5] =
                    core::array::from_fn(|ky| core::array::from_fn(|kx| g(o, ch, ky, kx)));
                transform_kernel(&taps)
            })
            .collect();
        let mut u = vec![0f32; POINTS * out * c];
        let kernels = Strided::row_major(&kernels, POINTS);
        transpose(&mut u, &kernels, [out * c, POINTS]);
        Self { u, out, c }
    }
}

/// `G g Gᵀ` for one 5x5 kernel, point `6i + j` at `[6i + j]`.
fn transform_kernel(g: &[[f32; 5]; 5]) -> [f32; POINTS] {
    // G g: [6][5].
    let rows: [[f32; 5]; SIDE] = core::array::from_fn(|i| {
        core::array::from_fn(|kx| (0..5).map(|ky| G[i][ky] * g[ky][kx]).sum())
    });
    core::array::from_fn(|p| {
        let (i, j) = (p / SIDE, p % SIDE);
        (0..5).map(|kx| rows[i][kx] * G[j][kx]).sum()
    })
}

/// Images whose tiles are transformed side by side, one per vector lane.
const LANES: usize = 16;

/// A tile's value in each image of a group.
type Lanes = [f32; LANES];

/// Columns of a block's products (a tile of each image of a group per 16): wide enough for
/// gemm's rate, narrow enough that the block's patches stay in L2 for it.
const BLOCK_SLOTS: usize = 512;

/// The sizes of one convolution: input channels, outputs and tiles.
#[derive(Clone, Copy, Debug)]
struct Geometry {
    c: usize,
    oh: usize,
    ow: usize,
    /// Tiles per column and per row: `ceil(oh / 2)`, `ceil(ow / 2)`.
    th: usize,
    tw: usize,
}

impl Geometry {
    fn new([c, h, w]: [usize; 3], [ph, pw]: [usize; 2]) -> Self {
        assert!(
            h + 2 * ph >= 5 && w + 2 * pw >= 5,
            "a 5x5 kernel does not fit a {h}x{w} image padded by {ph}x{pw}"
        );
        let (oh, ow) = (h + 2 * ph - 4, w + 2 * pw - 4);
        Self {
            c,
            oh,
            ow,
            th: oh.div_ceil(2),
            tw: ow.div_ceil(2),
        }
    }

    fn tiles(&self) -> usize {
        self.th * self.tw
    }

    /// The padded input planes the tiles read, `[2·th + 4, 2·tw + 4]`.
    fn padded(&self) -> [usize; 2] {
        [2 * self.th + 4, 2 * self.tw + 4]
    }
}

/// The tile ranges of a group's blocks: `BLOCK_SLOTS / LANES` tiles at most, split evenly.
fn tile_ranges(tiles: usize) -> impl Iterator<Item = Range<usize>> {
    let ranges = (tiles * LANES).div_ceil(BLOCK_SLOTS).max(1);
    let per = tiles.div_ceil(ranges).max(1);
    (0..tiles)
        .step_by(per)
        .map(move |first| first..(first + per).min(tiles))
}

/// Per-thread buffers, kept between calls so that the steady state allocates nothing.
#[derive(Default)]
struct Scratch {
    /// A group's input planes, padded, as lanes: `[c][hp][wp][LANES]`.
    input: Vec<f32>,
    /// A group's outputs, or their gradient, as lanes: `[out][rows][columns][LANES]`.
    output: Vec<f32>,
    /// One plane between the two layouts.
    plane: Vec<f32>,
    /// Transformed patches of a block: `[36][c][slots]`.
    patches: Vec<f32>,
    /// Products of a block: `[36][out][slots]`.
    products: Vec<f32>,
    /// The output gradient of a block transformed, `[36][out][slots]`, and a point of it
    /// transposed for gemm (`scratch`).
    gradient: Vec<f32>,
    scratch: Vec<f32>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// `y = conv(x, kernel)` for `images` images `[c, h, w]` (`x`) and outputs `[out, oh, ow]`
/// (`y`), on the calling thread: 16 images at a time, as lanes, a block of tiles at a time.
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
    let (x_size, y_size) = (c * h * w, out * g.oh * g.ow);
    assert_batch([x.len(), y.len()], [images, c, h, w], y_size);
    SCRATCH.with_borrow_mut(|s| {
        for first in (0..images).step_by(LANES) {
            let group = (images - first).min(LANES);
            let x = &x[first * x_size..][..group * x_size];
            to_lanes(
                &mut s.input,
                x,
                group,
                [c, h, w],
                padding,
                g.padded(),
                &mut s.plane,
            );
            s.output.resize(out * g.oh * g.ow * LANES, 0.0);
            for tiles in tile_ranges(g.tiles()) {
                let slots = tiles.len() * LANES;
                s.patches.resize(POINTS * c * slots, 0.0);
                transform_input(&mut s.patches, &s.input, g, tiles.clone());
                let sizes = [POINTS, out, c, slots];
                multiply_points(&mut s.products, &kernel.u, &s.patches, sizes);
                transform_output(&mut s.output, &s.products, g, out, tiles);
            }
            let y = &mut y[first * y_size..][..group * y_size];
            from_lanes(y, &s.output, group, [out, g.oh, g.ow], &mut s.plane);
        }
    });
}

/// The `[planes, h, w]` images of `src` (`images` of them, at most 16) as lanes into `dst`:
/// `dst[plane][top + y][left + x][image]`, zeros around them up to `[rows, columns]` and in
/// the lanes past `images`. A whole group goes by 16×16 transposes.
fn to_lanes(
    dst: &mut Vec<f32>,
    src: &[f32],
    images: usize,
    [planes, h, w]: [usize; 3],
    [top, left]: [usize; 2],
    [rows, columns]: [usize; 2],
    plane: &mut Vec<f32>,
) {
    dst.clear();
    dst.resize(planes * rows * columns * LANES, 0.0);
    plane.resize(h * w * LANES, 0.0);
    for p in 0..planes {
        if images == LANES {
            let src = Strided::row_major(&src[p * h * w..], planes * h * w);
            transpose(plane, &src, [LANES, h * w]);
        } else {
            plane.fill(0.0);
            for lane in 0..images {
                let values = &src[(lane * planes + p) * h * w..][..h * w];
                for (place, &value) in values.iter().enumerate() {
                    plane[place * LANES + lane] = value;
                }
            }
        }
        for y in 0..h {
            let at = ((p * rows + top + y) * columns + left) * LANES;
            dst[at..][..w * LANES].copy_from_slice(&plane[y * w * LANES..][..w * LANES]);
        }
    }
}

/// The inverse of [`to_lanes`] without a border: the `[planes, h, w]` lanes of `src` into the
/// first `images` images of `dst`.
fn from_lanes(
    dst: &mut [f32],
    src: &[f32],
    images: usize,
    [planes, h, w]: [usize; 3],
    plane: &mut Vec<f32>,
) {
    let size = h * w;
    plane.resize(size * LANES, 0.0);
    for p in 0..planes {
        let src = Strided::row_major(&src[p * size * LANES..][..size * LANES], LANES);
        transpose(plane, &src, [size, LANES]);
        for lane in 0..images {
            dst[(lane * planes + p) * size..][..size]
                .copy_from_slice(&plane[lane * size..][..size]);
        }
    }
}

/// `Bᵀ d` lane by lane, `Bᵀ` the 6×6 matrix whose rows are `(4, 0, -5, 0, 1, 0)`, `(0, -4, -4,
/// 1, 1, 0)`, `(0, 4, -4, -1, 1, 0)`, `(0, -2, -1, 2, 1, 0)`, `(0, 2, -1, -2, 1, 0)` and `(0, 4,
/// 0, -5, 0, 1)` (Lavin & Gray's F(4, 3)'s), the common differences taken once.
#[inline(always)]
fn bt(d: [&Lanes; SIDE], v: &mut [Lanes; SIDE]) {
    let [a, b, c, e, f, g] = d;
    for l in 0..LANES {
        v[0][l] = 4.0 * a[l] - 5.0 * c[l] + f[l];
        v[1][l] = (e[l] + f[l]) - 4.0 * (b[l] + c[l]);
        v[2][l] = (f[l] - e[l]) + 4.0 * (b[l] - c[l]);
        v[3][l] = (f[l] - c[l]) + 2.0 * (e[l] - b[l]);
        v[4][l] = (f[l] - c[l]) - 2.0 * (e[l] - b[l]);
        v[5][l] = 4.0 * b[l] - 5.0 * e[l] + g[l];
    }
}

/// `Aᵀ m` lane by lane, `Aᵀ` the 2×6 matrix with rows `(1, 1, 1, 1, 1, 0)` and `(0, 1, -1, 2,
/// -2, 1)`.
#[inline(always)]
fn at(m: [&Lanes; SIDE], y: &mut [Lanes; 2]) {
    let [m0, m1, m2, m3, m4, m5] = m;
    for l in 0..LANES {
        y[0][l] = m0[l] + (m1[l] + m2[l]) + (m3[l] + m4[l]);
        y[1][l] = (m1[l] - m2[l]) + 2.0 * (m3[l] - m4[l]) + m5[l];
    }
}

/// `A y`, the adjoint of [`at`], lane by lane.
#[inline(always)]
fn a(y: [&Lanes; 2], m: &mut [Lanes; SIDE]) {
    let [p, q] = y;
    for l in 0..LANES {
        m[0][l] = p[l];
        m[1][l] = p[l] + q[l];
        m[2][l] = p[l] - q[l];
        m[3][l] = p[l] + 2.0 * q[l];
        m[4][l] = p[l] - 2.0 * q[l];
        m[5][l] = q[l];
    }
}

/// The 16 values at `at` of `buffer`.
#[inline(always)]
fn lanes(buffer: &[f32], at: usize) -> &Lanes {
    buffer[at..at + LANES].try_into().unwrap()
}

/// `V = Bᵀ d B` for every channel and tile in `tiles` of a group's padded input lanes
/// (`[c][hp][wp][LANES]`), into `patches` (`[36][c][slots]`, tile `k` of the range at slots
/// `16k ..`): along each of a patch's six rows, then down its six columns.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn transform_input(patches: &mut [f32], input: &[f32], g: Geometry, tiles: Range<usize>) {
    let ([hp, wp], c) = (g.padded(), g.c);
    let slots = tiles.len() * LANES;
    let (mut along, mut v) = ([[[0.0; LANES]; SIDE]; SIDE], [[0.0; LANES]; SIDE]);
    for ch in 0..c {
        let plane = &input[ch * hp * wp * LANES..][..hp * wp * LANES];
        for (k, t) in tiles.clone().enumerate() {
            let (top, left) = (2 * (t / g.tw), 2 * (t % g.tw));
            for (r, along) in along.iter_mut().enumerate() {
                let row =
                    core::array::from_fn(|q| lanes(plane, ((top + r) * wp + left + q) * LANES));
                bt(row, along);
            }
            for j in 0..SIDE {
                bt(along.each_ref().map(|row| &row[j]), &mut v);
                for (i, v) in v.iter().enumerate() {
                    let at = ((i * SIDE + j) * c + ch) * slots + k * LANES;
                    patches[at..at + LANES].copy_from_slice(v);
                }
            }
        }
    }
}

/// `Y = Aᵀ M A` for every output channel and tile in `tiles`, from `products`
/// (`[36][out][slots]`) into a group's output lanes (`[out][oh][ow][LANES]`).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn transform_output(
    output: &mut [f32],
    products: &[f32],
    g: Geometry,
    out: usize,
    tiles: Range<usize>,
) {
    let slots = tiles.len() * LANES;
    let (mut along, mut column) = ([[[0.0; LANES]; 2]; SIDE], [[0.0; LANES]; 2]);
    for o in 0..out {
        let plane = &mut output[o * g.oh * g.ow * LANES..][..g.oh * g.ow * LANES];
        for (k, t) in tiles.clone().enumerate() {
            let m = |i: usize, j: usize| {
                lanes(products, ((i * SIDE + j) * out + o) * slots + k * LANES)
            };
            for (i, along) in along.iter_mut().enumerate() {
                at(core::array::from_fn(|j| m(i, j)), along);
            }
            for b in 0..2 {
                at(along.each_ref().map(|row| &row[b]), &mut column);
                for (a, values) in column.iter().enumerate() {
                    let (oy, ox) = (2 * (t / g.tw) + a, 2 * (t % g.tw) + b);
                    if oy < g.oh && ox < g.ow {
                        let at = (oy * g.ow + ox) * LANES;
                        plane[at..at + LANES].copy_from_slice(values);
                    }
                }
            }
        }
    }
}

/// One thread's running sum of a 5x5 convolution's weight gradient in the transformed domain:
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
        let (x_size, grad_size) = (c * h * w, out * g.oh * g.ow);
        assert_batch([x.len(), grad.len()], [images, c, h, w], grad_size);
        SCRATCH.with_borrow_mut(|s| {
            for first in (0..images).step_by(LANES) {
                let group = (images - first).min(LANES);
                let x = &x[first * x_size..][..group * x_size];
                let grad = &grad[first * grad_size..][..group * grad_size];
                to_lanes(
                    &mut s.input,
                    x,
                    group,
                    [c, h, w],
                    padding,
                    g.padded(),
                    &mut s.plane,
                );
                let (dims, whole) = ([out, g.oh, g.ow], [2 * g.th, 2 * g.tw]);
                to_lanes(
                    &mut s.output,
                    grad,
                    group,
                    dims,
                    [0, 0],
                    whole,
                    &mut s.plane,
                );
                for tiles in tile_ranges(g.tiles()) {
                    let slots = tiles.len() * LANES;
                    s.patches.resize(POINTS * c * slots, 0.0);
                    s.gradient.resize(POINTS * out * slots, 0.0);
                    transform_input(&mut s.patches, &s.input, g, tiles.clone());
                    transform_gradient(&mut s.gradient, &s.output, g, out, tiles);
                    self.0.add(&s.gradient, &s.patches, slots, &mut s.scratch);
                }
            }
        });
    }

    fn merge(self, other: Self) -> Self {
        Self(self.0.plus(&other.0))
    }

    /// `Gᵀ dU G`, `[out, c, 5, 5]`, on rayon's threads.
    fn into_weights(self) -> Vec<f32> {
        let mut weights = vec![0f32; self.0.out * self.0.c * 25];
        let kernels = weights.par_chunks_exact_mut(25).enumerate();
        kernels.for_each(|(index, kernel)| {
            let du = |i: usize, j: usize| self.0.at(SIDE * i + j, index);
            // dU G: [6][5].
            let rows: [[f32; 5]; SIDE] = core::array::from_fn(|i| {
                core::array::from_fn(|kx| (0..SIDE).map(|j| du(i, j) * G[j][kx]).sum())
            });
            for (ky, kernel_row) in kernel.chunks_exact_mut(5).enumerate() {
                for (kx, value) in kernel_row.iter_mut().enumerate() {
                    *value = (0..SIDE).map(|i| G[i][ky] * rows[i][kx]).sum();
                }
            }
        });
        weights
    }
}

/// `dM = A dy Aᵀ` for every output channel and tile in `tiles`, from a group's output
/// gradient lanes (`[out][2·th][2·tw][LANES]`, zeros past the outputs) into `gradient`
/// (`[36][out][slots]`).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn transform_gradient(
    gradient: &mut [f32],
    output: &[f32],
    g: Geometry,
    out: usize,
    tiles: Range<usize>,
) {
    let (slots, [rows, columns]) = (tiles.len() * LANES, [2 * g.th, 2 * g.tw]);
    let (mut along, mut column) = ([[[0.0; LANES]; SIDE]; 2], [[0.0; LANES]; SIDE]);
    for o in 0..out {
        let plane = &output[o * rows * columns * LANES..][..rows * columns * LANES];
        for (k, t) in tiles.clone().enumerate() {
            let (top, left) = (2 * (t / g.tw), 2 * (t % g.tw));
            let dy = |r: usize, q: usize| lanes(plane, ((top + r) * columns + left + q) * LANES);
            for (r, along) in along.iter_mut().enumerate() {
                a([dy(r, 0), dy(r, 1)], along);
            }
            for j in 0..SIDE {
                a(along.each_ref().map(|row| &row[j]), &mut column);
                for (i, values) in column.iter().enumerate() {
                    let at = ((i * SIDE + j) * out + o) * slots + k * LANES;
                    gradient[at..at + LANES].copy_from_slice(values);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flex::conv::winograd::check_against_direct_sums;
    use crate::test_util::ConvCase;

    /// Odd and even outputs, paddings 0..=4 (the input gradient pads by 4 - p), several
    /// images per block (small maps), several blocks per image (a map of over `BLOCK_TILES`
    /// tiles), a last block of fewer rows or images.
    const CASES: [ConvCase; 7] = [
        case([18, 3, 12, 12], 4, [2, 2]),
        case([2, 3, 9, 9], 4, [2, 2]),
        case([1, 5, 20, 17], 3, [0, 0]),
        case([11, 2, 12, 12], 6, [2, 2]),
        case([1, 7, 6, 7], 2, [4, 3]),
        case([3, 1, 5, 5], 1, [0, 0]),
        case([2, 2, 40, 37], 3, [1, 2]),
    ];

    const fn case(images: [usize; 4], out: usize, padding: [usize; 2]) -> ConvCase {
        ConvCase {
            images,
            out,
            kernel: [5, 5],
            padding,
        }
    }

    /// `TOWERS_NO_WINOGRAD` as this process has it (CI's second unit-test pass sets it).
    #[test]
    fn pays_off_where_measured() {
        let on = !crate::flex::gemm::bf16_gemm::turned_off("TOWERS_NO_WINOGRAD");
        assert_eq!(pays_off([64, 64], [5, 5], [1, 1], 64), on);
        assert_eq!(pays_off([48, 64], [5, 5], [1, 1], 16), on);
        assert!(!pays_off([3, 64], [5, 5], [1, 1], 16));
        assert!(!pays_off([64, 64], [5, 5], [2, 2], 16));
        assert!(!pays_off([64, 64], [3, 3], [1, 1], 16));
        // Groups of 16 images, one per lane: a share that leaves more than an eighth of
        // them idle goes to the direct kernels.
        assert!(!pays_off([64, 64], [5, 5], [1, 1], 2));
        assert!(!pays_off([64, 64], [5, 5], [1, 1], 17));
        assert_eq!(pays_off([64, 64], [5, 5], [1, 1], 14), on);
        assert_eq!(pays_off([64, 64], [5, 5], [1, 1], 30), on);
    }

    #[test]
    fn tile_ranges_cover_every_tile_once() {
        for tiles in [1, 36, 324, 361, 1000] {
            let ranges: Vec<_> = tile_ranges(tiles).collect();
            let covered: Vec<usize> = ranges.iter().cloned().flatten().collect();
            assert_eq!(covered, (0..tiles).collect::<Vec<_>>());
            assert!(ranges.iter().all(|r| r.len() * LANES <= BLOCK_SLOTS));
        }
    }

    /// Forward, the weight gradient and the input gradient (the flipped, transposed kernel,
    /// padded by 4 - p).
    #[test]
    fn matches_the_direct_sums() {
        let kernels = [
            TransformedKernel::new,
            TransformedKernel::flipped_transposed,
        ];
        check_against_direct_sums(&CASES, kernels, forward, WeightSum::new);
    }
}
