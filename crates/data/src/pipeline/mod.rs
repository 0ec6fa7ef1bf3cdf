//! [`Pipeline`]: files in, host batches out, on threads (TF's `shuffle_batch_join` family).
//!
//! ```text
//! record cursor (files x epochs, seeded)           shared, under a lock
//!   -> R reader threads: read -> decode -> transform
//!   -> ordered gate (deterministic mode)            records enter the queue in cursor order
//!                                                   (a reader ahead of its turn parks its chunk)
//!   -> example queue (shuffle or FIFO)
//!   -> batcher thread: dequeue_many(B) -> HostBatch
//!   -> batch queue (prefetch depth k)
//!   -> Pipeline::next_batch
//! ```
//!
//! The TF shapes map onto [`PipelineConfig`]: `shuffle_batch_join` is [`PipelineConfig::train`]
//! (shuffle queue, R readers); `batch_join` is the same with `shuffle: None`; `batch` is one
//! reader. [`PipelineConfig::eval`] reads every example exactly once, in file order, and keeps
//! the last partial batch.
//!
//! Reproducibility: with `deterministic` on (the default), the batches depend only on the
//! files, the config and the seed, not on the number of reader threads nor on thread timing:
//! each record's distortions are seeded by its sequence number, records enter the example
//! queue in sequence order, and the shuffle queue's picks depend only on that order.
//!
//! Resuming: [`Pipeline::position`] says where the input stands after the batches taken so far
//! (see [`InputPosition`]); [`Pipeline::resume`] starts there, reading nothing before it. With
//! `deterministic` on, the resumed pipeline gives the batches the uninterrupted one would have
//! given next; without it, no record is repeated or left out.
//!
//! [`DatasetPipeline`] is the same machinery over a Burn `Dataset` (`dataset/`): the
//! threads and queues live in `engine.rs`, generic over what is read and batched.
//!
//! One file per concept: `config.rs` ([`PipelineConfig`]), `file_pipeline.rs` ([`Pipeline`]),
//! `files.rs` (what its readers do with a record), `batch.rs` ([`HostBatch`]), `engine.rs` (the
//! threads and queues), `record_cursor.rs` and `position/` (record order and where it stands).

mod batch;
mod config;
mod corrupt_records;
mod dataset;
mod engine;
mod file_pipeline;
mod files;
mod layout;
mod ordered_gate;
mod position;
mod queue_fill;
mod record_cursor;
mod recut;
mod share;

pub use batch::{BatchSlice, HostBatch, image_loss};
pub use config::{FinalBatch, PipelineConfig, ShuffleConfig};
pub use corrupt_records::{CorruptRecords, RecordCount};
pub use dataset::{DatasetPipeline, DatasetPosition, ItemAt, NextItem};
pub use file_pipeline::Pipeline;
pub use position::{CursorAt, InputPosition, RecordAt};
pub use queue_fill::QueueFill;
pub use share::Share;
