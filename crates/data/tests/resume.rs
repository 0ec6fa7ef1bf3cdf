//! Resuming a pipeline from its input position, against the uninterrupted pipeline computed in
//! the same test: with the ordered hand-off, the same batches bit for bit; without it, with
//! several readers racing, every record exactly once per epoch.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use towers_data::cifar10::{self, BuiltinCifar10, Cifar10Format};
use towers_data::transforms::{CifarTrain, Identity};
use towers_data::{
    Example, FinalBatch, HostBatch, Image, InputPosition, Pipeline, PipelineConfig, RecordFormat,
    RecordSpan, ShuffleConfig,
};
use towers_testing::assert_error_names;

fn cifar_config(readers: usize) -> PipelineConfig {
    PipelineConfig::train(16)
        .with_reader_threads(readers)
        .with_read_chunk(3)
        .with_seed(5)
}

fn take(pipeline: &mut Pipeline, n: usize) -> Vec<HostBatch> {
    (0..n)
        .map(|_| pipeline.next_batch().unwrap().expect("a batch"))
        .collect()
}

/// The position as a checkpoint stores it: through JSON and back.
fn saved(pipeline: &Pipeline) -> InputPosition {
    let json = serde_json::to_string(&pipeline.position()).unwrap();
    serde_json::from_str(&json).unwrap()
}

/// Stopped after `s` batches and resumed, over files copied to another directory: the batches
/// after `s` are those of the uninterrupted run, images and labels bit for bit. The run
/// crosses epochs (100 records each, files shuffled per epoch).
#[test]
fn a_resumed_pipeline_gives_the_batches_of_the_uninterrupted_one() {
    let data = BuiltinCifar10::create(20, 1, 3).unwrap();
    let files = cifar10::train_files(data.dir()).unwrap();
    let moved = tempfile::tempdir().unwrap();
    let copies: Vec<PathBuf> = files
        .iter()
        .map(|f| {
            let to = moved.path().join(f.file_name().unwrap());
            std::fs::copy(f, &to).unwrap();
            to
        })
        .collect();
    let transform = Arc::new(CifarTrain::default());
    let start = |readers, files: &[PathBuf]| {
        Pipeline::start(
            cifar_config(readers),
            Arc::new(Cifar10Format),
            files.to_vec(),
            transform.clone(),
        )
        .unwrap()
    };
    let whole = take(&mut start(1, &files), 20);
    for (readers, s) in [(1, 0), (1, 7), (3, 1), (3, 12)] {
        let mut first = start(readers, &files);
        let before = take(&mut first, s);
        let position = saved(&first);
        first.stop().unwrap();
        let mut resumed = Pipeline::resume(
            cifar_config(readers),
            Arc::new(Cifar10Format),
            copies.clone(),
            transform.clone(),
            &position,
        )
        .unwrap();
        let after = take(&mut resumed, 20 - s);
        for (i, (got, want)) in before.iter().chain(&after).zip(&whole).enumerate() {
            assert_eq!(
                got.labels(),
                want.labels(),
                "{readers} readers, stop at {s}: batch {i}"
            );
            assert!(
                got.images() == want.images(),
                "{readers} readers, stop at {s}: batch {i} images differ"
            );
        }
    }
}

/// Records of 8 bytes, each its own number (little-endian u64): the label is the number, the
/// image one pixel. Records whose number is a multiple of 7 take 3 ms to decode, so parallel
/// readers overtake each other; record number [`CORRUPT`] does not decode.
struct Numbered;

const CORRUPT: u64 = 1013;

impl RecordFormat for Numbered {
    fn index(&self, path: &Path) -> towers_data::Result<Vec<RecordSpan>> {
        let len = std::fs::metadata(path).unwrap().len();
        Ok((0..len / 8)
            .map(|i| RecordSpan {
                offset: 8 * i,
                len: 8,
            })
            .collect())
    }

    fn decode(&self, path: &Path, record: usize, bytes: &[u8]) -> towers_data::Result<Example> {
        let id = u64::from_le_bytes(bytes.try_into().unwrap());
        if id == CORRUPT {
            return Err(towers_data::Error::Record {
                path: path.to_path_buf(),
                record,
                error: "corrupt on purpose".into(),
            });
        }
        if id % 7 == 0 {
            std::thread::sleep(Duration::from_millis(3));
        }
        Ok(Example {
            image: Image::from_hwc(vec![0.0; 3], 1, 1, 3),
            label: id as i64,
            boxes: Vec::new(),
        })
    }
}

