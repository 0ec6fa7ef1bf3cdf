//! 7x1 and 1x7 stride-1 convolutions (Inception v3's factorized 7x7s, a quarter of its
//! convolutions' work) by Winograd's F(3, 7) along the kernel's axis, in f32.
//!
//! Three consecutive outputs down a column (a tile) are `Aᵀ [(G g) ⊙ (Bᵀ d)]`, `g` the 7 taps
//! and `d` the tile's 9 inputs: 9 products per tile and channel pair where the direct
//! convolution takes 21. As in [`crate::flex::conv::winograd`], summed over the input channels the 9
//! element-wise products become 9 matrix products `M[p] = U[p] · V[p]` for gemm, and the
//! weight gradient is `Gᵀ dU`, `dU[p] = Σ dM[p] · V[p]ᵀ` over the tiles with `dM = A dy`.
//!
//! The matrices are the Toom-Cook ones for the points 0, ±1, ±2, ±½, 3 and infinity (built
//! as in Lavin & Gray's `wincnn`). Against the direct sum in f64 a tile's f32 result is off by
//! at most 6e-6 of the sum of its products' magnitudes (F(4, 7) with one point more: 9e-6),
//! and tested against Burn's convolution.
//!
//! A 1x7 convolution is the 7x1 one of the transposed planes: its input planes are
//! transposed in, its output planes out (a copy of each plane, against 21 multiply-adds per
//! output and channel pair). Blocks hold whole images, enough for gemm's columns (17x17 maps:
//! 102 tiles an image, three images a block).

use std::cell::RefCell;

use multiversion::multiversion;
use rayon::prelude::*;

use crate::flex::conv::winograd::{
    self, BLOCK_TILES, MIN_CHANNELS, PointSums, TransformedWeightSum, assert_batch, multiply_points,
};
use crate::flex::gemm::transpose::transpose_each;

/// Outputs per tile, taps, and points (inputs per tile): F(3, 7).
const OUTPUTS: usize = 3;
const TAPS: usize = 7;
const POINTS: usize = OUTPUTS + TAPS - 1;

/// `Aᵀ`: a tile's outputs from its points' products.
const AT: [[f32; POINTS]; OUTPUTS] = [
    [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0],
    [0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, 0.0],
    [0.0, 1.0, 1.0, 4.0, 4.0, 0.25, 0.25, 9.0, 1.0],
];

/// `Bᵀ`: a tile's points from its inputs.
const BT: [[f32; POINTS]; POINTS] = [
    [3.0, -1.0, -15.75, 5.25, 15.75, -5.25, -3.0, 1.0, 0.0],
    [0.0, -3.0, -2.0, 13.75, 8.5, -7.25, -2.0, 1.0, 0.0],
    [0.0, 3.0, -4.0, -11.75, 17.0, -1.25, -4.0, 1.0, 0.0],
    [0.0, -1.5, -0.25, 7.75, 1.25, -7.25, -1.0, 1.0, 0.0],
    [0.0, 1.5, -1.25, -7.25, 6.25, 4.75, -5.0, 1.0, 0.0],
    [0.0, -6.0, -10.0, 11.5, 12.5, -6.5, -2.5, 1.0, 0.0],
    [0.0, 6.0, -14.0, -3.5, 17.5, -3.5, -3.5, 1.0, 0.0],
    [0.0, -1.0, 0.0, 5.25, 0.0, -5.25, 0.0, 1.0, 0.0],
    [0.0, 3.0, -1.0, -15.75, 5.25, 15.75, -5.25, -3.0, 1.0],
];

/// `G`: the points from the taps, `numerator / denominator` (exact in f64).
const G: [([f64; TAPS], f64); POINTS] = [
    ([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], 3.0),
    ([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0], 9.0),
    ([1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0], 18.0),
    ([-1.0, -2.0, -4.0, -8.0, -16.0, -32.0, -64.0], 90.0),
    ([-1.0, 2.0, -4.0, 8.0, -16.0, 32.0, -64.0], 450.0),
    ([-64.0, -32.0, -16.0, -8.0, -4.0, -2.0, -1.0], 225.0),
    ([-64.0, 32.0, -16.0, 8.0, -4.0, 2.0, -1.0], 315.0),
    ([1.0, 3.0, 9.0, 27.0, 81.0, 243.0, 729.0], 1050.0),
    ([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0], 1.0),
];

