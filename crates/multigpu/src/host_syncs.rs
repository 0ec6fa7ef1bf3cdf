//! How often a step makes the host meet a device: every read of values back to the host (the
//! host waits for the device) and every flush of a device's queued work (the host hands it
//! over without waiting), counted where the towers make them.
//!
//! # Why counted here
//!
//! CubeCL 0.11.3 can report every kernel launch to an observer
//! (`cubecl_runtime::logging::LaunchObservation`, which `bench_step` installs), but it has no
//! such hook for reads or flushes: `ComputeClient::read*` and `flush` count nothing, and the
//! streaming logger only prints its cross-stream waits ("Waiting on ... from ...") to a sink.
//! Every read and flush of a tower step goes through the towers' own code (the loss values,
//! the ring's chunks through host memory, the taps' gradients, the hand-over before the tower
//! threads start), so they are counted at that seam. What a user's loss function reads itself
//! is not counted, nor the cross-stream event waits CubeCL inserts on the device (those are
//! device-side: the host does not wait for them).
//!
//! The counts are process-wide (every thread, every device): a benchmark takes
//! [`host_syncs`] before and after the steps it runs and divides.

use std::sync::atomic::{AtomicU64, Ordering};

static READS: AtomicU64 = AtomicU64::new(0);
static FLUSHES: AtomicU64 = AtomicU64::new(0);

/// The reads and flushes the towers have made in this process so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HostSyncs {
    /// Values read back from a device: the host waits for the device to get there.
    pub reads: u64,
    /// Flushes: a device's queued work handed over for execution; the host does not wait.
    pub flushes: u64,
}

impl HostSyncs {
    /// Reads and flushes together.
    pub fn total(&self) -> u64 {
        self.reads + self.flushes
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: HostSyncs) -> HostSyncs {
        HostSyncs {
            reads: self.reads - earlier.reads,
            flushes: self.flushes - earlier.flushes,
        }
    }
}

/// The counts so far (see the module docs for what they cover).
pub fn host_syncs() -> HostSyncs {
    HostSyncs {
        reads: READS.load(Ordering::Relaxed),
        flushes: FLUSHES.load(Ordering::Relaxed),
    }
}

/// Counts one read from a device.
pub(crate) fn note_read() {
    READS.fetch_add(1, Ordering::Relaxed);
}

/// Counts one flush.
pub(crate) fn note_flush() {
    FLUSHES.fetch_add(1, Ordering::Relaxed);
}
