//! towers-data: the threaded input pipeline of burn-towers, in the shape of TF 1.x queues.
//!
//! The files and folders are the layers, bottom up; each imports only from those below it
//! (`tests/layers.rs` checks it, with the order written once):
//! - `error.rs` ([`Error`]) and [`atomic_file`] (write-then-rename, used for checkpoints).
//! - `queue/`: TF's queue machinery: [`Queue`] (bounded blocking FIFO / shuffle queues with
//!   close and cancel), [`Coordinator`] and [`QueueRunner`] (threads that stop together and
//!   report the first error).
//! - The vocabulary the layers above share: `buffer_pool.rs` (buffers a batch hands back for
//!   the next), `image.rs` ([`Image`], the pixels passed between formats and transforms),
//!   `bounding_box.rs` ([`BoundingBox`]), `rng.rs` ([`transforms::Rng`], the seeded
//!   generator) and [`codec`] (image decoding: JPEG, PNG, BMP, PPM/PGM, TIFF, WebP, GIF).
//! - [`transforms`]: the TF image ops of both trainers (crops, flips, colour, resize), and the
//!   [`Transform`](transforms::Transform) trait that chains them.
//! - `format/`: dataset files: the [`RecordFormat`] trait and its readers, [`cifar10`] in both
//!   layouts (binary files, torchvision's pickled batches), [`inception`] TFRecord shards of
//!   `tf.train.Example`s ([`tfrecord`], [`tf_example`]), datasets TensorFlow Datasets prepared
//!   ([`tfds`]), [`image_folder`]s, [`synthetic`]
//!   built-in data; [`IndexedFile`]: a file's records and where to read them (a decompressed
//!   copy for a file TF wrote compressed); [`RecordDataset`] offers any of them to Burn as a
//!   `Dataset`.
//! - `pipeline/`: how they are wired: [`Pipeline`] = record cursor -> reader threads ->
//!   example queue -> batcher -> prefetch queue, giving [`HostBatch`]es to split across
//!   devices; [`CorruptRecords`] says whether a record that fails to decode stops it or is
//!   skipped; [`InputPosition`] says where the input stands after the batches taken, saved
//!   with checkpoints and restored by [`Pipeline::resume`] in constant time.
//!   [`DatasetPipeline`] runs the same threads over any Burn `Dataset`, giving batches of its
//!   items, with [`DatasetPosition`] to resume from.
//!
//! Every public item has one path: the folders `queue/`, `format/` and `pipeline/` are private
//! and their public items are re-exported here; [`transforms`], [`codec`] and the formats'
//! modules ([`cifar10`], [`inception`], ...) are reached by their module.
//!
//! JPEGs decode to `tf.io.decode_jpeg`'s pixels bit for bit (libjpeg-turbo's decoder with TF's
//! settings, built from source by the `cc` crate: a C compiler is all the build needs); feature
//! `jpeg-simd` (on by default) adds libjpeg-turbo's x86 SIMD code when NASM is on the PATH at
//! build time, for the same pixels faster. [`codec`] is the one place that decodes JPEGs.

pub mod atomic_file;
mod bounding_box;
mod buffer_pool;
pub mod codec;
mod error;
mod format;
mod image;
mod pipeline;
mod queue;
mod rng;
pub mod transforms;

pub use bounding_box::BoundingBox;
pub use error::{Cause, Error, ErrorChain, Result, While};
pub use format::{
    Compression, Example, IndexedFile, PartialIndex, Prepared, RecordDataset, RecordFormat,
    RecordReader, RecordSlices, RecordSource, RecordSpan, cifar10, cifar100, image_folder,
    inception, synthetic, tf_example, tfds, tfrecord,
};
pub use image::{Image, Planes, Rgb8};
pub use pipeline::{
    BatchSlice, CorruptRecords, CursorAt, DatasetPipeline, DatasetPosition, FinalBatch, HostBatch,
    InputPosition, ItemAt, NextItem, Pipeline, PipelineConfig, QueueFill, RecordAt, RecordCount,
    Share, ShuffleConfig, image_loss,
};
pub use queue::{CoordinatedThread, Coordinator, Held, Queue, QueueError, QueueRunner, ShuffleRng};
