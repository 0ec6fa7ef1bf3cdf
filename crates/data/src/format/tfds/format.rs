//! [`TfdsImageFormat`]: the records of a TFDS dataset of images, as `tfds.load(...,
//! as_supervised=True)` yields them: an image and its class.

use std::path::Path;

use crate::error::Result;
use crate::format::record_error;
use crate::format::record_format::{EncodedRecord, checked_label, tfrecord_of_encoded_images};
use crate::format::tf_example::ExampleFeatures;
use crate::format::tfrecord;

/// Reads the TFRecord shards TFDS prepares: each record a `tf.train.Example` with an encoded
/// image (PNG or JPEG, recognized by content) under one key and its class under another.
/// Images come out RGB in [0, 1], greyscale ones as three equal channels (TF's `channels=3`).
/// Usually made by [`TfdsDataset::image_format`](super::TfdsDataset::image_format).
#[derive(Debug, Clone)]
pub struct TfdsImageFormat {
    image_key: String,
    label_key: String,
    num_classes: usize,
    label_offset: i64,
}

impl TfdsImageFormat {
    /// Images under `image_key`, labels under `label_key`, which must fall in
    /// `0..num_classes`.
    pub fn new(image_key: &str, label_key: &str, num_classes: usize) -> Self {
        Self {
            image_key: image_key.to_string(),
            label_key: label_key.to_string(),
            num_classes,
            label_offset: 0,
        }
    }

    /// Adds `offset` to every stored label before the range check: `1` maps TFDS's ImageNet
    /// labels `0..1000` to TF's `1..=1000`, for a model with TF's background class (1001
    /// outputs).
    pub fn with_label_offset(self, offset: i64) -> Self {
        Self {
            label_offset: offset,
            ..self
        }
    }

    /// The classes a label may be: `0..num_classes`.
    pub fn num_classes(&self) -> usize {
        self.num_classes
    }

    /// The encoded image and the checked class of record `record` of `path`.
    pub(crate) fn parse(&self, path: &Path, record: usize, bytes: &[u8]) -> Result<(Vec<u8>, i64)> {
        let bad = |reason| record_error(path, record, reason);
        let data = tfrecord::record_data(path, record, bytes)?;
        let features = ExampleFeatures::parse(data).map_err(bad)?;
        let image = features.required(&self.image_key, ExampleFeatures::bytes);
        let stored = features.required(&self.label_key, ExampleFeatures::int);
        let (image, stored) = (image.map_err(bad)?, stored.map_err(bad)?);
        let label = checked_label(path, record, stored, self.label_offset, self.num_classes)?;
        Ok((image, label))
    }

    fn encoded_record(&self, path: &Path, record: usize, bytes: &[u8]) -> Result<EncodedRecord> {
        let (encoded, label) = self.parse(path, record, bytes)?;
        Ok(EncodedRecord {
            encoded,
            label,
            boxes: Vec::new(),
        })
    }
}

tfrecord_of_encoded_images!(TfdsImageFormat);
