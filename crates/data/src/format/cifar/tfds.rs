//! CIFAR as TensorFlow Datasets prepares it (`tfds.load("cifar10")`, which TF's own CIFAR-10
//! tutorial reads since it moved to TFDS, and `cifar100`): TFRecord shards of
//! `tf.train.Example`s, each image a 32x32 PNG under `image`, its class under `label` (and
//! CIFAR-100's superclass under `coarse_label`).

use std::path::Path;

use super::{Cifar, Cifar100Labels, IMAGE_SIZE};
use crate::codec::decode_rgb8;
use crate::error::{Error, Result};
use crate::format::tfds::{TfdsDataset, TfdsImageFormat};
use crate::format::{Example, PartialIndex, RecordFormat, RecordSpan, record_error};
use crate::image::{Image, Rgb8};

/// Reads TFDS's `cifar10` shards; images come out 32x32x3 with values 0..=255, as
/// [`Cifar10Format`](super::Cifar10Format)'s (the tutorial casts TFDS's `uint8` image to
/// float, unscaled).
#[derive(Debug, Clone)]
pub struct Cifar10TfdsFormat(Shards);

/// Reads TFDS's `cifar100` shards, their `label` or `coarse_label`; images as
/// [`Cifar10TfdsFormat`]'s.
#[derive(Debug, Clone)]
pub struct Cifar100TfdsFormat(Shards);

impl Cifar10TfdsFormat {
    /// The records of `dataset`, TFDS's `cifar10`: an error names a dataset that is not.
    pub fn new(dataset: &TfdsDataset) -> Result<Self> {
        Shards::new(Cifar::Ten, dataset).map(Self)
    }
}

impl Cifar100TfdsFormat {
    /// The records of `dataset`, TFDS's `cifar100`, with their `labels`: an error names a
    /// dataset that is not.
    pub fn new(dataset: &TfdsDataset, labels: Cifar100Labels) -> Result<Self> {
        Shards::new(Cifar::Hundred(labels), dataset).map(Self)
    }
}

impl Cifar10TfdsFormat {
    fn shards(&self) -> &Shards {
        &self.0
    }
}

impl Cifar100TfdsFormat {
    fn shards(&self) -> &Shards {
        &self.0
    }
}

record_format_by!(Cifar10TfdsFormat, shards);
record_format_by!(Cifar100TfdsFormat, shards);

/// The TFDS shards of a CIFAR dataset: the reader both formats are.
#[derive(Debug, Clone)]
struct Shards {
    format: TfdsImageFormat,
}

impl Shards {
    /// `dataset`'s records, its image and `cifar`'s label: an error names a dataset that is
    /// not `cifar`'s.
    fn new(cifar: Cifar, dataset: &TfdsDataset) -> Result<Self> {
        let (name, label) = cifar.tfds();
        if dataset.name() != name {
            return Err(Error::File {
                path: dataset.dir().to_path_buf(),
                reason: format!(
                    "TFDS's {} ({} classes), not {name}",
                    dataset.name(),
                    dataset.num_classes()
                ),
            });
        }
        let dataset = dataset.clone().with_keys(dataset.image_key(), label)?;
        if dataset.num_classes() != cifar.num_classes() {
            return Err(Error::File {
                path: dataset.dir().to_path_buf(),
                reason: format!(
                    "its {label} has {} classes, not {name}'s {}",
                    dataset.num_classes(),
                    cifar.num_classes()
                ),
            });
        }
        Ok(Self {
            format: dataset.image_format(),
        })
    }
}

impl RecordFormat for Shards {
    fn index(&self, path: &Path) -> Result<Vec<RecordSpan>> {
        self.format.index(path)
    }

    fn index_partial(&self, path: &Path) -> Result<PartialIndex> {
        self.format.index_partial(path)
    }

    fn decode(&self, path: &Path, record: usize, bytes: &[u8]) -> Result<Example> {
        let (encoded, label) = self.format.parse(path, record, bytes)?;
        let mut rgb = Rgb8::default();
        decode_rgb8(&encoded, &mut rgb).map_err(|reason| record_error(path, record, reason))?;
        if (rgb.height, rgb.width) != (IMAGE_SIZE, IMAGE_SIZE) {
            let reason = format!("a {}x{} image, not CIFAR's 32x32", rgb.height, rgb.width);
            return Err(record_error(path, record, reason));
        }
        let values = rgb.pixels.iter().map(|&v| v as f32).collect();
        Ok(Example {
            image: Image::from_hwc(values, IMAGE_SIZE, IMAGE_SIZE, 3),
            label,
            boxes: Vec::new(),
        })
    }
}
