//! Dataset formats: how files split into records and how a record becomes an image and label.
//!
//! - [`RecordFormat`] (`record_format.rs`): the trait every format implements for the pipeline.
//! - [`cifar10`]: CIFAR-10's fixed-size binary records.
//! - [`tfrecord`] framing and [`tf_example`] protos; [`inception`]: TFRecord shards of
//!   `tf.train.Example`s with encoded images, as TF's Inception trainer reads them.
//! - [`image_folder`]: one folder per class, its images decoded by [`crate::codec`].
//! - [`synthetic`]: built-in data for demos and tests.
//! - [`RecordDataset`] (`record_dataset.rs`): files of any format as a Burn `Dataset`.

pub mod cifar10;
pub mod image_folder;
pub mod inception;
mod record_bytes;
mod record_dataset;
mod record_format;
pub mod synthetic;
pub mod tf_example;
pub mod tfrecord;

pub(crate) use record_bytes::read_records;
pub use record_dataset::RecordDataset;
pub(crate) use record_format::record_error;
pub use record_format::{Example, PartialIndex, Prepared, RecordFormat, RecordSpan};
