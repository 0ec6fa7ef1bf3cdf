//! Tests of the bf16 convolutions' engine against f32 convolutions of the same bf16-rounded
//! operands, over the Inception and CIFAR-10 shapes (`CASES`), on whichever engine the CPU has.

use super::weight_grad::weight_grad_on;
use super::*;
use crate::flex::gemm::bf16_gemm::{
    PackedLhs, Strided, amx_available, multiply_bf16, round_to_bf16,
};

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
    for (index, ((&got, &want), &magnitude)) in got.iter().zip(want).zip(magnitude).enumerate() {
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
        let (shape, kernel) = (case.shape(), [case.out, kh, kw]);
        let all = 0..case.out;
        weight_grad_on(
            engine,
            &mut dw,
            Pixels::F32(&x),
            shape,
            (&grad, all.clone()),
            kernel,
            case.padding,
        );
        assert_close(&dw, &want, &magnitude, &format!("weight gradient {case:?}"));
        // From `x` rounded to bf16 already (a rounded batch norm's output), the same bits.
        let mut from_bits = before.clone();
        let bits = rounded_bits(&x);
        let (grads, padding) = ((grad.as_slice(), all), case.padding);
        weight_grad_on(
            engine,
            &mut from_bits,
            Pixels::Bf16(&bits),
            shape,
            grads,
            kernel,
            padding,
        );
        assert_eq!(from_bits, dw, "weight gradient {case:?} from bf16 images");
        // The rows of some output channels alone, as threads that split them take them.
        let outs = case.out / 3..case.out - case.out / 4;
        let rows = case.weight_shape()[1..].iter().product::<usize>();
        let part = outs.start * rows..outs.end * rows;
        let mut dw = before[part.clone()].to_vec();
        weight_grad_on(
            engine,
            &mut dw,
            Pixels::F32(&x),
            shape,
            (&grad, outs.clone()),
            kernel,
            case.padding,
        );
        let what = format!("weight gradient {case:?}, output channels {outs:?}");
        assert_close(&dw, &want[part.clone()], &magnitude[part], &what);
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
    weight_grad(
        &mut dw,
        Pixels::F32(&[]),
        [0, 4, 5, 5],
        (&[], 0..3),
        [3, 3, 3],
        [1, 1],
    );
    assert_eq!(dw, vec![2.0; 3 * 4 * 9]);
    // No channels: the outputs are zero.
    let kernel = PackedKernel::new(&[], [3, 0, 3, 3]);
    let mut y = vec![f32::NAN; 2 * 3 * 25];
    forward(&mut y, &[], [2, 0, 5, 5], &kernel, [1, 1]);
    assert_eq!(y, vec![0.0; 2 * 3 * 25]);
    weight_grad(
        &mut [],
        Pixels::F32(&[]),
        [2, 0, 5, 5],
        (&random(2 * 3 * 25, 2), 0..3),
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
        weight_grad(
            &mut dw,
            Pixels::F32(&[]),
            [2, c, 0, 4],
            (&y, 0..5),
            [5, 3, 3],
            [2, 1],
        );
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

/// Every element of a packed kernel lies in its tile where `Geometry::depth_index` puts it,
/// rounded as `tile_bits` rounds it, and every other place is zero: kernels of several blocks
/// of 16 output channels (each block filled on a thread of its own) and a last partial one,
/// folded (RGB) and not, 3x3 and 1x7, and the input gradient's flipped and transposed kernel.
#[test]
fn packed_kernels_hold_every_value_in_place() {
    use crate::flex::gemm::bf16_gemm::amx::tile_bits;
    for [out, c, kh, kw] in [[40, 3, 3, 3], [37, 70, 3, 3], [20, 33, 1, 7]] {
        let taps = kh * kw;
        let weight = random(out * c * taps, 7);
        let check = |kernel: PackedKernel,
                     [outs, chs]: [usize; 2],
                     value: &dyn Fn(usize, usize, usize) -> f32| {
            let g = Geometry::new([chs, kh, kw], [kh, kw], [0, 0]);
            let (depth_blocks, depth_taps) = (g.channels().div_ceil(DEPTH), g.taps());
            let mut want = vec![ZERO_TILE; kernel.tiles.len()];
            for (o, ch, tap) in (0..outs)
                .flat_map(|o| (0..chs).flat_map(move |ch| (0..taps).map(move |t| (o, ch, t))))
            {
                let [t, v] = g.depth_index(ch, tap);
                let tile = (o / ROWS * depth_taps + t) * depth_blocks + v / DEPTH;
                want[tile].0[o % ROWS * DEPTH + v % DEPTH] = tile_bits(value(o, ch, tap));
            }
            let same = kernel
                .tiles
                .iter()
                .zip(&want)
                .all(|(got, want)| got.0 == want.0);
            assert!(same, "[{outs}, {chs}, {kh}, {kw}]");
        };
        let forward = PackedKernel::new(&weight, [out, c, kh, kw]);
        check(forward, [out, c], &|o, ch, tap| {
            weight[(o * c + ch) * taps + tap]
        });
        let flipped = PackedKernel::flipped_transposed(&weight, [out, c, kh, kw]);
        check(flipped, [c, out], &|i, o, tap| {
            weight[(o * c + i) * taps + taps - 1 - tap]
        });
    }
}