/// Whether a convolution of `c` channels into `out` by a `kernel` at `stride` and `padding`,
/// producing `out_size` (`[h, w]`) outputs per image, goes here: 7x1 or 1x7 at stride 1, not
/// padded across its axis, with channels enough on both sides and tiles enough per image for
/// the transforms to pay (Inception v3's 17x17 maps at 299x299: 102 tiles; at 75x75 its
/// 2x2 maps have 2 and stay direct).
pub(crate) fn pays_off(
    [c, out]: [usize; 2],
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    out_size: [usize; 2],
) -> bool {
    let (unpadded_across, [along, across]) = match kernel {
        [TAPS, 1] => (padding[1] == 0, out_size),
        [1, TAPS] => (padding[0] == 0, [out_size[1], out_size[0]]),
        _ => return false,
    };
    let tiles = along.div_ceil(OUTPUTS) * across;
    unpadded_across
        && stride == [1, 1]
        && c.min(out) >= MIN_CHANNELS
        && tiles >= BLOCK_TILES / 4
        && winograd::allowed()
}

/// The kernel's axis: down the columns (7x1) or along the rows (1x7, by transposed planes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Axis {
    Columns,
    Rows,
}

impl Axis {
    fn of([kh, kw]: [usize; 2]) -> Self {
        match [kh, kw] {
            [TAPS, 1] => Axis::Columns,
            [1, TAPS] => Axis::Rows,
            _ => panic!("not a 7x1 or 1x7 kernel: {kh}x{kw}"),
        }
    }
}

/// A 7x1 or 1x7 kernel transformed (`U = G g`), as 9 matrices `[out × c]`.
pub(crate) struct TransformedKernel {
    u: Vec<f32>,
    out: usize,
    c: usize,
    axis: Axis,
}

impl TransformedKernel {
    /// `weight`: `[out, c, 7, 1]` or `[out, c, 1, 7]` (`dims`).
    pub(crate) fn new(weight: &[f32], dims: [usize; 4]) -> Self {
        let [out, c, kh, kw] = dims;
        assert_eq!(weight.len(), out * c * TAPS, "not a {dims:?} kernel");
        Self::from_fn([kh, kw], [out, c], |o, ch, k| {
            weight[(o * c + ch) * TAPS + k]
        })
    }

    /// The kernel of the input gradient of a convolution by `weight` (`dims`): inputs and
    /// outputs swapped, the taps reversed.
    pub(crate) fn flipped_transposed(weight: &[f32], dims: [usize; 4]) -> Self {
        let [out, c, kh, kw] = dims;
        assert_eq!(weight.len(), out * c * TAPS, "not a {dims:?} kernel");
        Self::from_fn([kh, kw], [c, out], |ch, o, k| {
            weight[(o * c + ch) * TAPS + TAPS - 1 - k]
        })
    }

    /// `g(o, ch, tap)` of a `kernel`-shaped kernel transformed, for a product of `out` outputs
    /// from `c` channels; the points shared among rayon's threads (on the calling thread
    /// alone, Inception v3's 7-tap kernels took ~7 ms of its step while the other core waited).
    fn from_fn(
        kernel: [usize; 2],
        [out, c]: [usize; 2],
        g: impl Fn(usize, usize, usize) -> f32 + Sync,
    ) -> Self {
        let axis = Axis::of(kernel);
        let mut u = vec![0f32; POINTS * out * c];
        u.par_chunks_mut((out * c).max(1))
            .zip(G.par_iter())
            .for_each(|(u, (row, denominator))| {
                for (at, u) in u.iter_mut().enumerate() {
                    let (o, ch) = (at / c, at % c);
                    let sum: f64 = (row.iter().enumerate())
                        .map(|(k, g_k)| g_k * f64::from(g(o, ch, k)))
                        .sum();
                    *u = (sum / denominator) as f32;
                }
            });
        Self { u, out, c, axis }
    }
}

