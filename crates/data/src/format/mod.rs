//! Dataset formats: how files split into records and how a record becomes an image and label.
//!
//! - [`RecordFormat`] (`record_format.rs`): the trait every format implements for the pipeline.
//! - [`cifar10`], [`cifar100`]: CIFAR's binary records, its python layout's pickled batches,
//!   read by a pickle machine that runs nothing (`pickle/`), and TFDS's `cifar10` and
//!   `cifar100`; the readers of both are `cifar/`.
//! - [`tfrecord`] framing and [`tf_example`] protos; [`inception`]: TFRecord shards of
//!   `tf.train.Example`s with encoded images, as TF's Inception trainer reads them.
//! - [`tfds`]: datasets TensorFlow Datasets prepared (`~/tensorflow_datasets/<name>/<version>`),
//!   TFRecord shards of `tf.train.Example`s with an encoded image and a class.
//! - [`image_folder`]: one folder per class, its images decoded by [`crate::codec`].
//! - [`synthetic`]: built-in data for demos and tests.
//! - [`IndexedFile`] (`indexed_file.rs`): a file's records as its format indexed them, and the
//!   [`RecordSource`] (`record_source.rs`) to read them from: the file, or for a file TF wrote
//!   GZIP- or ZLIB-compressed ([`Compression`], `compressed.rs`), its decompressed copy,
//!   written so that it leaves its disk room (`disk_room.rs`).
//! - A TFRecord index stops with an error before it would take the memory the process needs
//!   (`memory_room.rs`): a file of tiny records needs an index about its own size; so does a
//!   read of a record whose length (a header's, a sparse file's) is more than memory holds.
//! - [`RecordDataset`] (`record_dataset.rs`): files of any format as a Burn `Dataset`.
//! - [`RecordSlices`] (`record_slices.rs`): a range of each file's records, of any format.

mod cifar;
pub mod cifar10;
pub mod cifar100;
mod compressed;
mod disk_room;
pub mod image_folder;
pub mod inception;
mod indexed_file;
mod memory_room;
mod pickle;
mod record_bytes;
mod record_dataset;
mod record_format;
mod record_slices;
mod record_source;
pub mod synthetic;
pub mod tf_example;
pub mod tfds;
pub mod tfrecord;

pub use compressed::Compression;
pub use indexed_file::IndexedFile;
pub(crate) use indexed_file::not_a_file;
pub(crate) use record_bytes::read_records;
pub use record_dataset::RecordDataset;
pub(crate) use record_format::record_error;
pub use record_format::{Example, PartialIndex, Prepared, RecordFormat, RecordSpan};
pub use record_slices::RecordSlices;
pub use record_source::{RecordReader, RecordSource};
