//! CIFAR-10 in its binary layout (`cifar-10-batches-bin`): files of 3073-byte records, each one
//! label byte then the 32x32 image as three planes (R, G, B) of 1024 bytes.

use std::path::{Path, PathBuf};

use rand::SeedableRng;

use crate::bounding_box::BoundingBox;
use crate::error::{Error, Result};
use crate::format::synthetic::{BuiltinDir, ClassLook, synthetic_image};
use crate::format::{Example, PartialIndex, RecordFormat, RecordSpan, record_error};
use crate::image::Image;
use crate::rng::Rng;

/// Side of a CIFAR-10 image.
pub const IMAGE_SIZE: usize = 32;
/// Classes in CIFAR-10.
pub const NUM_CLASSES: usize = 10;
/// Bytes in one record: the label byte and 3 planes of 32x32.
pub const RECORD_BYTES: usize = 1 + 3 * IMAGE_SIZE * IMAGE_SIZE;
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

/// Reads CIFAR-10 binary records; images come out 32x32x3 with values 0..=255.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cifar10Format;

impl RecordFormat for Cifar10Format {
    fn index(&self, path: &Path) -> Result<Vec<RecordSpan>> {
        let size = file_size(path)?;
        let record = RECORD_BYTES as u64;
        if size == 0 {
            // tf.data's FixedLengthRecordDataset reads it as no record; a CIFAR-10 file that
            // holds none is a download or copy that failed, worth a word.
            return Err(Error::File {
                path: path.to_path_buf(),
                reason: format!(
                    "empty: a CIFAR-10 file holds {RECORD_BYTES}-byte records (10,000 of them)"
                ),
            });
        }
        if size % record != 0 {
            return Err(Error::File {
                path: path.to_path_buf(),
                reason: format!(
                    "size {size} bytes is not a whole number of {RECORD_BYTES}-byte CIFAR-10 \
                     records (truncated after record {}?)",
                    size / record
                ),
            });
        }
        Ok(spans(size / record))
    }

    /// A file cut short keeps its whole records; the partial one is the break.
    fn index_partial(&self, path: &Path) -> Result<PartialIndex> {
        let size = file_size(path)?;
        let whole = size / RECORD_BYTES as u64;
        let broken = (size % RECORD_BYTES as u64 != 0).then(|| {
            let reason = format!(
                "truncated: the file ends {} bytes into this {RECORD_BYTES}-byte record",
                size % RECORD_BYTES as u64
            );
            record_error(path, whole as usize, reason)
        });
        if whole == 0 && broken.is_none() {
            return self.index(path).map(|spans| PartialIndex { spans, broken });
        }
        Ok(PartialIndex {
            spans: spans(whole),
            broken,
        })
    }

    fn decode(&self, path: &Path, record: usize, bytes: &[u8]) -> Result<Example> {
        let bad = |reason: String| record_error(path, record, reason);
        if bytes.len() != RECORD_BYTES {
            return Err(bad(format!(
                "{} bytes, expected {RECORD_BYTES}",
                bytes.len()
            )));
        }
        let label = bytes[0];
        if label as usize >= NUM_CLASSES {
            return Err(bad(format!("label {label} out of range 0..{NUM_CLASSES}")));
        }
        let planes: Vec<f32> = bytes[1..].iter().map(|&b| b as f32).collect();
        Ok(Example {
            image: Image::from_chw(&planes, 3, IMAGE_SIZE, IMAGE_SIZE),
            label: label as i64,
            boxes: Vec::new(),
        })
    }
}

fn file_size(path: &Path) -> Result<u64> {
    std::fs::metadata(path)
        .map(|m| m.len())
        .map_err(Error::io_at(path))
}

/// The spans of `count` whole records.
fn spans(count: u64) -> Vec<RecordSpan> {
    let record = RECORD_BYTES as u64;
    (0..count)
        .map(|i| RecordSpan {
            offset: i * record,
            len: RECORD_BYTES,
        })
        .collect()
}