/// The sizes of one convolution down the columns: input `[c, h, w]`, its padding above and
/// below, outputs and tiles.
#[derive(Clone, Copy, Debug)]
struct Geometry {
    c: usize,
    h: usize,
    w: usize,
    pad: usize,
    oh: usize,
    /// Tiles per column: `ceil(oh / 3)`, each `w` wide.
    th: usize,
}

impl Geometry {
    fn new([c, h, w]: [usize; 3], pad: usize) -> Self {
        assert!(
            h + 2 * pad >= TAPS,
            "7 taps do not fit {h} rows padded by {pad}"
        );
        let oh = h + 2 * pad - (TAPS - 1);
        Self {
            c,
            h,
            w,
            pad,
            oh,
            th: oh.div_ceil(OUTPUTS),
        }
    }

    fn tiles(&self) -> usize {
        self.th * self.w
    }

    /// Whole images per block: `BLOCK_TILES` tiles or more.
    fn images_per_block(&self) -> usize {
        BLOCK_TILES.div_ceil(self.tiles().max(1))
    }
}

/// Per-thread buffers, kept between calls so that the steady state allocates nothing.
#[derive(Default)]
struct Scratch {
    /// Transformed inputs of a block: `[9][c][tiles]`.
    patches: Vec<f32>,
    /// Products of a block: `[9][out][tiles]`.
    products: Vec<f32>,
    /// The output gradient of a block transformed, `[9][out][tiles]`, and a point of it
    /// transposed for gemm (`scratch`).
    gradient: Vec<f32>,
    scratch: Vec<f32>,
    /// A block's input and output (or output gradient) planes transposed, for 1x7 kernels.
    input: Vec<f32>,
    output: Vec<f32>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// `y = conv(x, kernel)` for `images` images `[c, h, w]` (`x`) and outputs `[out, oh, ow]`
/// (`y`), padded by `padding`, on the calling thread.
pub(crate) fn forward(
    y: &mut [f32],
    x: &[f32],
    [images, c, h, w]: [usize; 4],
    kernel: &TransformedKernel,
    padding: [usize; 2],
) {
    assert_eq!(kernel.c, c, "a kernel for {} channels, not {c}", kernel.c);
    let out = kernel.out;
    let (g, transposed) = geometry([c, h, w], padding, kernel.axis);
    let (in_image, out_image) = (c * h * w, out * g.oh * g.w);
    assert_batch([x.len(), y.len()], [images, c, h, w], out_image);
    let per_block = g.images_per_block();
    SCRATCH.with_borrow_mut(|s| {
        let blocks = x.chunks(per_block * in_image.max(1));
        for (x, y) in blocks.zip(y.chunks_mut(per_block * out_image.max(1))) {
            let block = x.len() / in_image.max(1);
            let x = if transposed {
                s.input.resize(x.len(), 0.0);
                transpose_each(&mut s.input, x, [h, w]);
                &s.input[..]
            } else {
                x
            };
            transform_input(&mut s.patches, x, g, block);
            multiply(s, kernel, block * g.tiles());
            if transposed {
                s.output.resize(y.len(), 0.0);
                transform_output(&mut s.output, &s.products, g, out, block);
                transpose_each(y, &s.output, [g.oh, g.w]);
            } else {
                transform_output(y, &s.products, g, out, block);
            }
        }
    });
}

/// The geometry down the columns of a convolution by a kernel along `axis`, and whether the
/// planes are transposed to get it.
fn geometry([c, h, w]: [usize; 3], [ph, pw]: [usize; 2], axis: Axis) -> (Geometry, bool) {
    let across = match axis {
        Axis::Columns => pw,
        Axis::Rows => ph,
    };
    assert_eq!(across, 0, "a {axis:?} kernel padded across its axis");
    match axis {
        Axis::Columns => (Geometry::new([c, h, w], ph), false),
        Axis::Rows => (Geometry::new([c, w, h], pw), true),
    }
}

/// `M[p] = U[p] · V[p]` for each point `p`, into `s.products` (`[9][out][tiles]`).
fn multiply(s: &mut Scratch, kernel: &TransformedKernel, tiles: usize) {
    let sizes = [POINTS, kernel.out, kernel.c, tiles];
    multiply_points(&mut s.products, &kernel.u, &s.patches, sizes);
}

/// Columns handled at a time by the transforms: one AVX-512 vector.
const LANES: usize = 16;

/// The first `LANES` values of `src`, zeros past its end.
#[inline(always)]
fn load(src: &[f32]) -> [f32; LANES] {
    match src.first_chunk::<LANES>() {
        Some(whole) => *whole,
        None => core::array::from_fn(|l| src.get(l).copied().unwrap_or(0.0)),
    }
}

/// `values` into `dst`, as many as it holds (up to `LANES`).
#[inline(always)]
fn store(dst: &mut [f32], values: &[f32; LANES]) {
    match dst.first_chunk_mut::<LANES>() {
        Some(whole) => *whole = *values,
        None => {
            let len = dst.len();
            dst.copy_from_slice(&values[..len]);
        }
    }
}

/// `V = Bᵀ d` for every channel and tile of `images` images `[c, h, w]` (`x`), into `patches`
/// (`[9][c][tiles]`, an image's tiles `[tile row][column]` after the previous image's).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn transform_input(patches: &mut Vec<f32>, x: &[f32], g: Geometry, images: usize) {
    let (c, w) = (g.c, g.w);
    let tiles = images * g.tiles();
    patches.resize(POINTS * c * tiles, 0.0);
    for (i, image) in x
        .chunks_exact((c * g.h * w).max(1))
        .take(images)
        .enumerate()
    {
        for (ch, plane) in image.chunks_exact((g.h * w).max(1)).enumerate() {
            for t in 0..g.th {
                for x0 in (0..w).step_by(LANES) {
                    let lanes = (w - x0).min(LANES);
                    let mut sums = [[0f32; LANES]; POINTS];
                    for q in 0..POINTS {
                        let Some(row) = (OUTPUTS * t + q).checked_sub(g.pad).filter(|&r| r < g.h)
                        else {
                            continue;
                        };
                        let d = load(&plane[row * w + x0..][..lanes]);
                        for (sum, bt) in sums.iter_mut().zip(&BT) {
                            let b = bt[q];
                            for (sum, d) in sum.iter_mut().zip(d) {
                                *sum += b * d;
                            }
                        }
                    }
                    let tile = i * g.tiles() + t * w + x0;
                    for (p, sum) in sums.iter().enumerate() {
                        store(&mut patches[(p * c + ch) * tiles + tile..][..lanes], sum);
                    }
                }
            }
        }
    }
}

