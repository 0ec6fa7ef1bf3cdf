//! The most multiply-adds per second this CPU's vector units do, f32 by FMA and bf16 pairs by
//! `vdpbf16ps` (AVX-512): the ceiling that the convolutions' rates in `bench_inception_step
//! REPS PRECISION convs` are read against.
//!
//! `cargo run --release -p towers-bench --bin bench_peak [SECONDS]` (default 1 per row): each
//! row on one thread, then on every thread of rayon's pool at once. Each thread runs
//! independent chains of multiply-adds on registers (no memory), so only the units' throughput
//! limits it.

use std::time::Instant;

use rayon::prelude::*;

fn main() {
    let seconds: f64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("SECONDS must be a number"))
        .unwrap_or(1.0);
    #[cfg(target_arch = "x86_64")]
    {
        let threads = rayon::current_num_threads();
        println!("multiply-adds per second, GMAC/s (one thread | {threads} threads, total)");
        if is_x86_feature_detected!("avx512f") {
            row("f32 FMA, AVX-512", seconds, avx512::fma_macs);
        }
        if is_x86_feature_detected!("avx512bf16") {
            row("bf16 pairs, vdpbf16ps", seconds, avx512::dpbf16_macs);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    println!("no peak to measure here: the kernels measured are x86-64's ({seconds} s)");
}

/// Prints the rate of `run` (which does some multiply-adds and returns how many) on one thread
/// and on all of rayon's threads together.
fn row(name: &str, seconds: f64, run: fn() -> u64) {
    let one = rate(seconds, run);
    let threads = rayon::current_num_threads();
    let all: f64 = (0..threads)
        .into_par_iter()
        .map(|_| rate(seconds, run))
        .sum();
    println!("{name:<24} {one:>8.1} | {all:>8.1}");
}

/// GMAC/s of `run`, called until `seconds` have passed.
fn rate(seconds: f64, run: fn() -> u64) -> f64 {
    let start = Instant::now();
    let mut macs = 0;
    while start.elapsed().as_secs_f64() < seconds {
        macs += run();
    }
    macs as f64 / start.elapsed().as_secs_f64() / 1e9
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use core::arch::x86_64::*;
    use std::hint::black_box;

    /// Independent sums: enough that each unit always has one whose last multiply-add is done
    /// (latency 4–6 cycles, two units).
    const CHAINS: usize = 24;
    /// Steps per call.
    const STEPS: u64 = 1 << 20;

    /// `STEPS` steps of `CHAINS` FMAs of 16 floats; returns the multiply-adds done.
    pub(super) fn fma_macs() -> u64 {
        // SAFETY: `main` calls this only where the CPU has AVX-512 F.
        unsafe { fma() };
        STEPS * CHAINS as u64 * 16
    }

    #[target_feature(enable = "avx512f")]
    fn fma() {
        let (a, b) = (_mm512_set1_ps(1e-9), _mm512_set1_ps(1.0));
        let mut sums = [_mm512_setzero_ps(); CHAINS];
        for _ in 0..STEPS {
            for sum in &mut sums {
                *sum = _mm512_fmadd_ps(a, b, *sum);
            }
        }
        black_box(sums);
    }

    /// `STEPS` steps of `CHAINS` `vdpbf16ps` (16 lanes of two bf16 products each); returns the
    /// multiply-adds done.
    pub(super) fn dpbf16_macs() -> u64 {
        // SAFETY: `main` calls this only where the CPU has AVX-512 BF16 (and so F).
        unsafe { dpbf16() };
        STEPS * CHAINS as u64 * 32
    }

    #[target_feature(enable = "avx512f,avx512bf16")]
    fn dpbf16() {
        let pairs = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-9), _mm512_set1_ps(1.0));
        let mut sums = [_mm512_setzero_ps(); CHAINS];
        for _ in 0..STEPS {
            for sum in &mut sums {
                *sum = _mm512_dpbf16_ps(*sum, pairs, pairs);
            }
        }
        black_box(sums);
    }
}
