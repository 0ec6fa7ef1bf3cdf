//! A rank's own watchdog: when this rank has spent half the exchanges' deadline in one phase
//! (its input, its towers' step, a checkpoint), it says so on stderr, before the other ranks'
//! deadline ends the job. Their error names the rank that never reached the exchange; this
//! line, from that rank, names the phase it is stuck in.

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use towers_multigpu::{Timeline, eprint_line};

/// Watches a timeline's current phase on a thread of its own; stops when dropped.
pub(super) struct Watchdog {
    /// Dropped to stop the thread: it wakes at once, not at its next poll (a sleep of up to a
    /// second here made every MPI run, and each rank's resume, a second longer).
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Reports, as `rank`, each phase of `timeline` that lasts longer than `after`, once,
    /// looking every twentieth of `after` (10 ms at least).
    pub(super) fn start(rank: usize, timeline: Timeline, after: Duration) -> Self {
        let (stop, stopped) = mpsc::channel::<()>();
        let poll = (after / 20).max(Duration::from_millis(10));
        let watch = move || {
            let mut reported: Option<Instant> = None;
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(poll) {
                let Some((phase, since)) = timeline.current_phase() else {
                    continue;
                };
                if since.elapsed() > after && reported != Some(since) {
                    reported = Some(since);
                    eprint_line(&format!(
                        "warning: rank {rank}: still in `{phase}` after {:.1?} (the other \
                         ranks end the job at {:.1?} without this rank)",
                        since.elapsed(),
                        2 * after
                    ));
                }
            }
        };
        let thread = thread::Builder::new()
            .name("towers-watchdog".into())
            .spawn(watch)
            .ok();
        Self {
            stop: Some(stop),
            thread,
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropping_stops_the_thread_without_waiting_for_its_poll() {
        // An hour's deadline polls every three minutes; a drop that waited for the poll took up
        // to its cap, a second, before this stopped by message.
        let watchdog = Watchdog::start(0, Timeline::default(), Duration::from_secs(3600));
        let start = Instant::now();
        drop(watchdog);
        assert!(
            start.elapsed() < Duration::from_millis(500),
            "{:?}",
            start.elapsed()
        );
    }
}
