//! Datasets TensorFlow Datasets prepared: what `tfds.load("cifar10")` downloads and writes
//! under its `data_dir` (`~/tensorflow_datasets`), read without TFDS, as `as_supervised=True`
//! reads them.
//!
//! - `info.rs`: `dataset_info.json` (splits, shard counts, file names).
//! - `features.rs`: `features.json` (which features are images and class labels).
//! - `dataset.rs`: [`TfdsDataset`], a prepared dataset found by its folder, its splits' files.
//! - `split_spec.rs`: TFDS's split specs (`train[:80%]+validation`), resolved to records.
//! - `format.rs`: [`TfdsImageFormat`], the [`RecordFormat`](crate::RecordFormat) of its
//!   TFRecord shards of `tf.train.Example`s: an encoded image and a class.
//!
//! Only TFDS's default file format, TFRecord, is read; a dataset prepared as ArrayRecord,
//! Riegeli or Parquet is refused with what to do.

mod dataset;
mod features;
mod format;
mod info;
mod split_spec;

pub use dataset::TfdsDataset;
pub use format::TfdsImageFormat;