/// 4 files of 40 numbered records.
fn numbered_files(dir: &Path) -> Vec<PathBuf> {
    (0..4u64)
        .map(|f| {
            let path = dir.join(format!("ids-{f}"));
            let bytes: Vec<u8> = (40 * f..40 * (f + 1)).flat_map(u64::to_le_bytes).collect();
            std::fs::write(&path, bytes).unwrap();
            path
        })
        .collect()
}

fn racing_config(num_epochs: usize) -> PipelineConfig {
    PipelineConfig::train(8)
        .with_reader_threads(4)
        .with_read_chunk(3)
        .with_deterministic(false)
        .with_num_epochs(Some(num_epochs))
        .with_shuffle(Some(ShuffleConfig::new(40, 20)))
        .with_final_batch(FinalBatch::Keep)
}

fn labels(batches: &[HostBatch]) -> Vec<i64> {
    batches.iter().flat_map(|b| b.labels().to_vec()).collect()
}

/// Without the ordered hand-off, 4 readers race; a run stopped after `s` batches, resumed,
/// stopped again and resumed again reads every record exactly once per epoch, as the
/// uninterrupted run does.
#[test]
fn racing_readers_across_resumes_read_every_record_once_per_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let files = numbered_files(dir.path());
    let start = |position: Option<&InputPosition>, epochs| {
        let (config, format, transform) = (
            racing_config(epochs),
            Arc::new(Numbered),
            Arc::new(Identity),
        );
        match position {
            None => Pipeline::start(config, format, files.clone(), transform),
            Some(p) => Pipeline::resume(config, format, files.clone(), transform, p),
        }
        .unwrap()
    };
    let count = |labels: &[i64]| {
        let mut seen = vec![0usize; 160];
        labels.iter().for_each(|&l| seen[l as usize] += 1);
        seen
    };
    for epochs in [1, 2] {
        let whole: Vec<HostBatch> = start(None, epochs).map(Result::unwrap).collect();
        assert_eq!(count(&labels(&whole)), vec![epochs; 160], "uninterrupted");
        for stops in [[0, 3], [2, 2], [5, 9], [11, 4]] {
            let mut got = Vec::new();
            let mut position = None;
            for s in stops {
                let mut pipeline = start(position.as_ref(), epochs);
                got.extend(take(&mut pipeline, s));
                position = Some(saved(&pipeline));
                pipeline.stop().unwrap();
            }
            got.extend(start(position.as_ref(), epochs).map(Result::unwrap));
            assert_eq!(
                count(&labels(&got)),
                vec![epochs; 160],
                "{epochs} epochs, stops after {stops:?} batches"
            );
        }
    }
}

/// A position saved over other files is refused, naming what differs.
#[test]
fn a_position_over_other_files_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let files = numbered_files(dir.path());
    let position = InputPosition::start(files[..3].to_vec(), 1);
    let resume = |files: Vec<PathBuf>| {
        Pipeline::resume(
            racing_config(1),
            Arc::new(Numbered),
            files,
            Arc::new(Identity),
            &position,
        )
        .unwrap_err()
        .to_string()
    };
    let msg = resume(files.clone());
    assert_error_names(&msg, &["3 input files", "this run has 4"]);
    let msg = resume(vec![files[0].clone(), files[1].clone(), files[3].clone()]);
    assert_error_names(&msg, &["ids-2", "ids-3"]);
}

/// A record skipped as corrupt counts as read: the position moves past it (4 readers in order),
/// and does not pile up the records read after it as out-of-order ones to pass over.
#[test]
fn a_skipped_corrupt_record_does_not_hold_the_position_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ids");
    let bytes: Vec<u8> = (1000..1100u64).flat_map(u64::to_le_bytes).collect();
    std::fs::write(&path, bytes).unwrap();
    let config = racing_config(1)
        .with_corrupt_records(towers_data::CorruptRecords::Skip { max_fraction: 0.05 })
        .with_deterministic(true);
    let mut pipeline =
        Pipeline::start(config, Arc::new(Numbered), vec![path], Arc::new(Identity)).unwrap();
    take(&mut pipeline, 8);
    let position = pipeline.position();
    assert!(
        position.next.seq > 14,
        "past the corrupt record: {:?}",
        position.next
    );
    assert_eq!(position.skip, [], "records in order: nothing to pass over");
    pipeline.stop().unwrap();
}
