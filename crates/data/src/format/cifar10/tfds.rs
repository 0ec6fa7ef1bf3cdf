//! CIFAR-10 as TensorFlow Datasets prepares it (`tfds.load("cifar10")`, which TF's own CIFAR-10
//! tutorial reads since it moved to TFDS): TFRecord shards of `tf.train.Example`s, each image a
//! 32x32 PNG under `image`, its class under `label`.

use std::path::Path;

use super::{IMAGE_SIZE, NUM_CLASSES};
use crate::codec::decode_rgb8;
use crate::error::{Error, Result};
use crate::format::tfds::{TfdsDataset, TfdsImageFormat};
use crate::format::{Example, PartialIndex, RecordFormat, RecordSpan, record_error};
use crate::image::{Image, Rgb8};

/// The dataset's name in TFDS, and its folder under TFDS's `data_dir`.
pub(super) const TFDS_NAME: &str = "cifar10";

/// Reads TFDS's `cifar10` shards; images come out 32x32x3 with values 0..=255, as
/// [`Cifar10Format`](super::Cifar10Format)'s (the tutorial casts TFDS's `uint8` image to
/// float, unscaled).
#[derive(Debug, Clone)]
pub struct Cifar10TfdsFormat(TfdsImageFormat);

impl Cifar10TfdsFormat {
    /// The records of `dataset`, TFDS's `cifar10`: an error names a dataset that is not.
    pub fn new(dataset: &TfdsDataset) -> Result<Self> {
        if dataset.name() != TFDS_NAME || dataset.num_classes() != NUM_CLASSES {
            return Err(Error::File {
                path: dataset.dir().to_path_buf(),
                reason: format!(
                    "TFDS's {} ({} classes), not {TFDS_NAME}",
                    dataset.name(),
                    dataset.num_classes()
                ),
            });
        }
        Ok(Self(dataset.image_format()))
    }
}

impl RecordFormat for Cifar10TfdsFormat {
    fn index(&self, path: &Path) -> Result<Vec<RecordSpan>> {
        self.0.index(path)
    }

    fn index_partial(&self, path: &Path) -> Result<PartialIndex> {
        self.0.index_partial(path)
    }

    fn decode(&self, path: &Path, record: usize, bytes: &[u8]) -> Result<Example> {
        let (encoded, label) = self.0.parse(path, record, bytes)?;
        let mut rgb = Rgb8::default();
        decode_rgb8(&encoded, &mut rgb).map_err(|reason| record_error(path, record, reason))?;
        if (rgb.height, rgb.width) != (IMAGE_SIZE, IMAGE_SIZE) {
            let reason = format!("a {}x{} image, not CIFAR-10's 32x32", rgb.height, rgb.width);
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
