//! Which kernel computes bf16 products on flex on this machine, as the CPU's features and the
//! `TOWERS_NO_*` switches decide.

use crate::precision::Bf16Kernel;

/// What computes bf16 products on flex on this machine: the fastest kernel the CPU has, unless
/// `TOWERS_NO_AMX=1` or `TOWERS_NO_AVX512BF16=1` turns it off (read once per process).
pub fn bf16_kernel() -> Bf16Kernel {
    #[cfg(feature = "flex")]
    return crate::flex::gemm::bf16_gemm::kernel();
    #[cfg(not(feature = "flex"))]
    Bf16Kernel::F32Gemm
}

/// Whether bf16 products on flex run on AMX tiles on this machine ([`bf16_kernel`]).
pub fn bf16_on_amx() -> bool {
    bf16_kernel() == Bf16Kernel::AmxTiles
}
