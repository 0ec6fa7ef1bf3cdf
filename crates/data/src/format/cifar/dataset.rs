//! [`Cifar`]: which CIFAR dataset a reader reads, and of CIFAR-100's two labels which one: the
//! one place that says how the two datasets' files differ. Both hold 32x32 images as three
//! planes (R, G, B) of 1024 bytes, row by row; CIFAR-10's records carry one label, CIFAR-100's
//! two (a coarse class of 20, a fine class of 100).

use super::Layout;

/// Side of a CIFAR image.
pub const IMAGE_SIZE: usize = 32;
/// Bytes of one image: 3 planes of 32x32.
pub const IMAGE_BYTES: usize = 3 * IMAGE_SIZE * IMAGE_SIZE;

/// Classes in CIFAR-10.
pub const NUM_CLASSES: usize = 10;
/// Bytes in one record of CIFAR-10's binary layout: the label byte and the image.
pub const RECORD_BYTES: usize = 1 + IMAGE_BYTES;
/// Training files of CIFAR-10's binary layout.
pub const TRAIN_FILES: [&str; 5] = [
    "data_batch_1.bin",
    "data_batch_2.bin",
    "data_batch_3.bin",
    "data_batch_4.bin",
    "data_batch_5.bin",
];
/// The test file of CIFAR-10's binary layout.
pub const TEST_FILE: &str = "test_batch.bin";
/// Training files of CIFAR-10's python layout.
pub const PYTHON_TRAIN_FILES: [&str; 5] = [
    "data_batch_1",
    "data_batch_2",
    "data_batch_3",
    "data_batch_4",
    "data_batch_5",
];
/// The test file of CIFAR-10's python layout.
pub const PYTHON_TEST_FILE: &str = "test_batch";

/// CIFAR-100's fine classes.
pub const NUM_FINE_CLASSES: usize = 100;
/// CIFAR-100's coarse classes (superclasses).
pub const NUM_COARSE_CLASSES: usize = 20;
/// Bytes in one record of CIFAR-100's binary layout: the coarse label byte, the fine one and
/// the image.
pub const CIFAR100_RECORD_BYTES: usize = 2 + IMAGE_BYTES;

/// Which of CIFAR-100's two labels a reader takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Cifar100Labels {
    /// The 100 classes: the python layout's `fine_labels`, torchvision's `CIFAR100` targets,
    /// TFDS's `label`.
    #[default]
    Fine,
    /// The 20 superclasses: `coarse_labels`, TFDS's `coarse_label`.
    Coarse,
}

impl Cifar100Labels {
    /// The classes of these labels: 100 or 20.
    pub fn num_classes(self) -> usize {
        Cifar::Hundred(self).num_classes()
    }
}

impl std::str::FromStr for Cifar100Labels {
    type Err = String;

    /// `fine` or `coarse`.
    fn from_str(name: &str) -> Result<Self, String> {
        match name {
            "fine" => Ok(Self::Fine),
            "coarse" => Ok(Self::Coarse),
            other => Err(format!(
                "unknown CIFAR-100 labels `{other}`: fine or coarse"
            )),
        }
    }
}

/// A CIFAR dataset as a reader takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cifar {
    Ten,
    Hundred(Cifar100Labels),
}

impl Cifar {
    /// The dataset's name, for messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Cifar::Ten => "CIFAR-10",
            Cifar::Hundred(_) => "CIFAR-100",
        }
    }

    /// The classes of the labels taken.
    pub(crate) fn num_classes(self) -> usize {
        match self {
            Cifar::Ten => NUM_CLASSES,
            Cifar::Hundred(Cifar100Labels::Fine) => NUM_FINE_CLASSES,
            Cifar::Hundred(Cifar100Labels::Coarse) => NUM_COARSE_CLASSES,
        }
    }

    /// Bytes of a binary record.
    pub(crate) fn record_bytes(self) -> usize {
        match self {
            Cifar::Ten => RECORD_BYTES,
            Cifar::Hundred(_) => CIFAR100_RECORD_BYTES,
        }
    }

    /// Where in a binary record the label taken is (the image follows the label bytes).
    pub(crate) fn label_byte(self) -> usize {
        match self {
            Cifar::Ten | Cifar::Hundred(Cifar100Labels::Coarse) => 0,
            Cifar::Hundred(Cifar100Labels::Fine) => 1,
        }
    }

    /// The python layout's key of the labels taken.
    pub(crate) fn python_key(self) -> &'static str {
        match self {
            Cifar::Ten => "labels",
            Cifar::Hundred(Cifar100Labels::Fine) => "fine_labels",
            Cifar::Hundred(Cifar100Labels::Coarse) => "coarse_labels",
        }
    }

    /// The dataset's name in TFDS and its feature of the labels taken.
    pub(crate) fn tfds(self) -> (&'static str, &'static str) {
        match self {
            Cifar::Ten => ("cifar10", "label"),
            Cifar::Hundred(Cifar100Labels::Fine) => ("cifar100", "label"),
            Cifar::Hundred(Cifar100Labels::Coarse) => ("cifar100", "coarse_label"),
        }
    }

    /// The folder `layout` is published in (TFDS's: the dataset's folder in its `data_dir`).
    pub(crate) fn folder_name(self, layout: Layout) -> &'static str {
        match (self, layout) {
            (_, Layout::Tfds) => self.tfds().0,
            (Cifar::Ten, Layout::Binary) => "cifar-10-batches-bin",
            (Cifar::Ten, Layout::Python) => "cifar-10-batches-py",
            (Cifar::Hundred(_), Layout::Binary) => "cifar-100-binary",
            (Cifar::Hundred(_), Layout::Python) => "cifar-100-python",
        }
    }

    /// The training files' and the test files' names in `layout`; none for TFDS's, which its
    /// `dataset_info.json` lists.
    pub(crate) fn file_names(
        self,
        layout: Layout,
    ) -> (&'static [&'static str], &'static [&'static str]) {
        match (self, layout) {
            (_, Layout::Tfds) => (&[], &[]),
            (Cifar::Ten, Layout::Binary) => (&TRAIN_FILES, &[TEST_FILE]),
            (Cifar::Ten, Layout::Python) => (&PYTHON_TRAIN_FILES, &[PYTHON_TEST_FILE]),
            (Cifar::Hundred(_), Layout::Binary) => (&["train.bin"], &["test.bin"]),
            (Cifar::Hundred(_), Layout::Python) => (&["train"], &["test"]),
        }
    }
}
