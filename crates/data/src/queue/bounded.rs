//! Bounded blocking queues in the shape of TF's `FIFOQueue` and `RandomShuffleQueue`.
//!
//! A [`Queue`] is shared by reference (usually in an `Arc`) between producer and consumer
//! threads. Every blocking call returns once it can proceed, or when the queue is closed or
//! cancelled, so no thread waits on a queue nobody will ever fill.
//!
//! - [`Queue::close`] ends the input: further enqueues fail with [`QueueError::Closed`];
//!   consumers drain what is left, then get [`QueueError::Closed`] (end of input).
//! - [`Queue::cancel`] is the hard stop: items are dropped and every call, blocked or not,
//!   returns [`QueueError::Cancelled`].
//!
//! These are hand-written rather than built on crossbeam-channel because the TF semantics do
//! not map onto a channel: `dequeue_many` takes `n` items atomically, a shuffle queue must keep
//! `min_after_dequeue` items back, and closing is an explicit call, not the last sender's drop.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};

use chacha20::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

/// Why a queue operation did not go through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QueueError {
    /// The queue is closed: no more enqueues; for a dequeue, nothing (or not enough) is left.
    #[error("queue closed")]
    Closed,
    /// The queue was cancelled: a hard stop, pending items dropped.
    #[error("queue cancelled")]
    Cancelled,
    /// The request can never be met by this queue (e.g. `dequeue_many(n)` with `n` above the
    /// capacity less `min_after_dequeue`).
    #[error("request for {requested} items can never be met (at most {max} at once)")]
    Unsatisfiable {
        /// Items asked for.
        requested: usize,
        /// The most this queue can hand out at once.
        max: usize,
    },
}

/// Where a shuffle queue's generator stands: its seed and the 32-bit words drawn so far. A queue
/// made with [`Queue::shuffle_at`] from it picks what the original would have picked next.
///
/// The generator is ChaCha8, whose stream can be entered at any word: saving and restoring it
/// costs the same after a billion picks as after one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShuffleRng {
    /// The seed the queue was made with.
    pub seed: u64,
    /// Words of the stream drawn so far.
    pub words: u64,
}

impl ShuffleRng {
    fn generator(self) -> ChaCha8Rng {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        rng.set_word_pos(u128::from(self.words));
        rng
    }
}

/// What a queue holds right after a dequeue, seen under its lock (see
/// [`Queue::dequeue_many_seen`]).
#[derive(Debug)]
pub struct Held<'a, T> {
    items: &'a VecDeque<T>,
    rng: Option<ShuffleRng>,
}

impl<T> Held<'_, T> {
    /// The items left, in the queue's order (a shuffle queue picks among the first ones).
    pub fn items(&self) -> impl Iterator<Item = &T> {
        self.items.iter()
    }

    /// Where a shuffle queue's generator stands; `None` for a FIFO queue.
    pub fn shuffle_rng(&self) -> Option<ShuffleRng> {
        self.rng
    }
}

/// How items leave the queue.
#[derive(Debug)]
enum Order {
    /// First in, first out.
    Fifo,
    /// A seeded random pick among the `min_after_dequeue + 1` oldest items: the output depends
    /// only on the input order and the seed, never on thread timing (TF's RandomShuffleQueue
    /// picks among all items present, which makes runs unrepeatable).
    Shuffle {
        min_after_dequeue: usize,
        seed: u64,
        /// Boxed: ChaCha keeps a 256-byte block buffer.
        rng: Box<ChaCha8Rng>,
    },
}

#[derive(Debug)]
struct State<T> {
    items: VecDeque<T>,
    order: Order,
    closed: bool,
    cancelled: bool,
}

impl<T> State<T> {
    /// Items that must stay in the queue while it is open.
    fn reserve(&self) -> usize {
        match (&self.order, self.closed) {
            (
                Order::Shuffle {
                    min_after_dequeue, ..
                },
                false,
            ) => *min_after_dequeue,
            _ => 0,
        }
    }