/// `Y = Aᵀ M` for every output channel and tile of `images` images, from `products`
/// (`[9][out][tiles]`) into their outputs `y` (`[out, oh, w]` each).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn transform_output(y: &mut [f32], products: &[f32], g: Geometry, out: usize, images: usize) {
    let w = g.w;
    let tiles = images * g.tiles();
    for (i, image) in y
        .chunks_exact_mut((out * g.oh * w).max(1))
        .take(images)
        .enumerate()
    {
        for (o, plane) in image.chunks_exact_mut((g.oh * w).max(1)).enumerate() {
            for t in 0..g.th {
                for x0 in (0..w).step_by(LANES) {
                    let lanes = (w - x0).min(LANES);
                    let tile = i * g.tiles() + t * w + x0;
                    let mut sums = [[0f32; LANES]; OUTPUTS];
                    for p in 0..POINTS {
                        let m = load(&products[(p * out + o) * tiles + tile..][..lanes]);
                        for (sum, at) in sums.iter_mut().zip(&AT) {
                            let a = at[p];
                            for (sum, m) in sum.iter_mut().zip(m) {
                                *sum += a * m;
                            }
                        }
                    }
                    for (r, sum) in sums.iter().enumerate() {
                        let row = OUTPUTS * t + r;
                        if row < g.oh {
                            store(&mut plane[row * w + x0..][..lanes], sum);
                        }
                    }
                }
            }
        }
    }
}

