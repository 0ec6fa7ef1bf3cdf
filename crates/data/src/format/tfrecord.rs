//! TFRecord files: the framing of TF's record shards.
//!
//! Each record is `u64 length | u32 masked CRC32C of the length bytes | data | u32 masked
//! CRC32C of the data`, all little-endian. [`index`] walks a file's headers (checking the
//! length CRCs) without reading the data; [`record_data`] checks a record's data CRC when it
//! is read. [`TfRecordWriter`] writes the same framing.
//!
//! CRC32C comes from the `crc32c` crate (hardware-accelerated). No TFRecord crate is used:
//! the ones on crates.io bring a TensorFlow-sized dependency tree for a 20-line framing.

use std::fs::File;
use std::io::{BufReader, ErrorKind, Read, Seek, Write};
use std::path::Path;

use towers_multigpu::eprint_line;

use crate::error::{Error, Result};
use crate::format::compressed::shown_name;
use crate::format::memory_room::{Memory, grow_within_memory};
use crate::format::{Compression, PartialIndex, RecordSpan, record_error};

/// TF's CRC mask: rotate right by 15 bits and add a constant, so that a CRC of data that
/// itself contains CRCs stays well distributed.
pub fn masked_crc(bytes: &[u8]) -> u32 {
    let crc = crc32c::crc32c(bytes);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// Bytes of framing before the data.
const HEADER: usize = 12;
/// Bytes of framing after the data.
const FOOTER: usize = 4;

/// The spans of every record of the TFRecord file `path`. Each span covers the data and its
/// CRC footer. A bad length CRC or a record running past the end of the file is an error
/// naming the file, the record and its offset.
pub fn index(path: &Path) -> Result<Vec<RecordSpan>> {
    complete(index_partial(path)?)
}

/// [`index`], keeping the records before a framing error (see [`PartialIndex`]); only an I/O
/// error, or an index that would take more memory than there is (`memory_room.rs`), is an
/// `Err`.
pub fn index_partial(path: &Path) -> Result<PartialIndex> {
    let io = Error::io_at(path);
    let file = File::open(path).map_err(&io)?;
    let size = file.metadata().map_err(&io)?.len();
    index_partial_reader(BufReader::new(file), size, path, Memory::now)
}

/// [`index`] of the `size` bytes of `reader`; `path` names them in errors. Memory grows with
/// the records found, never with a length field: a length past the end is an error.
pub fn index_reader(reader: impl Read + Seek, size: u64, path: &Path) -> Result<Vec<RecordSpan>> {
    complete(index_partial_reader(reader, size, path, Memory::now)?)
}

/// The spans, or the framing error.
fn complete(index: PartialIndex) -> Result<Vec<RecordSpan>> {
    match index.broken {
        Some(error) => Err(error),
        None => Ok(index.spans),
    }
}

/// [`index_partial`] of the `size` bytes of `reader`, in the `memory` it reports.
fn index_partial_reader(
    mut reader: impl Read + Seek,
    size: u64,
    path: &Path,
    memory: impl Fn() -> Option<Memory>,
) -> Result<PartialIndex> {
    let io = Error::io_at(path);
    let mut spans = Vec::new();
    let mut offset = 0u64;
    while offset < size {
        let bad =
            |reason: String| record_error(path, spans.len(), format!("{reason} (offset {offset})"));
        let mut header = [0u8; HEADER];
        match reader.read_exact(&mut header) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => {
                // Too few bytes for a header: tf.data ends the file there without a word and
                // keeps its whole records (TF 2.21, 1 to 11 stray bytes; 12 or more are read as
                // a header, whose CRC then fails). So do we, with a word.
                eprint_line(&format!(
                    "warning: {}: the {} bytes after its last whole record ({} of them) are too \
                     few for a record's header: the file ends there, as tf.data ends it",
                    shown_name(path),
                    size - offset,
                    spans.len()
                ));
                return Ok(PartialIndex {
                    spans,
                    broken: None,
                });
            }
            Err(e) => return Err(io(e)),
        }
        let len_bytes: [u8; 8] = header[..8].try_into().expect("8 bytes");
        let stored = u32::from_le_bytes(header[8..].try_into().expect("4 bytes"));
        if masked_crc(&len_bytes) != stored {
            let broken = bad(bad_length_crc(&header, offset));
            return Ok(PartialIndex {
                spans,
                broken: Some(broken),
            });
        }
        let len = u64::from_le_bytes(len_bytes);
        // Checked: a corrupt length (up to 2^64 - 1) must not wrap around.
        let end = (offset + HEADER as u64)
            .checked_add(len)
            .and_then(|end| end.checked_add(FOOTER as u64))
            .filter(|&end| end <= size);
        let Some(end) = end else {
            let broken = bad(format!(
                "truncated: record of {len} bytes runs past the end of the {size}-byte file"
            ));
            return Ok(PartialIndex {
                spans,
                broken: Some(broken),
            });
        };
        grow_within_memory(&mut spans, &memory)
            .map_err(|reason| record_error(path, spans.len(), reason))?;
        spans.push(RecordSpan {
            offset: offset + HEADER as u64,
            len: len as usize + FOOTER,
        });
        // Relative, so that a `BufReader` keeps its buffer: a file of small records is read a
        // buffer at a time, not a read and a seek per record (`SeekFrom::Start` drops it).
        // At most the file's size: no wrap.
        let data_and_footer = (end - offset - HEADER as u64) as i64;
        reader.seek_relative(data_and_footer).map_err(&io)?;
        offset = end;
    }
    Ok(PartialIndex {
        spans,
        broken: None,
    })
}

