//! CIFAR-100 in both of its published layouts and as TensorFlow Datasets prepares it (the
//! readers, CIFAR-10's with two label bytes: `format/cifar/`). Each image has a fine class of
//! 100 and a coarse one of 20; a reader takes the [`Cifar100Labels`] it is given.
//!
//! - [`Cifar100Format`]: the binary layout (`cifar-100-binary`: `train.bin`, `test.bin`):
//!   3074-byte records, the coarse label byte, the fine one, then the image.
//! - [`Cifar100PythonFormat`]: the python layout (`cifar-100-python`: `train`, `test`,
//!   torchvision's `CIFAR100` downloads it): pickled dicts with `fine_labels` and
//!   `coarse_labels`.
//! - [`Cifar100TfdsFormat`]: TFDS's `cifar100` (`label`, `coarse_label`).
//! - [`Cifar100Dir`]: a folder of any of these layouts, found by its files.

pub use super::cifar::{
    CIFAR100_RECORD_BYTES as RECORD_BYTES, Cifar100Dir, Cifar100Format, Cifar100Labels,
    Cifar100PythonFormat, Cifar100TfdsFormat, IMAGE_BYTES, IMAGE_SIZE, Layout, NUM_COARSE_CLASSES,
    NUM_FINE_CLASSES,
};
