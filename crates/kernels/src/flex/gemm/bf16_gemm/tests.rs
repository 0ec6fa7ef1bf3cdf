//! Tests of the bf16 products against exact integer products, in every operand layout the
//! packers take (`Layout`).

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
    for (index, ((&got, &want), &magnitude)) in got.iter().zip(want).zip(magnitude).enumerate() {
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
                        unsafe { pack_lhs_tile_contiguous(&mut fast, matrix, [rows, cols], block) };
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

#[cfg(target_arch = "x86_64")]
#[test]
fn a_run_stores_exactly_its_values_and_an_empty_run_nothing() {
    use amx::*;
    use std::mem::MaybeUninit;
    if Avx512Bf16::get().is_none() {
        eprintln!("note: AVX-512 BF16 unavailable here, store_bf16_run is not used");
        return;
    }
    let values = random(32, 67);
    for len in [0, 1, 17, 32] {
        // Guard words after the run: a mask wider than the run would overwrite them.
        let mut words = [MaybeUninit::new(0xdead_u16); 40];
        // SAFETY: AVX-512 BF16 (with F and BW) is present (checked above).
        unsafe { store_bf16_run(&mut words[..len], &values[..len]) };
        for (i, word) in words.iter().enumerate() {
            // SAFETY: every word started initialized.
            let word = unsafe { word.assume_init() };
            let want = if i < len {
                bf16_bits(values[i])
            } else {
                0xdead
            };
            assert_eq!(word, want, "run of {len}, word {i}");
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
#[should_panic(expected = "a run of 0 to 32 values")]
fn a_run_of_unequal_lengths_is_refused() {
    use amx::*;
    use std::mem::MaybeUninit;
    if Avx512Bf16::get().is_none() {
        panic!("a run of 0 to 32 values (AVX-512 BF16 unavailable: nothing to check)");
    }
    let mut words = [MaybeUninit::new(0u16); 8];
    // SAFETY: AVX-512 BF16 (with F and BW) is present (checked above).
    unsafe { store_bf16_run(&mut words[..4], &[1.0; 8]) };
}
