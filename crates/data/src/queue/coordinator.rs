//! The [`Coordinator`]: stops a group of threads together and reports why (TF's
//! `tf.train.Coordinator`).
//!
//! Threads started with [`Coordinator::spawn`] run a closure returning `Result`. The first
//! error, or the first panic, requests a stop: every registered stop hook runs (the pipeline
//! registers its queues' `cancel`, which wakes every blocked thread), and [`Coordinator::join`]
//! returns that error, wrapped with the failing thread's name. Later errors, and the
//! `Cancelled` errors that the stop itself causes, are not reported.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

type StopHook = Box<dyn Fn() + Send + Sync>;

#[derive(Default)]
struct Inner {
    stop: AtomicBool,
    error: Mutex<Option<Error>>,
    hooks: Mutex<Vec<StopHook>>,
    /// Threads started and not yet finished; `changed` is signalled when it drops or on stop.
    running: Mutex<usize>,
    changed: Condvar,
}

/// Shared stop flag, first-error slot and thread registry. Cheap to clone.
#[derive(Clone, Default)]
pub struct Coordinator {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator")
            .field("should_stop", &self.should_stop())
            .finish_non_exhaustive()
    }
}

/// A thread started by [`Coordinator::spawn`].
#[derive(Debug)]
pub struct CoordinatedThread {
    name: String,
    handle: JoinHandle<()>,
    /// Set once the body has returned and been accounted for: joining is then immediate.
    done: Arc<AtomicBool>,
}

impl CoordinatedThread {
    /// The thread's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Coordinator {
    /// A coordinator with no thread and no stop requested.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a stop was requested. Loops in coordinated threads check this.
    pub fn should_stop(&self) -> bool {
        self.inner.stop.load(Ordering::Acquire)
    }

    /// Requests a clean stop: no error is recorded. Runs the stop hooks once.
    pub fn request_stop(&self) {
        if !self.inner.stop.swap(true, Ordering::AcqRel) {
            for hook in self
                .inner
                .hooks
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
            {
                hook();
            }
        }
        // Take the lock so a joiner between its check and its wait cannot miss the signal.
        drop(self.inner.running.lock().unwrap_or_else(|p| p.into_inner()));
        self.inner.changed.notify_all();
    }

    /// Records `error` if it is the first real one (`Cancelled` is a consequence, not a
    /// cause, and is ignored), then requests a stop.
    pub fn request_stop_with(&self, error: Error) {
        if !matches!(error.root(), Error::Cancelled) {
            let mut slot = self.inner.error.lock().unwrap_or_else(|p| p.into_inner());
            if slot.is_none() {
                *slot = Some(error);
            }
        }
        self.request_stop();
    }

    /// Whether an error has been recorded.
    pub fn has_error(&self) -> bool {
        self.inner
            .error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Runs `hook` when a stop is requested (at once if one already was). Used to cancel
    /// queues so that threads blocked on them wake up.
    pub fn on_stop(&self, hook: impl Fn() + Send + Sync + 'static) {
        let mut hooks = self.inner.hooks.lock().unwrap_or_else(|p| p.into_inner());
        if self.should_stop() {
            drop(hooks);
            hook();
        } else {
            hooks.push(Box::new(hook));
        }
    }

    /// Starts a named thread running `body`. An `Err` it returns, or a panic, is recorded
    /// (with the thread's name) and stops every other thread of this coordinator.
    pub fn spawn<F>(&self, name: impl Into<String>, body: F) -> std::io::Result<CoordinatedThread>
    where
        F: FnOnce() -> Result<()> + Send + 'static,
    {
        let name = name.into();
        let coord = self.clone();
        let thread_name = name.clone();
        let done = Arc::new(AtomicBool::new(false));
        let done_flag = Arc::clone(&done);
        *self.inner.running.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        let spawned = std::thread::Builder::new()
            .name(name.clone())
            .spawn(move || {
                let outcome = catch_unwind(AssertUnwindSafe(body));
                let failure = match outcome {
                    Ok(Ok(())) => None,
                    Ok(Err(error)) => Some(Error::Thread {
                        thread: thread_name,
                        error: Box::new(error),
                    }),
                    Err(payload) => Some(Error::Panic {
                        thread: thread_name,
                        message: panic_message(payload.as_ref()),
                    }),
                };
                if let Some(error) = failure {
                    coord.request_stop_with(error);
                }
                let mut running = coord
                    .inner
                    .running
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                *running -= 1;
                done_flag.store(true, Ordering::Release);
                coord.inner.changed.notify_all();
            });
        match spawned {
            Ok(handle) => Ok(CoordinatedThread { name, handle, done }),
            Err(e) => {
                *self.inner.running.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
                Err(e)
            }
        }
    }

    /// Waits for `threads` to finish and returns the first recorded error, if any.
    ///
    /// Waits as long as the threads run and no stop is requested; once a stop is requested,
    /// waits at most `grace` more. Threads still running then are left detached and reported
    /// as [`Error::JoinTimeout`] (unless an earlier error is the better answer).
    pub fn join(&self, threads: Vec<CoordinatedThread>, grace: Duration) -> Result<()> {
        let mut running = self.inner.running.lock().unwrap_or_else(|p| p.into_inner());
        let mut deadline: Option<Instant> = None;
        while *running > 0 {
            if deadline.is_none() && self.should_stop() {
                deadline = Some(Instant::now() + grace);
            }
            running = match deadline {
                None => self
                    .inner
                    .changed
                    .wait(running)
                    .unwrap_or_else(|p| p.into_inner()),
                Some(at) => {
                    let left = at.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    let waited = self.inner.changed.wait_timeout(running, left);
                    waited.unwrap_or_else(|p| p.into_inner()).0
                }
            };
        }
        drop(running);

        let mut stuck = Vec::new();
        for thread in threads {
            if thread.done.load(Ordering::Acquire) {
                // The body's panics were caught inside the thread: join cannot fail here.
                let _ = thread.handle.join();
            } else {
                stuck.push(thread.name);
            }
        }
        if let Some(error) = self.take_error() {
            return Err(error);
        }
        if stuck.is_empty() {
            Ok(())
        } else {
            Err(Error::JoinTimeout {
                grace_ms: grace.as_millis(),
                threads: stuck,
            })
        }
    }

    /// Takes the recorded error out, leaving none.
    pub fn take_error(&self) -> Option<Error> {
        self.inner
            .error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }
}

/// A panic's message, when its payload is a string.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

#[cfg(test)]
mod tests {
    use towers_testing::{assert_error_names, report};

