//! Matrix products on flex, in an `arithmetic` (f32, or bf16 operands summed in f32): f32 gemm on strided views (`gemm_f32`), bf16 products on AMX tiles,
//! AVX-512 BF16 or f32 gemm on rounded operands (`bf16_gemm`), a dense layer's product in bf16
//! (`matmul`), and the 16×16 block transposition that lays operands out for them (`transpose`).

pub(crate) mod arithmetic;
pub(crate) mod bf16_gemm;
pub(crate) mod gemm_f32;
pub(crate) mod matmul;
pub(crate) mod transpose;
