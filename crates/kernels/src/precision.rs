//! [`Precision`]: what the models' matrix products and convolutions compute in, set for the
//! span of a closure on one thread ([`with_precision`]), as PyTorch's autocast and Keras's
//! mixed policies do.
//!
//! Weights, optimizer state, batch norm, the loss and every elementwise op stay f32; only
//! [`crate::conv2d`], [`crate::conv_images`] and [`crate::linear`] round their inputs to the
//! low precision, multiply, and hand back f32 (on flex in bf16: products on AMX tiles or with
//! AVX-512 BF16 where the CPU has them ([`bf16_kernel`](crate::bf16_kernel)), summed in f32; elsewhere a cast, Burn's
//! op in that precision, and a cast back). Their gradients flow back through the same rounding, so the weights' gradients
//! arrive in f32 for the reduction and the update. One exception, which changes no result: a
//! batch norm's output that only a convolution reads may go to it already rounded to bf16
//! (`towers_models::OffsetBatchNorm::forward_relu_into`, `towers_models::BasicConv::forward_into`), half
//! the bytes; its gradient is f32 still.

use std::cell::Cell;
use std::fmt;
use std::str::FromStr;

use burn::tensor::{DType, Device};
use serde::{Deserialize, Serialize};

/// The arithmetic of matrix products and convolutions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Precision {
    /// Everything in f32.
    #[default]
    F32,
    /// Products in bfloat16 (f32's range, 8 bits of mantissa): no loss scaling needed. On
    /// CPUs with AMX or AVX-512 BF16 ([`bf16_kernel`](crate::bf16_kernel)), the fast one. Not
    /// on wgpu, whose WGSL has no bf16 ([`supported_on`](Self::supported_on)).
    Bf16,
    /// Products in IEEE half (5 exponent bits): on GPUs; gradients underflow without loss
    /// scaling, which the trainer then turns on.
    F16,
}

impl Precision {
    /// The tensors' type for products in this precision.
    pub fn dtype(self) -> DType {
        match self {
            Precision::F32 => DType::F32,
            Precision::Bf16 => DType::BF16,
            Precision::F16 => DType::F16,
        }
    }

    /// Whether `device` has this precision's type (Burn's `Device::supports_dtype`). Products
    /// in a type the device lacks fail in the backend, on its own thread, when it compiles the
    /// cast: wgpu's WGSL, for one, has no bf16. On a remote device, asks its server (Burn's
    /// client panics if it cannot be reached).
    pub fn supported_on(self, device: &Device) -> bool {
        device.supports_dtype(self.dtype())
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Precision::F32 => "f32",
            Precision::Bf16 => "bf16",
            Precision::F16 => "f16",
        })
    }
}

impl FromStr for Precision {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "f32" => Ok(Precision::F32),
            "bf16" => Ok(Precision::Bf16),
            "f16" => Ok(Precision::F16),
            other => Err(format!("unknown precision `{other}`: f32, bf16 or f16")),
        }
    }
}

/// What computes bf16 products on flex ([`bf16_kernel`](crate::bf16_kernel)): the same results from each, up to the
/// order of the f32 sums (AMX and AVX-512 BF16 flush subnormals, the f32 gemm does not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Bf16Kernel {
    /// Intel AMX tiles (`tdpbf16ps`): Sapphire Rapids on, where Linux grants the tiles.
    AmxTiles,
    /// AVX-512 BF16 (`vdpbf16ps` on pairs of bf16): AMD Zen 4 and 5, Intel Cooper Lake, and AMX
    /// CPUs under `TOWERS_NO_AMX=1`. Twice the products per instruction of an f32 FMA.
    Avx512Bf16,
    /// f32 gemm on bf16-rounded operands: no faster than f32. Every other CPU, and any under
    /// `TOWERS_NO_AMX=1 TOWERS_NO_AVX512BF16=1`; also builds without the `flex` feature, which
    /// have no bf16 kernels of their own.
    F32Gemm,
}

impl fmt::Display for Bf16Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Bf16Kernel::AmxTiles => "AMX tiles",
            Bf16Kernel::Avx512Bf16 => "AVX-512 BF16",
            Bf16Kernel::F32Gemm => "f32 gemm, rounded operands",
        })
    }
}

thread_local! {
    static PRECISION: Cell<Precision> = const { Cell::new(Precision::F32) };
}

/// Runs `f` with this thread's products in `precision` (the outer setting back afterwards,
/// however `f` ends). Backward passes need no span: each product recorded its precision.
pub fn with_precision<R>(precision: Precision, f: impl FnOnce() -> R) -> R {
    /// Restores the outer precision, also when `f` panics.
    struct Restore(Precision);
    impl Drop for Restore {
        fn drop(&mut self) {
            PRECISION.set(self.0);
        }
    }
    let _restore = Restore(PRECISION.replace(precision));
    f()
}

/// This thread's precision for products: f32 outside any [`with_precision`] span.
pub fn current_precision() -> Precision {
    PRECISION.get()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_nest_and_restore_after_a_panic() {
        assert_eq!(current_precision(), Precision::F32);
        with_precision(Precision::Bf16, || {
            assert_eq!(current_precision(), Precision::Bf16);
            let inner = std::panic::catch_unwind(|| {
                with_precision(Precision::F16, || panic!("inside"));
            });
            assert!(inner.is_err());
            assert_eq!(current_precision(), Precision::Bf16);
        });
        assert_eq!(current_precision(), Precision::F32);
    }

    #[test]
    fn names_round_trip() {
        for p in [Precision::F32, Precision::Bf16, Precision::F16] {
            assert_eq!(p.to_string().parse::<Precision>(), Ok(p));
        }
        assert!("fp8".parse::<Precision>().unwrap_err().contains("fp8"));
    }
}
