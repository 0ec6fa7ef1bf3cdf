//! CIFAR-10 and CIFAR-100 in their published layouts and as TensorFlow Datasets prepares them,
//! and the built-in synthetic CIFAR-10; the public modules [`cifar10`](crate::cifar10) and
//! [`cifar100`](crate::cifar100) offer each dataset's part.
//!
//! - `dataset.rs`: how the two datasets' files differ (`Cifar`), their constants.
//! - `binary.rs`: the binary layouts (`cifar-10-batches-bin`, TF's tutorial reads it, and
//!   `cifar-100-binary`): files of fixed-size records, the label bytes then the image.
//! - `python.rs`: the python layouts (`cifar-10-batches-py`, `cifar-100-python`,
//!   torchvision's downloads): each file a pickled dict of a numpy array of images and lists
//!   of labels, read by a pickle machine that runs nothing (`format/pickle/`).
//! - `tfds.rs`: TFDS's `cifar10` and `cifar100` (`~/tensorflow_datasets/cifar10/3.0.2`, what
//!   `tfds.load` prepares): TFRecord shards of PNG images.
//! - `dir.rs`: a folder of any of these layouts, found by its files.
//! - `builtin.rs`: synthetic CIFAR-10 in the binary layout.
//!
//! Every reader gives images 32x32x3 with values 0..=255, as TF's tutorial reads them.

/// `RecordFormat` for one of the public format types, by the reader of both datasets that its
/// method `$reader` gives: CIFAR-10's and CIFAR-100's types differ in their constructors only.
macro_rules! record_format_by {
    ($format:ty, $reader:ident) => {
        impl crate::format::RecordFormat for $format {
            fn index(&self, path: &std::path::Path) -> Result<Vec<crate::format::RecordSpan>> {
                self.$reader().index(path)
            }

            fn index_partial(&self, path: &std::path::Path) -> Result<crate::format::PartialIndex> {
                self.$reader().index_partial(path)
            }

            fn reads_compressed_files(&self) -> bool {
                self.$reader().reads_compressed_files()
            }

            fn decode(
                &self,
                path: &std::path::Path,
                record: usize,
                bytes: &[u8],
            ) -> Result<crate::format::Example> {
                self.$reader().decode(path, record, bytes)
            }
        }
    };
}

mod binary;
mod builtin;
mod dataset;
mod dir;
mod python;
mod tfds;

pub use binary::{Cifar10Format, Cifar100Format};
pub use builtin::{BuiltinCifar10, encode_record, write_synthetic};
pub(crate) use dataset::Cifar;
pub use dataset::{
    CIFAR100_RECORD_BYTES, Cifar100Labels, IMAGE_BYTES, IMAGE_SIZE, NUM_CLASSES,
    NUM_COARSE_CLASSES, NUM_FINE_CLASSES, PYTHON_TEST_FILE, PYTHON_TRAIN_FILES, RECORD_BYTES,
    TEST_FILE, TRAIN_FILES,
};
pub use dir::{Cifar10Dir, Cifar100Dir, Layout, test_files, train_files};
pub use python::{Cifar10PythonFormat, Cifar100PythonFormat};
pub use tfds::{Cifar10TfdsFormat, Cifar100TfdsFormat};

use std::path::Path;

use crate::error::Result;
use crate::format::Example;
use crate::format::record_format::checked_label;
use crate::image::Image;

/// Record `record` of `path` of `cifar` from its label and its image's [`IMAGE_BYTES`] plane
/// bytes: a label out of range is an error naming both.
fn example(cifar: Cifar, path: &Path, record: usize, label: i64, planes: &[u8]) -> Result<Example> {
    let label = checked_label(path, record, label, 0, cifar.num_classes())?;
    let planes: Vec<f32> = planes.iter().map(|&b| b as f32).collect();
    Ok(Example {
        image: Image::from_chw(&planes, 3, IMAGE_SIZE, IMAGE_SIZE),
        label,
        boxes: Vec::new(),
    })
}
