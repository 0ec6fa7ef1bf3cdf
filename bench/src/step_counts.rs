//! What one training step costs the host, counted rather than timed: the kernels it launches
//! (CubeCL's launch observer, `cubecl_runtime::logging::LaunchObservation`, which sees every
//! launch of the process on the thread that issues it) and its host syncs (reads and flushes,
//! which CubeCL does not report: counted where the towers make them,
//! `towers_multigpu::host_syncs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use cubecl_runtime::logging::{LaunchObservation, LaunchObserver};
use towers_multigpu::{HostSyncs, host_syncs};

/// Counts launches, of every kernel.
#[derive(Default)]
struct Launches(AtomicU64);

impl LaunchObserver for Launches {
    fn launched(&self, _kernel: &'static str) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// The kernel launches and host syncs of `steps` calls of `step`.
pub fn count(steps: usize, mut step: impl FnMut()) -> (u64, HostSyncs) {
    let launches = Arc::new(Launches::default());
    let observation = LaunchObservation::new(launches.clone());
    let before = host_syncs();
    for _ in 0..steps {
        step();
    }
    let syncs = host_syncs().since(before);
    drop(observation);
    (launches.0.load(Ordering::Relaxed), syncs)
}
