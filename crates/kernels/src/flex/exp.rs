//! [`exp`]: `e^x` as a polynomial the compiler vectorizes, for the activations', softmax's and
//! recurrences' loops; and what they make of it, [`sigmoid`] and [`tanh`].

/// `e^x` within 2 ulp of `f32::exp` where that is normal (Cephes' `expf`: `2^n · p(r)`, `r` the
/// remainder of `x` over `ln 2`, `p` a polynomial of degree 7), 0 below about -87.7 and
/// `e^88.38` (finite) above 88.38 rather than subnormals and infinity: what `sigmoid` needs. Written here
/// because `f32::exp` is a call the compiler does not vectorize, and the vector `exp`s of the
/// SIMD crates (`wide`) pick their width when they are compiled, not at run time as these
/// kernels do (`multiversion`); inlined into their loops, this one is vectorized for each.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    const LOG2_E: f32 = std::f32::consts::LOG2_E;
    // ln 2 in two parts, the first exact in few bits, so that `x - n·ln 2` loses nothing.
    const LN2_HIGH: f32 = 0.693_359_4;
    const LN2_LOW: f32 = -2.121_944_4e-4;
    const P: [f32; 6] = [
        1.987_569_1e-4,
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        0.166_666_65,
        0.5,
    ];
    let x = x.clamp(-88.376_26, 88.376_26);
    let n = (x * LOG2_E + 0.5).floor().clamp(-127.0, 127.0);
    let r = x - n * LN2_HIGH - n * LN2_LOW;
    let p = P.iter().fold(0.0, |p, &c| p * r + c);
    let e_r = p * r * r + r + 1.0;
    // 2^n by its exponent bits, `n + 127` in 0..=254 (0: the bits of 0). Its integer is read
    // from the low bits of `n + 127 + 2^23`: `as i32` saturates, which the compiler does not
    // vectorize.
    let biased = (n + 127.0 + 8_388_608.0).to_bits() & 0x7f_ffff;
    e_r * f32::from_bits(biased << 23)
}

/// `1 / (1 + e^-x)`.
#[inline(always)]
pub(crate) fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

/// `tanh(x)` within a few ulp, as Cephes' `tanhf`: an odd polynomial below 0.625, where `1 -
/// 2 / (e^2x + 1)` would lose the small value's digits to the difference, that form above;
/// both computed and one picked, so that the loop vectorizes.
#[inline(always)]
pub(crate) fn tanh(x: f32) -> f32 {
    const P: [f32; 5] = [
        -5.704_988_7e-3,
        2.063_909e-2,
        -5.373_971_5e-2,
        0.133_314_42,
        -0.333_332_8,
    ];
    let z = x * x;
    let small = P.iter().fold(0.0, |p, &c| p * z + c) * z * x + x;
    let large = (1.0 - 2.0 / (exp(2.0 * x.abs()) + 1.0)).copysign(x);
    if x.abs() < 0.625 { small } else { large }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Within 2 ulp of the standard library's `exp` across its normal range, at a million
    /// points, and the clamped ends.
    #[test]
    fn exp_is_within_two_ulp_of_the_standard_librarys() {
        let mut worst = 0f32;
        for i in 0..=1_000_000 {
            let x = -87.0 + 175.0 * i as f32 / 1e6;
            let (got, want) = (exp(x), x.exp());
            let spacing = f32::from_bits(want.to_bits() + 1) - want;
            worst = worst.max((got - want).abs() / spacing);
        }
        assert!(worst <= 2.0, "{worst} ulp");
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-200.0), 0.0);
        assert!(exp(200.0).is_finite() && exp(200.0) > 2e38);
    }

    /// Within 4 ulp of the standard library's `tanh` (and its exact ±1 far out) over ±20.
    #[test]
    fn tanh_is_within_a_few_ulp_of_the_standard_librarys() {
        let mut worst = 0f32;
        for i in 0..=400_000 {
            let x = -20.0 + 40.0 * i as f32 / 4e5;
            let (got, want) = (tanh(x), x.tanh());
            let spacing = f32::from_bits(want.abs().to_bits() + 1) - want.abs();
            worst = worst.max((got - want).abs() / spacing.max(f32::MIN_POSITIVE));
        }
        assert!(worst <= 4.0, "{worst} ulp");
        assert_eq!(tanh(1e-30), 1e-30);
        assert_eq!((tanh(-30.0), tanh(30.0)), (-1.0, 1.0));
    }
}
