//! [`QueueRunner`]: a group of threads filling one queue (TF's `tf.train.QueueRunner`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::coordinator::{CoordinatedThread, Coordinator};
use crate::error::{Error, Result};
use crate::queue::Queue;

/// Runs `threads` copies of an enqueue loop against one queue, under a [`Coordinator`].
///
/// The queue is closed when the last thread ends, however it ends (done, error or panic), so
/// consumers see end-of-input instead of blocking forever; it is cancelled when the
/// coordinator stops, so producers blocked on a full queue wake up.
#[derive(Debug)]
pub struct QueueRunner<T> {
    queue: Arc<Queue<T>>,
    threads: usize,
}

impl<T: Send + 'static> QueueRunner<T> {
    /// A runner of `threads` threads (at least 1) for `queue`.
    pub fn new(queue: Arc<Queue<T>>, threads: usize) -> Self {
        Self {
            queue,
            threads: threads.max(1),
        }
    }

    /// Starts the threads, named `{name}-{i}`. Thread `i` runs `body(i, &queue)` once: the
    /// body holds its own loop and returns when its input is exhausted or the queue refuses
    /// an item. A thread that cannot be started is recorded as the coordinator's error.
    pub fn start<F>(self, coord: &Coordinator, name: &str, body: F) -> Vec<CoordinatedThread>
    where
        F: Fn(usize, &Queue<T>) -> Result<()> + Send + Sync + 'static,
    {
        let queue = Arc::clone(&self.queue);
        coord.on_stop(move || queue.cancel());
        let body = Arc::new(body);
        let remaining = Arc::new(AtomicUsize::new(self.threads));
        let mut started = Vec::with_capacity(self.threads);
        for i in 0..self.threads {
            let closer = CloseWhenLast {
                queue: Arc::clone(&self.queue),
                remaining: Arc::clone(&remaining),
            };
            let body = Arc::clone(&body);
            let thread_name = format!("{name}-{i}");
            let spawned = coord.spawn(thread_name.clone(), move || {
                let closer = closer; // dropped on return and on unwind alike
                body(i, &closer.queue)
            });
            match spawned {
                Ok(thread) => started.push(thread),
                Err(e) => {
                    coord.request_stop_with(Error::Config(format!(
                        "cannot start thread {thread_name}: {e}"
                    )));
                    break;
                }
            }
        }
        started
    }
}

/// Closes the queue when the last of the runner's threads lets go of it.
struct CloseWhenLast<T> {
    queue: Arc<Queue<T>>,
    remaining: Arc<AtomicUsize>,
}

impl<T> Drop for CloseWhenLast<T> {
    fn drop(&mut self) {
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.queue.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use towers_testing::{assert_error_names, report};

    use super::*;
    use std::time::Duration;

    #[test]
    fn closes_the_queue_when_the_last_thread_ends() {
        let coord = Coordinator::new();
        let queue = Arc::new(Queue::fifo(100));
        let threads = QueueRunner::new(Arc::clone(&queue), 3).start(&coord, "producer", |i, q| {
            for k in 0..10 {
                q.enqueue(i * 100 + k)?;
            }
            Ok(())
        });
        let mut got = Vec::new();
        while let Ok(v) = queue.dequeue() {
            got.push(v);
        }
        coord.join(threads, Duration::from_secs(5)).unwrap();
        assert_eq!(
            got.len(),
            30,
            "end of input only after every producer is done"
        );
    }

    #[test]
    fn a_panicking_producer_still_closes_the_queue_and_reports() {
        let coord = Coordinator::new();
        let queue = Arc::new(Queue::<u8>::fifo(4));
        let threads =
            QueueRunner::new(Arc::clone(&queue), 1).start(&coord, "reader", |_, _| panic!("boom"));
        // The consumer wakes (cancelled by the stop or closed by the runner), never hangs.
        assert!(queue.dequeue().is_err());
        let err = coord.join(threads, Duration::from_secs(5)).unwrap_err();
        assert_error_names(&report(&err), &["reader-0", "boom"]);
    }

    #[test]
    fn a_stop_wakes_producers_blocked_on_a_full_queue() {
        let coord = Coordinator::new();
        let queue = Arc::new(Queue::fifo(1));
        let threads = QueueRunner::new(Arc::clone(&queue), 2).start(&coord, "producer", |_, q| {
            loop {
                q.enqueue(0u8)?;
            }
        });
        std::thread::sleep(Duration::from_millis(50));
        coord.request_stop();
        coord.join(threads, Duration::from_secs(5)).unwrap();
    }
}
