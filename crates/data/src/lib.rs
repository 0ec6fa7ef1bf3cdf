//! towers-data: the threaded input pipeline of burn-towers, in the shape of TF 1.x queues.
//!
//! - [`Queue`]: bounded blocking FIFO / shuffle queues with close and cancel.
//! - [`Coordinator`] and [`QueueRunner`]: threads that stop together and report the first error.
//! - [`Pipeline`]: record cursor -> reader threads -> example queue -> batcher -> prefetch queue;
//!   [`CorruptRecords`] says whether a record that fails to decode stops it or is skipped.
//! - [`RecordFormat`] readers: [`cifar10`] binary files, [`inception`] TFRecord shards of
//!   `tf.train.Example`s ([`tfrecord`], [`tf_example`]), [`image_folder`]s; [`codec`] decodes
//!   JPEG and PNG; [`transforms`] are the TF image ops of both trainers.
//! - [`HostBatch`]: the output, split across devices and uploaded slice by slice.
//! - [`InputPosition`]: where the input stands after the batches taken, saved with checkpoints
//!   and restored by [`Pipeline::resume`] in constant time.

pub mod atomic_file;
mod batch;
mod buffer_pool;
pub mod cifar10;
pub mod codec;
mod coordinator;
mod corrupt_records;
mod error;
mod format;
mod image;
pub mod image_folder;
pub mod inception;
mod ordered_gate;
mod pipeline;
mod position;
mod queue;
mod queue_runner;
mod record_cursor;
pub mod synthetic;
pub mod tf_example;
pub mod tfrecord;
pub mod transforms;

pub use batch::{BatchSlice, HostBatch, split_sizes};
pub use coordinator::{CoordinatedThread, Coordinator};
pub use corrupt_records::{CorruptRecords, RecordCount};
pub use error::{Error, Result};
pub use format::{BoundingBox, Example, PartialIndex, Prepared, RecordFormat, RecordSpan};
pub use image::{Image, Planes, Rgb8};
pub use pipeline::{FinalBatch, Pipeline, PipelineConfig, QueueFill, ShuffleConfig};
pub use position::{CursorAt, InputPosition, RecordAt};
pub use queue::{Held, Queue, QueueError, ShuffleRng};
pub use queue_runner::QueueRunner;
