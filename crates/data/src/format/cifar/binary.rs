//! CIFAR's binary layouts (`cifar-10-batches-bin`, `cifar-100-binary`): files of fixed-size
//! records, each its label bytes (CIFAR-10: one; CIFAR-100: the coarse then the fine) then the
//! 32x32 image as three planes (R, G, B) of 1024 bytes.

use std::io::Read;
use std::path::Path;

use super::{Cifar, Cifar100Labels, example};
use crate::error::{Error, Result};
use crate::format::{Example, PartialIndex, RecordFormat, RecordSpan, record_error};

/// Reads CIFAR-10 binary records; images come out 32x32x3 with values 0..=255.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cifar10Format;

/// Reads CIFAR-100 binary records (3074 bytes), taking their fine or coarse labels; images as
/// [`Cifar10Format`]'s.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cifar100Format {
    labels: Cifar100Labels,
}

impl Cifar100Format {
    /// Records read with their `labels`.
    pub fn new(labels: Cifar100Labels) -> Self {
        Self { labels }
    }
}

impl Cifar10Format {
    fn records(&self) -> Records {
        Records(Cifar::Ten)
    }
}

impl Cifar100Format {
    fn records(&self) -> Records {
        Records(Cifar::Hundred(self.labels))
    }
}

record_format_by!(Cifar10Format, records);
record_format_by!(Cifar100Format, records);

/// The binary records of a CIFAR dataset: the reader both formats are.
struct Records(Cifar);

impl RecordFormat for Records {
    fn index(&self, path: &Path) -> Result<Vec<RecordSpan>> {
        index(self.0, path)
    }

    fn index_partial(&self, path: &Path) -> Result<PartialIndex> {
        index_partial(self.0, path)
    }

    fn decode(&self, path: &Path, record: usize, bytes: &[u8]) -> Result<Example> {
        decode(self.0, path, record, bytes)
    }
}

/// The spans of every record of `path`, a binary file of `cifar`.
fn index(cifar: Cifar, path: &Path) -> Result<Vec<RecordSpan>> {
    let size = file_size(path)?;
    let record = cifar.record_bytes() as u64;
    let name = cifar.name();
    if size == 0 {
        // tf.data's FixedLengthRecordDataset reads it as no record; a CIFAR file that holds
        // none is a download or copy that failed, worth a word.
        return Err(Error::File {
            path: path.to_path_buf(),
            reason: format!("empty: a {name} file holds {record}-byte records"),
        });
    }
    if size % record != 0 {
        let reason = match starts_as_a_pickle(path)? {
            true => format!(
                "a pickle, not {record}-byte records: {name}'s python layout ({}), which its \
                 python format reads (or its folder's find)",
                cifar.folder_name(super::Layout::Python)
            ),
            false => match other_dataset(cifar) {
                other if size % other.record_bytes() as u64 == 0 => format!(
                    "size {size} bytes is not a whole number of {record}-byte {name} records \
                     but of {}'s {}-byte ones: a {} file?",
                    other.name(),
                    other.record_bytes(),
                    other.name()
                ),
                _ => format!(
                    "size {size} bytes is not a whole number of {record}-byte {name} records \
                     (truncated after record {}?)",
                    size / record
                ),
            },
        };
        return Err(Error::File {
            path: path.to_path_buf(),
            reason,
        });
    }
    Ok(spans(cifar, size / record))
}

/// The dataset whose files a file of `cifar` might be mistaken for.
fn other_dataset(cifar: Cifar) -> Cifar {
    match cifar {
        Cifar::Ten => Cifar::Hundred(Cifar100Labels::Fine),
        Cifar::Hundred(_) => Cifar::Ten,
    }
}

/// A file cut short keeps its whole records; the partial one is the break.
fn index_partial(cifar: Cifar, path: &Path) -> Result<PartialIndex> {
    let size = file_size(path)?;
    let record = cifar.record_bytes() as u64;
    let whole = size / record;
    let broken = (size % record != 0).then(|| {
        let reason = format!(
            "truncated: the file ends {} bytes into this {record}-byte record",
            size % record
        );
        record_error(path, whole as usize, reason)
    });
    if whole == 0 && broken.is_none() {
        return index(cifar, path).map(|spans| PartialIndex { spans, broken });
    }
    Ok(PartialIndex {
        spans: spans(cifar, whole),
        broken,
    })
}

/// Record `record` of `path` of `cifar` from its bytes.
fn decode(cifar: Cifar, path: &Path, record: usize, bytes: &[u8]) -> Result<Example> {
    let expected = cifar.record_bytes();
    if bytes.len() != expected {
        let reason = format!("{} bytes, expected {expected}", bytes.len());
        return Err(record_error(path, record, reason));
    }
    let label = i64::from(bytes[cifar.label_byte()]);
    example(
        cifar,
        path,
        record,
        label,
        &bytes[expected - super::IMAGE_BYTES..],
    )
}

/// Whether `path` starts as a pickle of protocol 2 to 5 does (a binary record starts with its
/// label byte, below 100).
fn starts_as_a_pickle(path: &Path) -> Result<bool> {
    let file = std::fs::File::open(path).map_err(Error::io_at(path))?;
    let mut head = Vec::new();
    file.take(2)
        .read_to_end(&mut head)
        .map_err(Error::io_at(path))?;
    Ok(matches!(head[..], [0x80, 2..=5]))
}

fn file_size(path: &Path) -> Result<u64> {
    std::fs::metadata(path)
        .map(|m| m.len())
        .map_err(Error::io_at(path))
}

/// The spans of `count` whole records of `cifar`.
fn spans(cifar: Cifar, count: u64) -> Vec<RecordSpan> {
    let record = cifar.record_bytes();
    (0..count)
        .map(|i| RecordSpan {
            offset: i * record as u64,
            len: record,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use towers_testing::{assert_error_names, report};

    use super::*;
    use crate::format::cifar::{RECORD_BYTES, encode_record};

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
    fn a_pickle_is_pointed_to_the_python_layout() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data_batch_1.bin");
        std::fs::write(&path, b"\x80\x02}q\x01.").unwrap();
        let msg = report(&Cifar10Format.index(&path).unwrap_err());
        assert_error_names(
            &msg,
            &["data_batch_1.bin", "a pickle", "cifar-10-batches-py"],
        );
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
}