/// Why a record's length CRC failed, as far as its header tells: at the start of a file, one of
/// TF's compressed record files (`TFRecordOptions(compression_type=...)`) says so.
fn bad_length_crc(header: &[u8; HEADER], offset: u64) -> String {
    match Compression::of_header(header).filter(|_| offset == 0) {
        Some(compression) => format!(
            "bad length CRC: this is a {kind}-compressed TFRecord file (TF's \
             TFRecordOptions(compression_type=\"{kind}\")): `IndexedFile::open`, and the \
             pipelines and datasets built on it, read it decompressed",
            kind = compression.name()
        ),
        None => "bad length CRC: not a TFRecord file, or corrupt".into(),
    }
}

/// The data of one record, given the bytes of its span (data + CRC footer); a data CRC
/// mismatch is an error naming the file and record.
pub fn record_data<'a>(path: &Path, record: usize, span: &'a [u8]) -> Result<&'a [u8]> {
    let split = span
        .len()
        .checked_sub(FOOTER)
        .ok_or_else(|| record_error(path, record, "record shorter than its CRC"))?;
    let (data, footer) = span.split_at(split);
    let stored = u32::from_le_bytes(footer.try_into().expect("4 bytes"));
    if masked_crc(data) != stored {
        return Err(record_error(
            path,
            record,
            "bad data CRC: the record is corrupt",
        ));
    }
    Ok(data)
}

/// Writes records in TFRecord framing.
#[derive(Debug)]
pub struct TfRecordWriter<W: Write> {
    out: W,
}

impl<W: Write> TfRecordWriter<W> {
    /// A writer appending to `out`.
    pub fn new(out: W) -> Self {
        Self { out }
    }

    /// Appends one record.
    pub fn write(&mut self, data: &[u8]) -> std::io::Result<()> {
        let len = (data.len() as u64).to_le_bytes();
        self.out.write_all(&len)?;
        self.out.write_all(&masked_crc(&len).to_le_bytes())?;
        self.out.write_all(data)?;
        self.out.write_all(&masked_crc(data).to_le_bytes())
    }

    /// Flushes and returns the inner writer.
    pub fn into_inner(mut self) -> std::io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use towers_testing::{assert_error_names, report};

    use super::*;
    use crate::format::memory_room::reporting;

    #[test]
    fn masked_crc_matches_tensorflow() {
        // Known values: TF's crc32c::Mask(crc32c::Value("", 0)) and of the 8 zero bytes
        // that frame an empty record's length (from TF's own record writer).
        assert_eq!(
            crc32c::crc32c(b"123456789"),
            0xe306_9283,
            "CRC32C check value"
        );
        assert_eq!(masked_crc(b""), 0xa282_ead8);
        let zero_len = masked_crc(&0u64.to_le_bytes());
        assert_eq!(
            zero_len,
            (crc32c::crc32c(&[0; 8]).rotate_right(15)).wrapping_add(0xa282_ead8)
        );
    }

    /// A hand-built record: the framing assembled field by field, not by the writer.
    fn hand_framed(data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let len = (data.len() as u64).to_le_bytes();
        out.extend_from_slice(&len);
        let crc = crc32c::crc32c(&len);
        out.extend_from_slice(&(crc.rotate_right(15).wrapping_add(0xa282_ead8)).to_le_bytes());
        out.extend_from_slice(data);
        let crc = crc32c::crc32c(data);
        out.extend_from_slice(&(crc.rotate_right(15).wrapping_add(0xa282_ead8)).to_le_bytes());
        out
    }

    fn write_file(bytes: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("train-00000-of-00001");
        std::fs::write(&path, bytes).unwrap();
        (dir, path)
    }