/// The five training files of `dir` (a `cifar-10-batches-bin` folder), checked to exist.
pub fn train_files(dir: &Path) -> Result<Vec<PathBuf>> {
    existing_files(dir, &TRAIN_FILES)
}

/// The test file of `dir`, checked to exist.
pub fn test_files(dir: &Path) -> Result<Vec<PathBuf>> {
    existing_files(dir, &[TEST_FILE])
}

fn existing_files(dir: &Path, names: &[&str]) -> Result<Vec<PathBuf>> {
    if !dir.is_dir() {
        return Err(Error::File {
            path: dir.to_path_buf(),
            reason: "no such directory (expected the cifar-10-batches-bin folder)".into(),
        });
    }
    names
        .iter()
        .map(|name| {
            let path = dir.join(name);
            if path.is_file() {
                Ok(path)
            } else {
                Err(Error::File {
                    path,
                    reason: "missing: not the cifar-10-batches-bin layout".into(),
                })
            }
        })
        .collect()
}

/// Encodes one record: the label byte, then the image's R, G and B planes.
///
/// # Panics
/// If `image` is not 32x32x3 or `label` is not a byte.
pub fn encode_record(image: &Image, label: u8) -> Vec<u8> {
    assert_eq!(
        image.shape(),
        [IMAGE_SIZE, IMAGE_SIZE, 3],
        "CIFAR-10 images are 32x32x3"
    );
    let mut out = Vec::with_capacity(RECORD_BYTES);
    out.push(label);
    out.extend(
        image
            .clone()
            .into_chw()
            .iter()
            .map(|v| v.round().clamp(0.0, 255.0) as u8),
    );
    out
}

fn scale(mut image: Image, factor: f32) -> Image {
    image.data_mut().iter_mut().for_each(|v| *v *= factor);
    image
}

/// Writes a synthetic dataset in the CIFAR-10 binary layout into `dir`: the five training
/// files with `train_per_file` records each and `test_batch.bin` with `test` records, classes
/// in turn. Same `seed`, same bytes.
pub fn write_synthetic(dir: &Path, train_per_file: usize, test: usize, seed: u64) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(Error::io_at(dir))?;
    let mut rng = Rng::seed_from_u64(seed);
    let counts = TRAIN_FILES
        .iter()
        .map(|n| (*n, train_per_file))
        .chain([(TEST_FILE, test)]);
    for (name, count) in counts {
        let bytes: Vec<u8> = (0..count)
            .flat_map(|i| {
                let label = i % NUM_CLASSES;
                let image = synthetic_image(
                    ClassLook::spread(label, NUM_CLASSES),
                    IMAGE_SIZE,
                    IMAGE_SIZE,
                    BoundingBox::WHOLE,
                    &mut rng,
                );
                encode_record(&scale(image, 255.0), label as u8)
            })
            .collect();
        let path = dir.join(name);
        std::fs::write(&path, bytes).map_err(|error| Error::Io { path, error })?;
    }
    Ok(())
}

/// A synthetic CIFAR-10 dataset in a temporary directory, deleted on drop (and by a second
/// Ctrl-C's exit): the built-in data of the examples and tests, read back through the real
/// reader.
#[derive(Debug)]
pub struct BuiltinCifar10 {
    dir: BuiltinDir,
}

impl BuiltinCifar10 {
    /// Writes `train_per_file` records into each training file and `test` into the test file.
    pub fn create(train_per_file: usize, test: usize, seed: u64) -> Result<Self> {
        let dir = BuiltinDir::create("towers-cifar10-")?;
        write_synthetic(dir.path(), train_per_file, test, seed)?;
        Ok(Self { dir })
    }

    /// The `cifar-10-batches-bin`-style folder.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

#[cfg(test)]
mod tests {
    use towers_testing::{assert_error_names, report};

    use super::*;

    /// A hand-built record: label 7, R plane all 1, G plane 2, B plane counting 0..=255.
    fn hand_record() -> Vec<u8> {
        let mut r = vec![7u8];
        r.extend(std::iter::repeat_n(1u8, 1024));
        r.extend(std::iter::repeat_n(2u8, 1024));
        r.extend((0..1024).map(|i| (i % 256) as u8));
        r
    }