/// `dM = A dy` for every output channel and tile of `images` images' output gradients
/// (`grad`, `[out, oh, w]` each; zero past the outputs), into `gradient` (`[9][out][tiles]`).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn transform_gradient(
    gradient: &mut Vec<f32>,
    grad: &[f32],
    g: Geometry,
    out: usize,
    images: usize,
) {
    let w = g.w;
    let tiles = images * g.tiles();
    gradient.resize(POINTS * out * tiles, 0.0);
    for (i, image) in grad
        .chunks_exact((out * g.oh * w).max(1))
        .take(images)
        .enumerate()
    {
        for (o, plane) in image.chunks_exact((g.oh * w).max(1)).enumerate() {
            for t in 0..g.th {
                for x0 in (0..w).step_by(LANES) {
                    let lanes = (w - x0).min(LANES);
                    let dy: [[f32; LANES]; OUTPUTS] = core::array::from_fn(|r| {
                        let row = OUTPUTS * t + r;
                        match row < g.oh {
                            true => load(&plane[row * w + x0..][..lanes]),
                            false => [0.0; LANES],
                        }
                    });
                    let tile = i * g.tiles() + t * w + x0;
                    for p in 0..POINTS {
                        let mut dm = [0f32; LANES];
                        for (at, dy) in AT.iter().zip(&dy) {
                            let a = at[p];
                            for (dm, dy) in dm.iter_mut().zip(dy) {
                                *dm += a * dy;
                            }
                        }
                        store(&mut gradient[(p * out + o) * tiles + tile..][..lanes], &dm);
                    }
                }
            }
        }
    }
}

/// One thread's running sum of a 7x1 or 1x7 convolution's weight gradient in the transformed
/// domain, `dU[p] = Σ dM[p] · V[p]ᵀ` over tiles; the gradient is `Gᵀ dU` (`into_weights`).
pub(crate) struct WeightSum {
    sums: PointSums,
    axis: Axis,
}

impl WeightSum {
    /// Zeros, for a kernel of `dims` (`[out, c, 7, 1]` or `[out, c, 1, 7]`).
    pub(crate) fn new(dims: [usize; 4]) -> Self {
        let [out, c, kh, kw] = dims;
        Self {
            sums: PointSums::new(POINTS, [out, c]),
            axis: Axis::of([kh, kw]),
        }
    }
}

impl TransformedWeightSum for WeightSum {
    fn add(&mut self, x: &[f32], [images, c, h, w]: [usize; 4], grad: &[f32], padding: [usize; 2]) {
        assert_eq!(
            c, self.sums.c,
            "a sum for {} channels, not {c}",
            self.sums.c
        );
        let out = self.sums.out;
        let (g, transposed) = geometry([c, h, w], padding, self.axis);
        let (in_image, out_image) = (c * h * w, out * g.oh * g.w);
        assert_batch([x.len(), grad.len()], [images, c, h, w], out_image);
        let per_block = g.images_per_block();
        SCRATCH.with_borrow_mut(|s| {
            let blocks = x.chunks(per_block * in_image.max(1));
            for (x, grad) in blocks.zip(grad.chunks(per_block * out_image.max(1))) {
                let block = x.len() / in_image.max(1);
                let (x, grad) = if transposed {
                    s.input.resize(x.len(), 0.0);
                    transpose_each(&mut s.input, x, [h, w]);
                    s.output.resize(grad.len(), 0.0);
                    transpose_each(&mut s.output, grad, [g.w, g.oh]);
                    (&s.input[..], &s.output[..])
                } else {
                    (x, grad)
                };
                transform_input(&mut s.patches, x, g, block);
                transform_gradient(&mut s.gradient, grad, g, out, block);
                let tiles = block * g.tiles();
                self.sums
                    .add(&s.gradient, &s.patches, tiles, &mut s.scratch);
            }
        });
    }

