//! A rank's own watchdog: when this rank has spent half the exchanges' deadline in one phase
//! (its input, its towers' step, a checkpoint), it says so on stderr, before the other ranks'
//! deadline ends the job. Their error names the rank that never reached the exchange; this
//! line, from that rank, names the phase it is stuck in.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use towers_multigpu::Timeline;

/// Watches a timeline's current phase on a thread of its own; stops when dropped.
pub(super) struct Watchdog {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Reports, as `rank`, each phase of `timeline` that lasts longer than `after`, once.
    pub(super) fn start(rank: usize, timeline: Timeline, after: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let poll = (after / 20).clamp(Duration::from_millis(10), Duration::from_secs(1));
        let watch = move || {
            let mut reported: Option<Instant> = None;
            while !stopped.load(Ordering::Relaxed) {
                thread::sleep(poll);
                let Some((phase, since)) = timeline.current_phase() else {
                    continue;
                };
                if since.elapsed() > after && reported != Some(since) {
                    reported = Some(since);
                    eprintln!(
                        "warning: rank {rank}: still in `{phase}` after {:.1?} (the other \
                         ranks end the job at {:.1?} without this rank)",
                        since.elapsed(),
                        2 * after
                    );
                }
            }
        };
        let thread = thread::Builder::new()
            .name("towers-watchdog".into())
            .spawn(watch)
            .ok();
        Self { stop, thread }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