    use super::*;
    use crate::queue::Queue;

    #[test]
    fn first_error_stops_everyone_and_is_returned_with_the_thread_name() {
        let coord = Coordinator::new();
        let queue = Arc::new(Queue::<u32>::fifo(1));
        let q = Arc::clone(&queue);
        coord.on_stop(move || q.cancel());
        // A waiter blocked on an empty queue: it only ends because the stop cancels the queue.
        let q = Arc::clone(&queue);
        let waiter = coord
            .spawn("waiter", move || q.dequeue().map(drop).map_err(Error::from))
            .unwrap();
        let failing = coord
            .spawn("reader-3", || {
                std::thread::sleep(Duration::from_millis(50));
                Err(Error::Record {
                    path: "train-00001".into(),
                    record: 17,
                    error: "bad crc".into(),
                })
            })
            .unwrap();
        let err = coord
            .join(vec![waiter, failing], Duration::from_secs(5))
            .unwrap_err();
        let msg = report(&err);
        assert_error_names(&msg, &["reader-3", "train-00001", "record 17"]);
        assert!(coord.should_stop());
    }

    #[test]
    fn a_panic_becomes_the_error() {
        let coord = Coordinator::new();
        let t = coord
            .spawn("decoder", || panic!("corrupt huffman table"))
            .unwrap();
        let err = coord.join(vec![t], Duration::from_secs(5)).unwrap_err();
        assert!(
            matches!(&err, Error::Panic { thread, message } if thread == "decoder" && message.contains("huffman")),
            "{err}"
        );
    }

    #[test]
    fn join_waits_for_normal_completion() {
        let coord = Coordinator::new();
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let d = Arc::clone(&done);
        let t = coord
            .spawn("worker", move || {
                std::thread::sleep(Duration::from_millis(100));
                d.store(true, Ordering::SeqCst);
                Ok(())
            })
            .unwrap();
        coord.join(vec![t], Duration::from_millis(1)).unwrap();
        assert!(
            done.load(Ordering::SeqCst),
            "no stop requested: join waits as long as it takes"
        );
    }

    #[test]
    fn join_gives_up_after_the_grace_period() {
        let coord = Coordinator::new();
        // Ignores the stop request for 30 s: join must return long before.
        let t = coord
            .spawn("stubborn", || {
                std::thread::sleep(Duration::from_secs(30));
                Ok(())
            })
            .unwrap();
        coord.request_stop();
        let start = Instant::now();
        let err = coord.join(vec![t], Duration::from_millis(100)).unwrap_err();
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "join waited for the thread"
        );
        assert!(
            matches!(&err, Error::JoinTimeout { threads, .. } if threads == &["stubborn"]),
            "{err}"
        );
    }

    #[test]
    fn cancellations_after_a_stop_are_not_errors() {
        let coord = Coordinator::new();
        coord.request_stop();
        coord.request_stop_with(Error::Thread {
            thread: "r".into(),
            error: Box::new(Error::Cancelled),
        });
        assert!(!coord.has_error());
        let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let r = Arc::clone(&ran);
        coord.on_stop(move || r.store(true, Ordering::SeqCst));
        assert!(
            ran.load(Ordering::SeqCst),
            "a hook added after the stop runs at once"
        );
    }
}
