//! TF's queue machinery: bounded blocking queues, the coordinator that stops threads
//! together, and the queue runners that fill queues from threads.
//!
//! - [`Queue`] (`bounded.rs`): FIFO and random-shuffle queues with close and cancel.
//! - [`Coordinator`] (`coordinator.rs`): the first error stops every thread; `join` reports it.
//! - [`QueueRunner`] (`runner.rs`): N threads running one enqueue loop under a coordinator.

mod bounded;
mod coordinator;
mod runner;

pub use bounded::{Held, Queue, QueueError, ShuffleRng};
pub(crate) use coordinator::panic_message;
pub use coordinator::{CoordinatedThread, Coordinator};
pub use runner::QueueRunner;