    #[test]
    fn writer_produces_the_hand_built_framing_and_index_finds_it() {
        let mut w = TfRecordWriter::new(Vec::new());
        w.write(b"hello").unwrap();
        w.write(b"").unwrap();
        let bytes = w.into_inner().unwrap();
        assert_eq!(bytes, [hand_framed(b"hello"), hand_framed(b"")].concat());
        let (_dir, path) = write_file(&bytes);
        let spans = index(&path).unwrap();
        assert_eq!(
            spans,
            vec![
                RecordSpan { offset: 12, len: 9 },
                RecordSpan { offset: 33, len: 4 }
            ]
        );
        let first = &bytes[12..21];
        assert_eq!(record_data(&path, 0, first).unwrap(), b"hello");
    }

    #[test]
    fn bad_data_crc_names_file_and_record() {
        let mut bytes = [hand_framed(b"first"), hand_framed(b"second")].concat();
        let (_dir, path) = write_file(&bytes);
        let spans = index(&path).unwrap();
        bytes[spans[1].offset as usize] ^= 1;
        let span = &bytes[spans[1].offset as usize..][..spans[1].len];
        let msg = report(&record_data(&path, 1, span).unwrap_err());
        assert_error_names(&msg, &["train-00000-of-00001", "record 1", "data CRC"]);
    }

    #[test]
    fn bad_length_crc_and_truncation_are_caught_by_index() {
        let mut bytes = [hand_framed(b"first"), hand_framed(b"second")].concat();
        bytes[21 + 8] ^= 0xff; // second record's length CRC
        let (_dir, path) = write_file(&bytes);
        let msg = report(&index(&path).unwrap_err());
        assert_error_names(&msg, &["record 1", "length CRC", "offset 21"]);

        let bytes = [hand_framed(b"first"), hand_framed(b"second")].concat();
        let (_dir, path) = write_file(&bytes[..bytes.len() - 3]);
        let msg = report(&index(&path).unwrap_err());
        assert_error_names(&msg, &["record 1", "truncated"]);
    }

    /// 1 to 11 bytes after the last whole record, too few for a header: tf.data 2.21 reads the
    /// whole records and ends the file there, without an error (12 stray bytes it reads as a
    /// header and fails on: `DataLossError: corrupted record`).
    #[test]
    fn stray_bytes_too_few_for_a_header_end_the_file_as_tf_data_ends_it() {
        let bytes = [hand_framed(b"first"), hand_framed(b"second")].concat();
        for stray in [1, 5, 11] {
            let (_dir, path) = write_file(&[&bytes[..], &vec![0u8; stray]].concat());
            assert_eq!(index(&path).unwrap().len(), 2, "{stray} stray bytes");
        }
        let (_dir, path) = write_file(&[&bytes[..], &[0u8; 12]].concat());
        assert!(report(&index(&path).unwrap_err()).contains("record 2"));
        // A second record cut within its header: its 2 bytes are stray bytes too.
        let (_dir, path) = write_file(&bytes[..bytes.len() - 20]);
        assert_eq!(index(&path).unwrap().len(), 1);
    }

    /// A length of 2^60 (and 2^64 - 1) with a valid length CRC: an error naming the record,
    /// neither an overflow nor an allocation of that size.
    #[test]
    fn a_huge_length_is_an_error_not_an_allocation() {
        for len in [1u64 << 60, u64::MAX] {
            let mut bytes = hand_framed(b"fine");
            let len = len.to_le_bytes();
            bytes.extend_from_slice(&len);
            bytes.extend_from_slice(&masked_crc(&len).to_le_bytes());
            bytes.extend_from_slice(b"some data");
            let error = index_reader(
                std::io::Cursor::new(&bytes),
                bytes.len() as u64,
                "f".as_ref(),
            )
            .unwrap_err();
            let msg = report(&error);
            assert_error_names(&msg, &["record 1", "runs past the end"]);
        }
    }

    /// A file of empty records (16 bytes each, as much as their spans take) indexes in the
    /// memory there is, and stops with an error naming the file and the record where the index
    /// would take more than half of what is left.
    #[test]
    fn an_index_stops_before_it_takes_the_memory_left() {
        let records = 5000;
        let bytes = hand_framed(b"").repeat(records);
        let size = bytes.len() as u64;
        let reader = || std::io::Cursor::new(&bytes);
        // Growth from 4096 to 8192 spans takes 64 KiB; with 128 KiB free it fits.
        let path = "tiny-records".as_ref();
        let index = index_partial_reader(reader(), size, path, reporting(128 << 10)).unwrap();
        assert_eq!(index.spans.len(), records);
        assert_eq!(
            index.spans[records - 1],
            RecordSpan {
                offset: 16 * 4999 + 12,
                len: 4
            }
        );
        let error =
            index_partial_reader(reader(), size, path, reporting((128 << 10) - 1)).unwrap_err();
        let msg = report(&error);
        assert_error_names(
            &msg,
            &[
                "tiny-records",
                "record 4096",
                "index of 4096 records",
                "memory available",
            ],
        );
    }
}
