//! [`Wire`]: the number format gradients travel in between ranks.

use std::str::FromStr;

#[cfg(feature = "mpi")]
use half::{bf16, f16};
use serde::{Deserialize, Serialize};

/// The number format of gradient buckets between ranks. In the 16-bit formats each rank
/// rounds its bucket (round to nearest even), the rank that sums a part of it adds the parts
/// in f32 and rounds the sum once more, so half the bytes travel for two roundings of each
/// value (Horovod's fp16 compression does the same). The ranks' weights, batch-norm statistics,
/// weights at the start and every other exchange stay f32. Used by the MPI exchange (the `mpi`
/// feature, `MpiConfig::wire`); named `f32`, `bf16` and `f16` in text and config files.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Wire {
    /// 4 bytes a value, exact: the sum an `MPI_Allreduce` of f32 gives.
    #[default]
    F32,
    /// bfloat16: f32's range, 8 bits of precision.
    Bf16,
    /// IEEE half: 11 bits of precision, values beyond 65,504 become infinite (which loss
    /// scaling then treats as an overflow, skipping the step).
    F16,
}

/// The conversions the MPI exchange makes.
#[cfg(feature = "mpi")]
impl Wire {
    /// `value` rounded to this format, as its bits (16-bit formats only).
    pub(crate) fn encode(self, value: f32) -> u16 {
        match self {
            Wire::Bf16 => bf16::from_f32(value).to_bits(),
            Wire::F16 => f16::from_f32(value).to_bits(),
            Wire::F32 => unreachable!("f32 buckets travel as f32"),
        }
    }

    /// The value of `bits` in this format (16-bit formats only).
    pub(crate) fn decode(self, bits: u16) -> f32 {
        match self {
            Wire::Bf16 => bf16::from_bits(bits).to_f32(),
            Wire::F16 => f16::from_bits(bits).to_f32(),
            Wire::F32 => unreachable!("f32 buckets travel as f32"),
        }
    }
}

impl FromStr for Wire {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        match name {
            "f32" => Ok(Wire::F32),
            "bf16" => Ok(Wire::Bf16),
            "f16" => Ok(Wire::F16),
            other => Err(format!(
                "unknown all-reduce type `{other}`: f32, bf16 or f16"
            )),
        }
    }
}
