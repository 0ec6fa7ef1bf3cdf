//! What an MPI job's exchanges need to know.

use std::time::Duration;

use crate::wire::Wire;

/// How ranks exchange gradients, statistics and weights.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MpiConfig {
    /// The size of one gradient bucket in bytes: tensors are packed in order into buckets of
    /// about this size (a larger tensor is a bucket of its own), and each bucket is one MPI
    /// all-reduce. 25 MB is PyTorch DDP's default: large enough that per-message latency does
    /// not count, small enough that reading the next bucket overlaps the exchange of this one.
    pub bucket_bytes: usize,
    /// How long one exchange may wait for the slowest rank before the job is ended. Ranks wait
    /// for each other's forward and backward passes and input too, so this is a step's time with
    /// a wide margin, not a network timeout.
    pub timeout: Duration,
    /// The number format gradients travel in ([`Wire`]): f32 by default; bf16 or f16 halve
    /// the bytes.
    pub wire: Wire,
}

impl Default for MpiConfig {
    fn default() -> Self {
        Self {
            bucket_bytes: 25 << 20,
            timeout: Duration::from_secs(300),
            wire: Wire::F32,
        }
    }
}

impl MpiConfig {
    /// Sets [`bucket_bytes`](Self::bucket_bytes).
    pub fn with_bucket_bytes(mut self, bytes: usize) -> Self {
        self.bucket_bytes = bytes;
        self
    }

    /// Sets [`wire`](Self::wire).
    pub fn with_wire(mut self, wire: Wire) -> Self {
        self.wire = wire;
        self
    }

    /// Sets [`timeout`](Self::timeout).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}
