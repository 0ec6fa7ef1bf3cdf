//! [`vectorized`]: runs a per-pixel loop compiled for AVX2 when the CPU has it.
//!
//! A release build targets baseline x86-64 (SSE2, 4 floats per instruction) so that it runs
//! on any x86-64 CPU. The loops of the transforms are written so that the compiler vectorizes
//! them (no branches, no early exits); compiled a second time with AVX2 enabled they process 8
//! floats per instruction, and the CPU picks the copy at run time. This is what the
//! `multiversion` crate generates; one function of std (`#[target_feature]` and
//! `is_x86_feature_detected!`) does it without the dependency.
//!
//! The AVX2 copy performs the same IEEE operations on each value (no FMA, which rounds
//! differently), so both give bitwise the same images.

/// Calls `f`, compiled with AVX2 when this CPU has it. Mark `f` and the functions it calls in
/// its loops `#[inline(always)]` (`vectorized(#[inline(always)] || ...)`), so that they are
/// compiled into the AVX2 copy, not called from it.
#[inline(always)]
pub(crate) fn vectorized<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked above.
        return unsafe { with_avx2(f) };
    }
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn with_avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}