    #[test]
    fn decodes_a_hand_built_record() {
        let ex = Cifar10Format
            .decode(Path::new("x.bin"), 0, &hand_record())
            .unwrap();
        assert_eq!(ex.label, 7);
        assert_eq!(ex.image.shape(), [32, 32, 3]);
        // Pixel (row 1, col 3) is plane index 35.
        assert_eq!(
            [
                ex.image.get(1, 3, 0),
                ex.image.get(1, 3, 1),
                ex.image.get(1, 3, 2)
            ],
            [1.0, 2.0, 35.0]
        );
    }

    #[test]
    fn encode_is_the_inverse_of_decode() {
        let rec = hand_record();
        let ex = Cifar10Format.decode(Path::new("x.bin"), 0, &rec).unwrap();
        assert_eq!(encode_record(&ex.image, ex.label as u8), rec);
    }

    #[test]
    fn label_out_of_range_names_file_and_record() {
        let mut rec = hand_record();
        rec[0] = 10;
        let err = Cifar10Format
            .decode(Path::new("data_batch_2.bin"), 41, &rec)
            .unwrap_err();
        let msg = report(&err);
        assert_error_names(&msg, &["data_batch_2.bin", "record 41", "label 10"]);
    }

    #[test]
    fn truncated_file_is_rejected_with_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data_batch_1.bin");
        let mut bytes = hand_record();
        bytes.extend(&hand_record()[..100]);
        std::fs::write(&path, bytes).unwrap();
        let msg = report(&Cifar10Format.index(&path).unwrap_err());
        assert_error_names(&msg, &["data_batch_1.bin", "after record 1"]);
    }

    #[test]
    fn an_empty_file_is_said_to_be_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data_batch_1.bin");
        std::fs::write(&path, b"").unwrap();
        let msg = Cifar10Format.index(&path).unwrap_err().to_string();
        assert!(
            msg.contains("data_batch_1.bin") && msg.contains("empty"),
            "{msg}"
        );
        assert!(!msg.contains("truncated"), "{msg}");
    }

    #[test]
    fn index_lists_every_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.bin");
        std::fs::write(
            &path,
            [hand_record(), hand_record(), hand_record()].concat(),
        )
        .unwrap();
        let spans = Cifar10Format.index(&path).unwrap();
        assert_eq!(spans.len(), 3);
        assert_eq!(
            spans[2],
            RecordSpan {
                offset: 2 * RECORD_BYTES as u64,
                len: RECORD_BYTES
            }
        );
    }

    #[test]
    fn missing_directory_and_files_are_named() {
        let msg = train_files(Path::new("/no/such/cifar"))
            .unwrap_err()
            .to_string();
        assert_error_names(&msg, &["/no/such/cifar", "no such directory"]);
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("data_batch_1.bin"), hand_record()).unwrap();
        let msg = report(&train_files(dir.path()).unwrap_err());
        assert_error_names(&msg, &["data_batch_2.bin", "missing"]);
    }

    #[test]
    fn synthetic_dataset_is_reproducible_and_labelled_in_turn() {
        let a = BuiltinCifar10::create(20, 10, 5).unwrap();
        let b = BuiltinCifar10::create(20, 10, 5).unwrap();
        let files = train_files(a.dir()).unwrap();
        assert_eq!(files.len(), 5);
        let bytes = std::fs::read(&files[0]).unwrap();
        assert_eq!(bytes, std::fs::read(b.dir().join(TRAIN_FILES[0])).unwrap());
        assert_eq!(bytes.len(), 20 * RECORD_BYTES);
        let labels: Vec<u8> = bytes.chunks(RECORD_BYTES).map(|r| r[0]).collect();
        assert_eq!(&labels[..12], &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1]);
        assert_eq!(
            std::fs::metadata(test_files(a.dir()).unwrap()[0].clone())
                .unwrap()
                .len(),
            10 * RECORD_BYTES as u64
        );
    }
}