    fn merge(self, other: Self) -> Self {
        Self {
            sums: self.sums.plus(&other.sums),
            ..self
        }
    }

    /// `Gᵀ dU`, `[out, c, 7, 1]` or `[out, c, 1, 7]` (the same values), on rayon's threads.
    fn into_weights(self) -> Vec<f32> {
        let mut weights = vec![0f32; self.sums.out * self.sums.c * TAPS];
        let kernels = weights.par_chunks_exact_mut(TAPS).enumerate();
        kernels.for_each(|(index, taps)| {
            for (k, tap) in taps.iter_mut().enumerate() {
                let sum: f64 = G
                    .iter()
                    .enumerate()
                    .map(|(p, (row, denominator))| {
                        row[k] / denominator * f64::from(self.sums.at(p, index))
                    })
                    .sum();
                *tap = sum as f32;
            }
        });
        weights
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flex::conv::winograd::summed_in_two;
    use crate::test_util::ConvCase;

    /// Both axes, SAME and narrower padding, planes not square, a last tile of one or two
    /// outputs.
    const CASES: [ConvCase; 5] = [
        case([2, 3, 17, 17], 4, [7, 1], [3, 0]),
        case([2, 3, 17, 17], 4, [1, 7], [0, 3]),
        case([1, 5, 9, 20], 3, [7, 1], [0, 0]),
        case([3, 2, 11, 6], 5, [1, 7], [0, 2]),
        case([1, 2, 7, 33], 2, [7, 1], [1, 0]),
    ];

    const fn case(
        images: [usize; 4],
        out: usize,
        kernel: [usize; 2],
        padding: [usize; 2],
    ) -> ConvCase {
        ConvCase {
            images,
            out,
            kernel,
            padding,
        }
    }

    fn dims(case: &ConvCase) -> [usize; 4] {
        [case.out, case.images[1], case.kernel[0], case.kernel[1]]
    }

    /// Which shapes come here: both axes on Inception's 17x17 maps, unless
    /// `TOWERS_NO_WINOGRAD` is set; not padded across the axis, too few channels or tiles.
    #[test]
    fn pays_off_where_measured() {
        let on = winograd::allowed();
        assert_eq!(pays_off([64, 64], [7, 1], [1, 1], [3, 0], [17, 17]), on);
        assert_eq!(pays_off([64, 64], [1, 7], [1, 1], [0, 3], [17, 17]), on);
        assert!(!pays_off([64, 64], [7, 1], [1, 1], [3, 1], [17, 17]));
        assert!(!pays_off([32, 64], [7, 1], [1, 1], [3, 0], [17, 17]));
        assert!(!pays_off([64, 64], [1, 7], [1, 1], [0, 3], [2, 2]));
    }

    #[test]
    fn matches_the_direct_convolution() {
        for case in CASES {
            case.check_forward(1e-5, |y, x, weight| {
                let kernel = TransformedKernel::new(weight, dims(&case));
                forward(y, x, case.images, &kernel, case.padding);
            });
        }
    }

    #[test]
    fn weight_gradient_matches_the_direct_sum() {
        for case in CASES {
            case.check_weight_grad(1e-5, |x, grad| {
                summed_in_two(&case, x, grad, || WeightSum::new(dims(&case)))
            });
        }
    }

    /// The input gradient: the output gradient convolved by the flipped, transposed kernel,
    /// padded by 6 - p along the axis.
    #[test]
    fn flipped_transposed_kernel_is_the_input_gradients() {
        for case in CASES {
            let [n, _, _, _] = case.images;
            let [oh, ow] = case.out_size();
            case.check_adjoint(
                |y, x, weight| {
                    let kernel = TransformedKernel::new(weight, dims(&case));
                    forward(y, x, case.images, &kernel, case.padding);
                },
                |dx, grad, weight| {
                    let flipped = TransformedKernel::flipped_transposed(weight, dims(&case));
                    let images = [n, case.out, oh, ow];
                    forward(dx, grad, images, &flipped, case.flipped_padding());
                },
            );
        }
    }
}
