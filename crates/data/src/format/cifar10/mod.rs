//! CIFAR-10 in both of its published layouts and as TensorFlow Datasets prepares it, and the
//! built-in synthetic CIFAR-10.
//!
//! - `binary.rs`: [`Cifar10Format`], the binary layout (`cifar-10-batches-bin`, TF's tutorial
//!   reads it): files of 3073-byte records, a label byte then the image.
//! - `python.rs`: [`Cifar10PythonFormat`], the python layout (`cifar-10-batches-py`,
//!   torchvision's `CIFAR10` downloads it): each file a pickled dict of a numpy array of
//!   images and a list of labels.
//! - `tfds.rs`: [`Cifar10TfdsFormat`], TFDS's `cifar10` (`~/tensorflow_datasets/cifar10/3.0.2`,
//!   what `tfds.load("cifar10")` prepares): TFRecord shards of PNG images.
//! - `dir.rs`: [`Cifar10Dir`], a folder of any of these layouts, found by its files.
//! - `builtin.rs`: [`BuiltinCifar10`], synthetic data in the binary layout.
//!
//! The published layouts hold each image as three planes (R, G, B) of 32x32 bytes, row by row.

mod binary;
mod builtin;
mod dir;
mod python;
mod tfds;

pub use binary::Cifar10Format;
pub use builtin::{BuiltinCifar10, encode_record, write_synthetic};
pub use dir::{Cifar10Dir, Layout, test_files, train_files};
pub use python::Cifar10PythonFormat;
pub use tfds::Cifar10TfdsFormat;

use std::path::Path;

use crate::error::Result;
use crate::format::Example;
use crate::format::record_format::checked_label;
use crate::image::Image;

/// Side of a CIFAR-10 image.
pub const IMAGE_SIZE: usize = 32;
/// Classes in CIFAR-10.
pub const NUM_CLASSES: usize = 10;
/// Bytes of one image: 3 planes of 32x32.
pub const IMAGE_BYTES: usize = 3 * IMAGE_SIZE * IMAGE_SIZE;
/// Bytes in one record of the binary layout: the label byte and the image.
pub const RECORD_BYTES: usize = 1 + IMAGE_BYTES;
/// Training files of the binary layout.
pub const TRAIN_FILES: [&str; 5] = [
    "data_batch_1.bin",
    "data_batch_2.bin",
    "data_batch_3.bin",
    "data_batch_4.bin",
    "data_batch_5.bin",
];
/// The test file of the binary layout.
pub const TEST_FILE: &str = "test_batch.bin";
/// Training files of the python layout.
pub const PYTHON_TRAIN_FILES: [&str; 5] = [
    "data_batch_1",
    "data_batch_2",
    "data_batch_3",
    "data_batch_4",
    "data_batch_5",
];
/// The test file of the python layout.
pub const PYTHON_TEST_FILE: &str = "test_batch";

/// Record `record` of `path` from its label and its image's [`IMAGE_BYTES`] plane bytes: a
/// label out of range is an error naming both.
fn example(path: &Path, record: usize, label: i64, planes: &[u8]) -> Result<Example> {
    let label = checked_label(path, record, label, 0, NUM_CLASSES)?;
    let planes: Vec<f32> = planes.iter().map(|&b| b as f32).collect();
    Ok(Example {
        image: Image::from_chw(&planes, 3, IMAGE_SIZE, IMAGE_SIZE),
        label,
        boxes: Vec::new(),
    })
}
