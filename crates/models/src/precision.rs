//! [`Precision`]: what the models' matrix products and convolutions compute in, set for the
//! span of a closure on one thread ([`with_precision`]), as PyTorch's autocast and Keras's
//! mixed policies do.
//!
//! Weights, optimizer state, batch norm, the loss and every elementwise op stay f32; only
//! [`crate::conv2d`], [`crate::conv_images`] and [`crate::linear`] round their inputs to the
//! low precision, multiply, and hand back f32 (on flex in bf16: products on AMX tiles where the
//! CPU has them, summed in f32; elsewhere a cast, Burn's op in that precision, and a cast
//! back). Their gradients flow back through the same rounding, so the weights' gradients
//! arrive in f32 for the reduction and the update.

use std::cell::Cell;
use std::fmt;
use std::str::FromStr;

use burn::tensor::DType;
use serde::{Deserialize, Serialize};

/// The arithmetic of matrix products and convolutions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// Everything in f32.
    #[default]
    F32,
    /// Products in bfloat16 (f32's range, 8 bits of mantissa): no loss scaling needed. On
    /// CPUs with AMX, the fast one.
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

/// Whether bf16 products on flex run on AMX tiles on this machine (else on f32 gemm with the
/// operands rounded: the same results, no faster). `TOWERS_NO_AMX=1` turns the tiles off.
pub fn bf16_on_amx() -> bool {
    #[cfg(feature = "flex")]
    return crate::flex::amx_available();
    #[cfg(not(feature = "flex"))]
    false
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
