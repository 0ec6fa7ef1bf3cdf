//! Dataset files TF wrote compressed, read as TF reads them with their `compression_type`:
//! TFRecord files written by TensorFlow itself, uncompressed and with each of its compressions
//! (`scripts/tf_fixtures/compressed_tfrecords.py`), give the same records; shards compressed
//! here give the pipeline and a `RecordDataset` the same examples as uncompressed ones; cut
//! short, they read as tf.data reads them.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use burn::data::dataset::Dataset;
use flate2::write::{GzEncoder, ZlibEncoder};
use towers_data::inception::{self, BuiltinShards, BuiltinShardsConfig, TfExampleFormat};
use towers_data::tfrecord::{self, record_data};
use towers_data::transforms::InceptionEval;
use towers_data::{
    Compression, HostBatch, IndexedFile, Pipeline, PipelineConfig, RecordDataset, RecordFormat,
};
use towers_testing::{assert_error_names, report};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/tf_compressed")
        .join(name)
}

/// The records TF wrote into every fixture.
fn tfs_records() -> Vec<Vec<u8>> {
    let third = b"the third, a little longer ".repeat(4);
    vec![b"first record".to_vec(), Vec::new(), third]
}

/// The TFRecords of `path`, read from wherever `IndexedFile` points.
fn records(indexed: &IndexedFile, path: &Path) -> Vec<Vec<u8>> {
    let mut reader = indexed.source.open().unwrap();
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(reader.file(), &mut bytes).unwrap();
    let span = |(i, s): (usize, &towers_data::RecordSpan)| {
        record_data(path, i, &bytes[s.offset as usize..][..s.len])
            .unwrap()
            .to_vec()
    };
    indexed.spans.iter().enumerate().map(span).collect()
}

/// TFRecord framing with raw records, for the files TF wrote.
struct RawRecords;

impl RecordFormat for RawRecords {
    fn index(&self, path: &Path) -> towers_data::Result<Vec<towers_data::RecordSpan>> {
        tfrecord::index(path)
    }

    fn index_partial(&self, path: &Path) -> towers_data::Result<towers_data::PartialIndex> {
        tfrecord::index_partial(path)
    }

    fn decode(&self, _: &Path, _: usize, _: &[u8]) -> towers_data::Result<towers_data::Example> {
        unreachable!("only indexed")
    }
}

fn compress(bytes: &[u8], compression: Compression) -> Vec<u8> {
    let level = flate2::Compression::default();
    match compression {
        Compression::Gzip => {
            let mut encoder = GzEncoder::new(Vec::new(), level);
            encoder.write_all(bytes).unwrap();
            encoder.finish().unwrap()
        }
        _ => {
            let mut encoder = ZlibEncoder::new(Vec::new(), level);
            encoder.write_all(bytes).unwrap();
            encoder.finish().unwrap()
        }
    }
}

#[test]
fn tfs_uncompressed_file_reads_record_for_record() {
    let path = fixture("none.tfrecord");
    let indexed = IndexedFile::open(&RawRecords, &path).unwrap();
    assert_eq!(indexed.source.compression(), None);
    assert_eq!(records(&indexed, &path), tfs_records());
}

#[test]
fn tfs_compressed_files_read_record_for_record() {
    for (name, kind) in [("gzip.tfrecord", "GZIP"), ("zlib.tfrecord", "ZLIB")] {
        let path = fixture(name);
        let indexed = IndexedFile::open(&RawRecords, &path).unwrap();
        let compression = indexed.source.compression().map(Compression::name);
        assert_eq!(compression, Some(kind));
        assert_eq!(records(&indexed, &path), tfs_records(), "{name}");
        // The framing alone, as a direct caller of `tfrecord::index` meets it.
        let msg = report(&tfrecord::index(&path).unwrap_err());
        let compressed = format!("{kind}-compressed");
        assert_error_names(&msg, &[name, "record 0", &compressed, "IndexedFile"]);
    }
}

/// A GZIP file of several members (`cat a.gz b.gz`) is read whole, as `gunzip` reads it.
#[test]
fn a_gzip_file_of_several_members_is_read_whole() {
    let plain = std::fs::read(fixture("none.tfrecord")).unwrap();
    let first_record = 12 + 12 + 4;
    let members = [&plain[..first_record], &plain[first_record..]]
        .map(|part| compress(part, Compression::Gzip))
        .concat();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("members.tfrecord.gz");
    std::fs::write(&path, members).unwrap();
    let indexed = IndexedFile::open(&RawRecords, &path).unwrap();
    assert_eq!(records(&indexed, &path), tfs_records());
}

/// An uncompressed file whose first length CRC is broken is not taken for a compressed one.
#[test]
fn a_broken_first_header_is_not_called_compressed() {
    let mut bytes = std::fs::read(fixture("none.tfrecord")).unwrap();
    bytes[8] ^= 0xff;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.tfrecord");
    std::fs::write(&path, bytes).unwrap();
    let msg = report(&IndexedFile::open(&RawRecords, &path).unwrap_err());
    assert_error_names(
        &msg,
        &["broken.tfrecord", "record 0", "not a TFRecord file"],
    );
    assert!(!msg.contains("compressed"), "{msg}");
}

