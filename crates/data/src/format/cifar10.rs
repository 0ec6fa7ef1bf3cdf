//! CIFAR-10 in both of its published layouts and as TensorFlow Datasets prepares it, and the
//! built-in synthetic CIFAR-10 (the readers: `format/cifar/`).
//!
//! - [`Cifar10Format`]: the binary layout (`cifar-10-batches-bin`, TF's tutorial reads it):
//!   files of 3073-byte records, a label byte then the image.
//! - [`Cifar10PythonFormat`]: the python layout (`cifar-10-batches-py`, torchvision's
//!   `CIFAR10` downloads it): each file a pickled dict of a numpy array of images and a list of
//!   labels.
//! - [`Cifar10TfdsFormat`]: TFDS's `cifar10` (`~/tensorflow_datasets/cifar10/3.0.2`, what
//!   `tfds.load("cifar10")` prepares): TFRecord shards of PNG images.
//! - [`Cifar10Dir`]: a folder of any of these layouts, found by its files.
//! - [`BuiltinCifar10`]: synthetic data in the binary layout.
//!
//! The published layouts hold each image as three planes (R, G, B) of 32x32 bytes, row by row.

pub use super::cifar::{
    BuiltinCifar10, Cifar10Dir, Cifar10Format, Cifar10PythonFormat, Cifar10TfdsFormat, IMAGE_BYTES,
    IMAGE_SIZE, Layout, NUM_CLASSES, PYTHON_TEST_FILE, PYTHON_TRAIN_FILES, RECORD_BYTES, TEST_FILE,
    TRAIN_FILES, encode_record, test_files, train_files, write_synthetic,
};
