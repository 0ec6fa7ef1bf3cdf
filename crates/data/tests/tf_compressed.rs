//! TFRecord files written by TensorFlow itself, uncompressed and with each of its compressions
//! (`scripts/tf_fixtures/compressed_tfrecords.py`): the uncompressed one is read record for
//! record; a compressed one, which TF reads only when told its compression, is an error that
//! names the file and the compression and says how to decompress it.

use std::path::PathBuf;

use towers_data::tfrecord::{index, record_data};
use towers_testing::{assert_error_names, report};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/tf_compressed")
        .join(name)
}

#[test]
fn tfs_uncompressed_file_reads_record_for_record() {
    let path = fixture("none.tfrecord");
    let bytes = std::fs::read(&path).unwrap();
    let records: Vec<&[u8]> = index(&path)
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, span)| record_data(&path, i, &bytes[span.offset as usize..][..span.len]).unwrap())
        .collect();
    let third = b"the third, a little longer ".repeat(4);
    assert_eq!(records, [&b"first record"[..], b"", &third]);
}

#[test]
fn a_compressed_file_is_an_error_naming_it_and_its_compression() {
    for (name, kind) in [("gzip.tfrecord", "GZIP"), ("zlib.tfrecord", "ZLIB")] {
        let msg = report(&index(&fixture(name)).unwrap_err());
        let compressed = format!("{kind}-compressed");
        assert_error_names(
            &msg,
            &[name, "record 0", &compressed, "decompress it first"],
        );
    }
}

/// An uncompressed file whose first length CRC is broken is not taken for a compressed one.
#[test]
fn a_broken_first_header_is_not_called_compressed() {
    let mut bytes = std::fs::read(fixture("none.tfrecord")).unwrap();
    bytes[8] ^= 0xff;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.tfrecord");
    std::fs::write(&path, bytes).unwrap();
    let msg = report(&index(&path).unwrap_err());
    assert_error_names(
        &msg,
        &["broken.tfrecord", "record 0", "not a TFRecord file"],
    );
    assert!(!msg.contains("compressed"), "{msg}");
}