/// TF's compressed files cut at every length from nothing to whole, read as tf.data 2.21
/// reads them told their compression (`cuts.tsv`, written by TF reading each cut): the records
/// decompressed before the cut; then, where the cut splits a record, an error naming the file,
/// its compression and the cut (where corrupt records are skipped: the break, after the same
/// records), and where it falls between records, none.
#[test]
fn compressed_data_cut_anywhere_reads_as_tf_data_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let cuts = std::fs::read_to_string(fixture("cuts.tsv")).unwrap();
    assert_eq!(cuts.lines().count(), 97 + 85, "every cut of both files");
    for line in cuts.lines() {
        let fields: Vec<&str> = line.split('\t').collect();
        let [name, kept, read, error] = fields[..] else {
            panic!("cuts.tsv: {line:?}")
        };
        let (kept, read): (usize, usize) = (kept.parse().unwrap(), read.parse().unwrap());
        let tf_raised = error == "1";
        let bytes = std::fs::read(fixture(name)).unwrap();
        let path = dir.path().join(format!("cut-{kept}-{name}"));
        std::fs::write(&path, &bytes[..kept]).unwrap();
        let file = path.file_name().unwrap().to_str().unwrap();

        let partial = IndexedFile::open_partial(&RawRecords, &path).unwrap();
        assert_eq!(records(&partial, &path), tfs_records()[..read], "{file}");
        assert_eq!(
            partial.broken.is_some(),
            tf_raised,
            "{file}: {:?}",
            partial.broken
        );
        match IndexedFile::open(&RawRecords, &path) {
            Ok(whole) => {
                assert!(!tf_raised, "{file}: tf.data raised after {read} records");
                assert_eq!(records(&whole, &path), tfs_records()[..read], "{file}");
            }
            Err(error) => {
                assert!(tf_raised, "{file}: tf.data read {read} records: {error}");
                let kind = &name[..4].to_uppercase();
                assert_error_names(&report(&error), &[file, kind, "cut short", "truncated"]);
            }
        }
    }
}

/// TF's compressed files with a checksum that fails (GZIP's CRC-32, ZLIB's Adler-32, their
/// last bytes), which tf.data refuses: an error naming the file, the compression and the
/// corruption; where corrupt records are skipped, the records decompressed before it (none
/// where the decoder hands over nothing before its error, as `flate2` for ZLIB here) and the
/// break.
#[test]
fn compressed_data_with_a_failing_checksum_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    for (name, checksum_at) in [("gzip.tfrecord", 8), ("zlib.tfrecord", 4)] {
        let mut bytes = std::fs::read(fixture(name)).unwrap();
        let at = bytes.len() - checksum_at;
        bytes[at] ^= 1;
        let path = dir.path().join(name);
        std::fs::write(&path, &bytes).unwrap();
        let kind = &name[..4].to_uppercase();
        let msg = report(&IndexedFile::open(&RawRecords, &path).unwrap_err());
        assert_error_names(&msg, &[name, kind, "data, corrupt after"]);

        let partial = IndexedFile::open_partial(&RawRecords, &path).unwrap();
        let kept = records(&partial, &path);
        assert_eq!(kept, tfs_records()[..kept.len()], "{name}: a prefix");
        let broken = report(partial.broken.as_ref().expect("the corruption"));
        assert_error_names(&broken, &[name, kind, "corrupt"]);
    }
}

/// Builtin Inception shards, each also written compressed (GZIP and ZLIB by turns) into a
/// folder of its own.
fn shards_and_compressed_copies() -> (BuiltinShards, tempfile::TempDir, Vec<PathBuf>) {
    let config = BuiltinShardsConfig::new(4, 24)
        .with_train_shards(5)
        .with_per_shard(3)
        .with_seed(5);
    let shards = BuiltinShards::create(config).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let compressed = inception::train_files(shards.dir())
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, plain)| {
            let kind = [Compression::Gzip, Compression::Zlib][i % 2];
            let bytes = compress(&std::fs::read(plain).unwrap(), kind);
            let path = dir.path().join(plain.file_name().unwrap());
            std::fs::write(&path, bytes).unwrap();
            path
        })
        .collect();
    (shards, dir, compressed)
}

/// Two epochs over five compressed shards: the same batches as over the shards themselves,
/// although the pipeline lets the copies of the first shards go before the second epoch and
/// makes them again.
#[test]
fn the_pipeline_reads_compressed_shards_as_the_uncompressed_ones() {
    let (shards, _dir, compressed) = shards_and_compressed_copies();
    let run = |files: Vec<PathBuf>| -> Vec<HostBatch> {
        let config = PipelineConfig::eval(4)
            .with_num_epochs(Some(2))
            .with_reader_threads(2)
            .with_read_chunk(2);
        let format = Arc::new(TfExampleFormat::new(5));
        let transform = Arc::new(InceptionEval::new(12));
        let pipeline = Pipeline::start(config, format, files, transform).unwrap();
        pipeline.collect::<towers_data::Result<_>>().unwrap()
    };
    let plain = run(inception::train_files(shards.dir()).unwrap());
    assert_eq!(plain.iter().map(HostBatch::len).sum::<usize>(), 30);
    assert_eq!(run(compressed), plain);
}

#[test]
fn a_record_dataset_reads_compressed_shards_as_the_uncompressed_ones() {
    let (shards, _dir, compressed) = shards_and_compressed_copies();
    let open = |files| RecordDataset::open(Arc::new(TfExampleFormat::new(5)), files).unwrap();
    let plain = open(inception::train_files(shards.dir()).unwrap());
    let compressed = open(compressed);
    assert_eq!(compressed.len(), 15);
    for i in (0..15).rev() {
        let (got, want) = (compressed.try_get(i).unwrap(), plain.try_get(i).unwrap());
        assert_eq!(got, want, "record {i}");
    }
}
