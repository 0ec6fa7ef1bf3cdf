//! `CorruptRecords::Skip` (tf.data's `ignore_errors()`): a bad data CRC, a corrupt image and a
//! label out of range are each skipped, the rest arrive in order, and the count says so; past
//! the budget the run stops. The default still stops at the first.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use towers_data::cifar10::{self, Cifar10Format};
use towers_data::codec::encode_png;
use towers_data::inception::TfExampleFormat;
use towers_data::tf_example::ImageRecord;
use towers_data::tfrecord::TfRecordWriter;
use towers_data::transforms::Identity;
use towers_data::{
    CorruptRecords, Error, HostBatch, Image, Pipeline, PipelineConfig, RecordCount, RecordFormat,
};
use towers_testing::{assert_error_names, report};

/// Every label of a one-epoch, in-order run, or its error.
fn labels(
    format: impl RecordFormat + 'static,
    files: Vec<PathBuf>,
    corrupt_records: CorruptRecords,
) -> (towers_data::Result<Vec<i64>>, RecordCount) {
    let config = PipelineConfig::eval(8)
        .with_reader_threads(3)
        .with_read_chunk(4)
        .with_corrupt_records(corrupt_records);
    let mut pipeline =
        Pipeline::start(config, Arc::new(format), files, Arc::new(Identity)).unwrap();
    let batches: towers_data::Result<Vec<HostBatch>> = pipeline.by_ref().collect();
    let count = pipeline.record_count();
    let labels = batches.map(|b| b.iter().flat_map(|b| b.labels().to_vec()).collect());
    (labels, count)
}

/// 40 records, label `i % 10`, with record 5's data damaged after writing (bad data CRC),
/// record 12's image not an image, record 20's label 99.
fn shard_with_three_bad_records(dir: &Path) -> PathBuf {
    let image = Image::from_hwc(vec![0.5; 4 * 4 * 3], 4, 4, 3);
    let framed: Vec<Vec<u8>> = (0..40)
        .map(|i| {
            let mut record = ImageRecord {
                encoded: encode_png(&image),
                label: i % 10,
                ..ImageRecord::default()
            };
            match i {
                12 => record.encoded = b"\x89PNG\r\n\x1a\n not really".to_vec(),
                20 => record.label = 99,
                _ => {}
            }
            let mut writer = TfRecordWriter::new(Vec::new());
            writer.write(&record.encode()).unwrap();
            writer.into_inner().unwrap()
        })
        .collect();
    // Record 5's data starts after the records before it and its own 12-byte header.
    let data_of_5 = framed[..5].iter().map(Vec::len).sum::<usize>() + 12;
    let mut bytes = framed.concat();
    bytes[data_of_5 + 3] ^= 0x20;
    let path = dir.join("train-00000-of-00001");
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn bad_crc_bad_image_and_bad_label_are_skipped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let shard = shard_with_three_bad_records(dir.path());
    let format = TfExampleFormat::new(10);

    let (result, _) = labels(format, vec![shard.clone()], CorruptRecords::Fail);
    let msg = report(&result.unwrap_err());
    // Fail-fast by default.
    assert_error_names(&msg, &["train-00000-of-00001, record 5", "data CRC"]);

    // No budget here (every record may be skipped): the budget is the next test's.
    let skip = CorruptRecords::Skip { max_fraction: 1.0 };
    let (result, count) = labels(format, vec![shard], skip);
    let want: Vec<i64> = (0..40)
        .filter(|i| ![5, 12, 20].contains(i))
        .map(|i| i % 10)
        .collect();
    assert_eq!(result.unwrap(), want, "the good records, in order");
    assert_eq!(
        count,
        RecordCount {
            read: 40,
            skipped: 3
        }
    );
}

#[test]
fn more_than_the_budget_stops_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let image = Image::from_hwc(vec![7.0; 32 * 32 * 3], 32, 32, 3);
    // 100 records, 5 with label 200: 5% of the records against a 1% budget.
    let bytes: Vec<u8> = (0..100u8)
        .flat_map(|i| cifar10::encode_record(&image, if i % 20 == 7 { 200 } else { i % 10 }))
        .collect();
    let path = dir.path().join("data_batch_1.bin");
    std::fs::write(&path, bytes).unwrap();
    let (result, count) = labels(
        Cifar10Format,
        vec![path],
        CorruptRecords::Skip { max_fraction: 0.01 },
    );
    let err = result.unwrap_err();
    assert!(matches!(err.root(), Error::TooManyCorrupt { .. }), "{err}");
    let msg = report(&err);
    assert_error_names(
        &msg,
        &["records read were corrupt", "data_batch_1.bin, record"],
    );
    assert!(count.skipped >= 2, "{count:?}");
}

/// By default a file cut short stops the run naming file and record; with skipping, its whole
/// records before the cut are read and the cut counts as one skipped record.
fn check_cut_file(format: impl RecordFormat + Copy + 'static, file: &Path, whole: usize) {
    let (result, _) = labels(format, vec![file.to_path_buf()], CorruptRecords::Fail);
    let msg = report(&result.unwrap_err());
    let name = file.file_name().unwrap().to_string_lossy();
    assert_error_names(&msg, &[&*name, "truncated"]);
    let skip = CorruptRecords::Skip { max_fraction: 0.1 };
    let (result, count) = labels(format, vec![file.to_path_buf()], skip);
    let want: Vec<i64> = (0..whole as i64).map(|i| i % 10).collect();
    assert_eq!(result.unwrap(), want);
    let read = whole as u64 + 1;
    assert_eq!(count, RecordCount { read, skipped: 1 });
}

#[test]
fn a_shard_cut_short_keeps_its_whole_records_when_skipping() {
    let dir = tempfile::tempdir().unwrap();
    let image = Image::from_hwc(vec![0.25; 4 * 4 * 3], 4, 4, 3);
    let framed: Vec<Vec<u8>> = (0..40)
        .map(|i| {
            let record = ImageRecord {
                encoded: encode_png(&image),
                label: i % 10,
                ..ImageRecord::default()
            };
            let mut writer = TfRecordWriter::new(Vec::new());
            writer.write(&record.encode()).unwrap();
            writer.into_inner().unwrap()
        })
        .collect();
    // Cut 20 bytes into record 30.
    let cut = framed[..30].iter().map(Vec::len).sum::<usize>() + 20;
    let shard = dir.path().join("train-00000-of-00001");
    std::fs::write(&shard, &framed.concat()[..cut]).unwrap();
    check_cut_file(TfExampleFormat::new(10), &shard, 30);
}

#[test]
fn a_cifar_file_cut_short_keeps_its_whole_records_when_skipping() {
    let dir = tempfile::tempdir().unwrap();
    let image = Image::from_hwc(vec![9.0; 32 * 32 * 3], 32, 32, 3);
    let bytes: Vec<u8> = (0..10u8)
        .flat_map(|i| cifar10::encode_record(&image, i))
        .collect();
    let file = dir.path().join("data_batch_1.bin");
    std::fs::write(&file, &bytes[..7 * cifar10::RECORD_BYTES + 100]).unwrap();
    check_cut_file(Cifar10Format, &file, 7);
}