    fn shuffle_rng(&self) -> Option<ShuffleRng> {
        match &self.order {
            Order::Fifo => None,
            Order::Shuffle { seed, rng, .. } => Some(ShuffleRng {
                seed: *seed,
                words: u64::try_from(rng.get_word_pos()).expect("fewer than 2^64 words drawn"),
            }),
        }
    }

    fn take_one(&mut self) -> T {
        if let Order::Shuffle {
            min_after_dequeue,
            rng,
            ..
        } = &mut self.order
        {
            let window = self.items.len().min(*min_after_dequeue + 1);
            let pick = rng.random_range(0..window);
            self.items.swap(0, pick);
        }
        self.items.pop_front().expect("take_one on an empty queue")
    }
}

/// A bounded, blocking, closable queue: FIFO or seeded shuffle.
#[derive(Debug)]
pub struct Queue<T> {
    state: Mutex<State<T>>,
    capacity: usize,
    not_empty: Condvar,
    not_full: Condvar,
}

impl<T> Queue<T> {
    /// A first-in first-out queue holding at most `capacity` items (TF `FIFOQueue`).
    ///
    /// # Panics
    /// If `capacity` is 0.
    pub fn fifo(capacity: usize) -> Self {
        Self::new(capacity, Order::Fifo)
    }

    /// A shuffling queue (TF `RandomShuffleQueue`): holds at most `capacity` items, keeps at
    /// least `min_after_dequeue` of them until closed, and hands out a seeded random pick among
    /// the `min_after_dequeue + 1` oldest.
    ///
    /// # Panics
    /// If `min_after_dequeue >= capacity`.
    pub fn shuffle(capacity: usize, min_after_dequeue: usize, seed: u64) -> Self {
        Self::shuffle_at(capacity, min_after_dequeue, ShuffleRng { seed, words: 0 })
    }

    /// A shuffling queue whose generator continues from `rng` (see [`Held::shuffle_rng`]).
    ///
    /// # Panics
    /// If `min_after_dequeue >= capacity`.
    pub fn shuffle_at(capacity: usize, min_after_dequeue: usize, rng: ShuffleRng) -> Self {
        assert!(
            min_after_dequeue < capacity,
            "shuffle queue: min_after_dequeue ({min_after_dequeue}) must be below capacity ({capacity})"
        );
        Self::new(
            capacity,
            Order::Shuffle {
                min_after_dequeue,
                seed: rng.seed,
                rng: Box::new(rng.generator()),
            },
        )
    }

