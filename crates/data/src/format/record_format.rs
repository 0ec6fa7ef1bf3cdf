//! [`RecordFormat`]: how a dataset file splits into records and how one record decodes.
//!
//! The pipeline reads any format through this trait: it asks for the spans of a file's
//! records once (checking the file's framing up front), then reader threads fetch and decode
//! single records in parallel.

use std::path::Path;

use crate::bounding_box::BoundingBox;
use crate::error::{Cause, Error, Result};
use crate::image::{Image, Planes};
use crate::rng::Rng;
use crate::transforms::Transform;

/// Where one record lies in its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordSpan {
    /// Byte offset of the record's first byte.
    pub offset: u64,
    /// Bytes to read.
    pub len: usize,
}

/// The records of a file up to where its framing breaks, if it does.
#[derive(Debug)]
pub struct PartialIndex {
    /// The records before the break (all of them when there is none).
    pub spans: Vec<RecordSpan>,
    /// The framing error that ended the walk (the file is cut short or corrupt there), naming
    /// the file and the record.
    pub broken: Option<Error>,
}

/// One decoded example: an image, its class and any object boxes.
#[derive(Debug, Clone, PartialEq)]
pub struct Example {
    /// The decoded image, before any transform.
    pub image: Image,
    /// The class id.
    pub label: i64,
    /// Object boxes (ImageNet's bounding boxes), used by distorted crops; often empty.
    pub boxes: Vec<BoundingBox>,
}

/// A dataset file format.
pub trait RecordFormat: Send + Sync {
    /// The spans of every record of `path`, in file order. A file whose framing is wrong
    /// (truncated, wrong size, bad header) is an error naming the file and, where it applies,
    /// the record.
    fn index(&self, path: &Path) -> Result<Vec<RecordSpan>>;

    /// Like [`index`](Self::index), but a file whose framing breaks keeps the whole records
    /// before the break (a shard cut short keeps what it has), for readers that skip corrupt
    /// records. Formats that cannot tell return `index`'s result.
    fn index_partial(&self, path: &Path) -> Result<PartialIndex> {
        Ok(PartialIndex {
            spans: self.index(path)?,
            broken: None,
        })
    }

    /// Whether a file of this format that begins as GZIP or ZLIB data is read from its
    /// decompressed copy, as TF's readers read files they are told are compressed. `true` but
    /// for formats whose own tools never read compressed files (a pickle's), whose compressed
    /// file is an error, as there.
    fn reads_compressed_files(&self) -> bool {
        true
    }

    /// Decodes record number `record` of `path` from its bytes. Bad content (corrupt image,
    /// label out of range) is an error naming the file and the record.
    fn decode(&self, path: &Path, record: usize, bytes: &[u8]) -> Result<Example>;

    /// Decodes record number `record` of `path` and transforms its image into the network
    /// input, with `rng` as the transform's randomness. The default decodes with
    /// [`decode`](Self::decode) and applies `transform`; formats that store encoded images
    /// hand the bytes to [`Transform::apply_encoded`] instead, so that a transform can decode
    /// and convert only what it keeps.
    fn prepare(
        &self,
        path: &Path,
        record: usize,
        bytes: &[u8],
        transform: &dyn Transform,
        rng: &mut Rng,
    ) -> Result<Prepared> {
        let example = self.decode(path, record, bytes)?;
        let image = transform
            .apply(example.image, &example.boxes, rng)
            .map_err(|reason| record_error(path, record, reason))?;
        Ok(Prepared {
            planes: Planes::from(image),
            label: example.label,
        })
    }
}

/// One example ready for batching: the transformed image and its class id.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// The network input, CHW.
    pub planes: Planes,
    /// The class id.
    pub label: i64,
}

/// What is wrong with record `record` of `path`: `error`, a message or an error value.
pub(crate) fn record_error(path: &Path, record: usize, error: impl Into<Cause>) -> Error {
    Error::Record {
        path: path.to_path_buf(),
        record,
        error: error.into(),
    }
}

/// The class of record `record` of `path`: its `stored` label plus `offset`, which must fall in
/// `0..num_classes` (an error names both the label and the stored one).
pub(crate) fn checked_label(
    path: &Path,
    record: usize,
    stored: i64,
    offset: i64,
    num_classes: usize,
) -> Result<i64> {
    // A stored label near i64's ends would overflow with the offset: out of range too.
    let label = stored.checked_add(offset);
    match label.filter(|l| (0..num_classes as i64).contains(l)) {
        Some(label) => Ok(label),
        None => {
            let shown = stored.saturating_add(offset);
            let reason = match offset {
                0 => format!("label {shown} out of range 0..{num_classes}"),
                _ => format!("label {shown} (stored {stored}) out of range 0..{num_classes}"),
            };
            Err(record_error(path, record, reason))
        }
    }
}

/// One record of a TFRecord file of encoded images: the image's bytes (JPEG, PNG, ...), its
/// class and its object boxes.
pub(crate) struct EncodedRecord {
    pub(crate) encoded: Vec<u8>,
    pub(crate) label: i64,
    pub(crate) boxes: Vec<BoundingBox>,
}

/// `RecordFormat` for a format of TFRecord files of encoded images, by its method
/// `encoded_record(&self, path, record, bytes) -> Result<EncodedRecord>`: TF's shards and TFDS's
/// differ in their Examples' keys only. `prepare` hands the encoded image to the transform
/// undecoded ([`Transform::apply_encoded`]), so that it decodes and converts only what it keeps.
macro_rules! tfrecord_of_encoded_images {
    ($format:ty) => {
        impl crate::format::RecordFormat for $format {
            fn index(&self, path: &std::path::Path) -> Result<Vec<crate::format::RecordSpan>> {
                crate::format::tfrecord::index(path)
            }

            fn index_partial(&self, path: &std::path::Path) -> Result<crate::format::PartialIndex> {
                crate::format::tfrecord::index_partial(path)
            }

            fn decode(
                &self,
                path: &std::path::Path,
                record: usize,
                bytes: &[u8],
            ) -> Result<crate::format::Example> {
                let read = self.encoded_record(path, record, bytes)?;
                let image = crate::codec::decode_image(&read.encoded)
                    .map_err(|reason| crate::format::record_error(path, record, reason))?;
                Ok(crate::format::Example {
                    image,
                    label: read.label,
                    boxes: read.boxes,
                })
            }

            fn prepare(
                &self,
                path: &std::path::Path,
                record: usize,
                bytes: &[u8],
                transform: &dyn crate::transforms::Transform,
                rng: &mut crate::rng::Rng,
            ) -> Result<crate::format::Prepared> {
                let read = self.encoded_record(path, record, bytes)?;
                let planes = transform
                    .apply_encoded(&read.encoded, &read.boxes, rng)
                    .map_err(|reason| crate::format::record_error(path, record, reason))?;
                Ok(crate::format::Prepared {
                    planes,
                    label: read.label,
                })
            }
        }
    };
}
pub(crate) use tfrecord_of_encoded_images;
