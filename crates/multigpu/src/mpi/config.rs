//! What an MPI job's exchanges need to know.

use std::time::Duration;

use burn::config::Config;

use crate::wire_format::Wire;

/// How ranks exchange gradients, statistics and weights: [`MpiConfig::new`] and `with_*`, as
/// Burn's configs.
#[derive(Config, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MpiConfig {
    /// The size of one gradient bucket in bytes: tensors are packed in order into buckets of
    /// about this size (a larger tensor is a bucket of its own), and each bucket is one MPI
    /// all-reduce. 25 MB is PyTorch DDP's default: large enough that per-message latency does
    /// not count, small enough that reading the next bucket overlaps the exchange of this one.
    #[config(default = "25 << 20")]
    pub bucket_bytes: usize,
    /// How long one exchange may wait for the slowest rank before the job is ended. Ranks wait
    /// for each other's forward and backward passes and input too, so this is a step's time with
    /// a wide margin, not a network timeout. The time a rank spends making its own buckets (its
    /// backward, under the overlapped exchange) does not count: only its wait on the others.
    /// The first exchange of each kind (the first step's, which compiles and tunes kernels,
    /// maybe on one rank only) may wait four times as long.
    #[config(default = "Duration::from_secs(300)")]
    pub timeout: Duration,
    /// The number format gradients travel in ([`Wire`]): f32 by default; bf16 or f16 halve
    /// the bytes.
    #[config(default = "Wire::F32")]
    pub wire: Wire,
}

impl Default for MpiConfig {
    fn default() -> Self {
        Self::new()
    }
}