    fn new(capacity: usize, order: Order) -> Self {
        assert!(capacity > 0, "queue capacity must be at least 1");
        Self {
            state: Mutex::new(State {
                items: VecDeque::with_capacity(capacity),
                order,
                closed: false,
                cancelled: false,
            }),
            capacity,
            not_empty: Condvar::new(),
            not_full: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // A panic while holding this lock cannot leave the state half-updated (every update
        // is a single VecDeque call), so a poisoned lock is still safe to use.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds one item, blocking while the queue is full.
    ///
    /// Fails with `Closed` once the queue is closed and `Cancelled` once it is cancelled; the
    /// item is dropped in both cases.
    pub fn enqueue(&self, item: T) -> Result<(), QueueError> {
        let mut state = self.lock();
        loop {
            if state.cancelled {
                return Err(QueueError::Cancelled);
            }
            if state.closed {
                return Err(QueueError::Closed);
            }
            if state.items.len() < self.capacity {
                break;
            }
            state = self.not_full.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        state.items.push_back(item);
        drop(state);
        self.not_empty.notify_all();
        Ok(())
    }

    /// Removes one item, blocking until one is available (and, for a shuffle queue, until more
    /// than `min_after_dequeue` are held or the queue is closed).
    ///
    /// `Closed` means end of input: the queue is closed and empty.
    pub fn dequeue(&self) -> Result<T, QueueError> {
        self.dequeue_many(1).map(|mut v| v.pop().expect("one item"))
    }

    /// Removes exactly `n` items at once, blocking until they are available.
    ///
    /// When the queue is closed with fewer than `n` items left, fails with `Closed` and leaves
    /// them in place (see [`Queue::dequeue_up_to`] to take a final partial batch).
    pub fn dequeue_many(&self, n: usize) -> Result<Vec<T>, QueueError> {
        self.dequeue_n(n, false, |_| ()).map(|(items, ())| items)
    }

    /// [`Queue::dequeue_many`], and `see` looks at what the queue holds right after, under the
    /// same lock: nothing can enter or leave in between.
    pub fn dequeue_many_seen<S>(
        &self,
        n: usize,
        see: impl FnOnce(Held<'_, T>) -> S,
    ) -> Result<(Vec<T>, S), QueueError> {
        self.dequeue_n(n, false, see)
    }

    /// [`Queue::dequeue_up_to`] with a look at what the queue holds right after (see
    /// [`Queue::dequeue_many_seen`]).
    pub fn dequeue_up_to_seen<S>(
        &self,
        n: usize,
        see: impl FnOnce(Held<'_, T>) -> S,
    ) -> Result<(Vec<T>, S), QueueError> {
        self.dequeue_n(n, true, see)
    }

    /// Like [`Queue::dequeue_many`], but once the queue is closed it returns what is left
    /// (between 1 and `n` items) instead of failing; `Closed` only when nothing is left.
    pub fn dequeue_up_to(&self, n: usize) -> Result<Vec<T>, QueueError> {
        self.dequeue_n(n, true, |_| ()).map(|(items, ())| items)
    }

    fn dequeue_n<S>(
        &self,
        n: usize,
        partial: bool,
        see: impl FnOnce(Held<'_, T>) -> S,
    ) -> Result<(Vec<T>, S), QueueError> {
        let mut state = self.lock();
        let max = self.capacity - state.reserve();
        if n == 0 || n > max {
            return Err(QueueError::Unsatisfiable { requested: n, max });
        }
        loop {
            if state.cancelled {
                return Err(QueueError::Cancelled);
            }
            let len = state.items.len();
            if len >= n + state.reserve() {
                break;
            }
            if state.closed {
                if partial && len > 0 {
                    break;
                }
                return Err(QueueError::Closed);
            }
            state = self
                .not_empty
                .wait(state)
                .unwrap_or_else(|p| p.into_inner());
        }
        let take = n.min(state.items.len());
        let items = (0..take).map(|_| state.take_one()).collect();
        let seen = see(Held {
            items: &state.items,
            rng: state.shuffle_rng(),
        });
        drop(state);
        self.not_full.notify_all();
        Ok((items, seen))
    }

    /// Closes the queue: no more enqueues; consumers drain what is left. Wakes every waiter.
    pub fn close(&self) {
        self.lock().closed = true;
        self.wake_all();
    }

    /// Cancels the queue: drops every item and makes every call, blocked or future, fail with
    /// `Cancelled`. Wakes every waiter.
    pub fn cancel(&self) {
        let dropped = {
            let mut state = self.lock();
            state.cancelled = true;
            state.closed = true;
            std::mem::take(&mut state.items)
        };
        self.wake_all();
        drop(dropped); // outside the lock: items may be large
    }

    fn wake_all(&self) {
        self.not_empty.notify_all();
        self.not_full.notify_all();
    }

    /// Items held now.
    pub fn len(&self) -> usize {
        self.lock().items.len()
    }

    /// Whether the queue holds no item now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most items the queue holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// How full the queue is, from 0.0 (empty) to 1.0 (full).
    pub fn fill(&self) -> f32 {
        self.len() as f32 / self.capacity as f32
    }

    /// Whether [`Queue::close`] or [`Queue::cancel`] was called.
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::mpsc::{Receiver, channel};
    use std::time::Duration;

    /// Runs `op` on another thread; its result arrives on the returned channel.
    fn in_thread<R: Send + 'static>(op: impl FnOnce() -> R + Send + 'static) -> Receiver<R> {
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let _ = tx.send(op());
        });
        rx
    }

    fn still_blocked<R>(rx: &Receiver<R>) -> bool {
        rx.recv_timeout(Duration::from_millis(100)).is_err()
    }

    fn woken<R>(rx: &Receiver<R>) -> R {
        rx.recv_timeout(Duration::from_secs(5))
            .expect("the blocked call returned")
    }

    #[test]
    fn fifo_keeps_order() {
        let q = Queue::fifo(10);
        (0..5).for_each(|i| q.enqueue(i).unwrap());
        assert_eq!(q.dequeue_many(3).unwrap(), vec![0, 1, 2]);
        assert_eq!(q.dequeue().unwrap(), 3);
        assert_eq!(q.len(), 1);
    }

    #[test]
    fn capacity_blocks_producers_until_a_dequeue() {
        let q = Arc::new(Queue::fifo(2));
        q.enqueue(1).unwrap();
        q.enqueue(2).unwrap();
        assert_eq!(q.fill(), 1.0);
        let producer = {
            let q = Arc::clone(&q);
            in_thread(move || q.enqueue(3))
        };
        assert!(still_blocked(&producer));
        assert_eq!(q.len(), 2, "capacity bounds what is held");
        assert_eq!(q.dequeue().unwrap(), 1);
        assert_eq!(woken(&producer), Ok(()));
        assert_eq!(q.dequeue_many(2).unwrap(), vec![2, 3]);
    }

    #[test]
    fn close_drains_then_reports_end_of_input() {
        let q = Queue::fifo(4);
        q.enqueue(1).unwrap();
        q.enqueue(2).unwrap();
        q.close();
        assert_eq!(q.enqueue(3), Err(QueueError::Closed));
        assert_eq!(
            q.dequeue_many(3),
            Err(QueueError::Closed),
            "not enough left"
        );
        assert_eq!(q.len(), 2, "a failed dequeue_many takes nothing");
        assert_eq!(q.dequeue_up_to(3).unwrap(), vec![1, 2]);
        assert_eq!(q.dequeue(), Err(QueueError::Closed));
        assert_eq!(q.dequeue_up_to(3), Err(QueueError::Closed));
    }

    #[test]
    fn close_wakes_blocked_consumers() {
        let q = Arc::new(Queue::<u8>::fifo(4));
        let consumers: Vec<_> = (0..3)
            .map(|_| {
                let q = Arc::clone(&q);
                in_thread(move || q.dequeue())
            })
            .collect();
        assert!(still_blocked(&consumers[0]));
        q.close();
        for c in &consumers {
            assert_eq!(woken(c), Err(QueueError::Closed));
        }
    }

    #[test]
    fn cancel_wakes_producers_and_consumers_and_drops_items() {
        let full = Arc::new(Queue::fifo(1));
        full.enqueue(0).unwrap();
        let producer = {
            let q = Arc::clone(&full);
            in_thread(move || q.enqueue(1))
        };
        let empty = Arc::new(Queue::<i32>::fifo(1));
        let consumer = {
            let q = Arc::clone(&empty);
            in_thread(move || q.dequeue_many(1))
        };
        assert!(still_blocked(&producer) && still_blocked(&consumer));
        full.cancel();
        empty.cancel();
        assert_eq!(woken(&producer), Err(QueueError::Cancelled));
        assert_eq!(woken(&consumer), Err(QueueError::Cancelled));
        assert_eq!(full.len(), 0);
        assert_eq!(full.dequeue(), Err(QueueError::Cancelled));
    }

    #[test]
    fn shuffle_keeps_min_after_dequeue_until_closed() {
        let q = Arc::new(Queue::shuffle(10, 3, 1));
        (0..3).for_each(|i| q.enqueue(i).unwrap());
        let consumer = {
            let q = Arc::clone(&q);
            in_thread(move || q.dequeue())
        };
        assert!(still_blocked(&consumer), "3 held, 3 must stay");
        q.enqueue(3).unwrap();
        assert!(woken(&consumer).is_ok());
        assert_eq!(q.len(), 3);
        let blocked = {
            let q = Arc::clone(&q);
            in_thread(move || q.dequeue_many(2))
        };
        assert!(still_blocked(&blocked));
        q.close();
        assert_eq!(
            woken(&blocked).unwrap().len(),
            2,
            "closing releases the reserve"
        );
        assert_eq!(q.dequeue_up_to(5).unwrap().len(), 1);
    }

    #[test]
    fn shuffle_is_a_seeded_permutation_independent_of_timing() {
        let run = |seed: u64, paced: bool| {
            let q = Arc::new(Queue::shuffle(8, 5, seed));
            let producer = {
                let q = Arc::clone(&q);
                std::thread::spawn(move || {
                    for i in 0..200 {
                        if paced && i % 7 == 0 {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                        q.enqueue(i).unwrap();
                    }
                    q.close();
                })
            };
            let mut out = Vec::new();
            while let Ok(batch) = q.dequeue_up_to(3) {
                if !paced {
                    std::thread::sleep(Duration::from_micros(200));
                }
                out.extend(batch);
            }
            producer.join().unwrap();
            out
        };
        let a = run(7, false);
        let mut sorted = a.clone();
        sorted.sort();
        assert_eq!(
            sorted,
            (0..200).collect::<Vec<_>>(),
            "every item exactly once"
        );
        assert_ne!(a, sorted, "mixed");
        assert_eq!(
            a,
            run(7, true),
            "same seed, same order, whatever the timing"
        );
        assert_ne!(a, run(8, false), "another seed, another order");
        // An item can only move back as far as the window allows: the output at position p
        // comes from the first p + min_after_dequeue + 1 inputs.
        assert!(a.iter().enumerate().all(|(p, &v)| v <= p + 5));
    }

    /// What a dequeue saw (the items left, the generator) rebuilds a queue that picks what
    /// the original picks next.
    #[test]
    fn a_queue_rebuilt_from_what_a_dequeue_saw_picks_the_same() {
        let q = Queue::shuffle(12, 6, 3);
        (0..12).for_each(|i| q.enqueue(i).unwrap());
        let see = |held: Held<'_, i32>| {
            (
                held.items().copied().collect::<Vec<_>>(),
                held.shuffle_rng(),
            )
        };
        let (_, (left, rng)) = q.dequeue_many_seen(4, see).unwrap();
        let rebuilt = Queue::shuffle_at(12, 6, rng.unwrap());
        left.into_iter().for_each(|i| rebuilt.enqueue(i).unwrap());
        for i in 12..30 {
            q.enqueue(i).unwrap();
            rebuilt.enqueue(i).unwrap();
            assert_eq!(q.dequeue().unwrap(), rebuilt.dequeue().unwrap(), "pick {i}");
        }
        let fifo = Queue::fifo(2);
        fifo.enqueue(7u8).unwrap();
        fifo.close();
        assert_eq!(
            fifo.dequeue_up_to_seen(2, |held| held.shuffle_rng()),
            Ok((vec![7], None)),
            "a FIFO queue has no generator"
        );
    }

    #[test]
    fn impossible_requests_fail_at_once() {
        let q = Queue::<u8>::shuffle(10, 8, 0);
        assert_eq!(
            q.dequeue_many(3),
            Err(QueueError::Unsatisfiable {
                requested: 3,
                max: 2
            })
        );
        assert!(matches!(
            Queue::<u8>::fifo(2).dequeue_many(0),
            Err(QueueError::Unsatisfiable { .. })
        ));
    }
}
