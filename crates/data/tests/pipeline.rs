//! The pipeline end to end, on CIFAR-format files written by the tests themselves.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::channel;
use std::time::Duration;

use towers_data::cifar10::{self, Cifar10Format, RECORD_BYTES};
use towers_data::transforms::{CifarEval, CifarTrain, Identity, Rng, Transform};
use towers_data::{
    Cause, Error, FinalBatch, HostBatch, Image, Pipeline, PipelineConfig, RecordFormat,
};
use towers_testing::{assert_error_names, report};

/// Runs `f` on a thread and fails the test if it has not returned within 60 s: a hang is a bug.
fn no_hang<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = channel();
    std::thread::spawn(move || tx.send(f()).unwrap());
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the pipeline hung")
}

fn start(
    config: PipelineConfig,
    files: Vec<PathBuf>,
    transform: impl Transform + 'static,
) -> towers_data::Result<Pipeline> {
    Pipeline::start(config, Arc::new(Cifar10Format), files, Arc::new(transform))
}

fn collect(pipeline: Pipeline) -> towers_data::Result<Vec<HostBatch>> {
    pipeline.collect()
}

/// Labels straight from the file bytes: the first byte of each record.
fn labels_in(path: &Path) -> Vec<i64> {
    std::fs::read(path)
        .unwrap()
        .chunks(RECORD_BYTES)
        .map(|r| r[0] as i64)
        .collect()
}

#[test]
fn eval_reads_every_example_once_in_order_and_keeps_the_last_batch() {
    let data = cifar10::BuiltinCifar10::create(7, 3, 1).unwrap();
    let files = cifar10::train_files(data.dir()).unwrap();
    let want: Vec<i64> = files.iter().flat_map(|f| labels_in(f)).collect();
    let config = PipelineConfig::eval(8).with_reader_threads(3);
    let batches =
        no_hang(move || collect(start(config, files, CifarEval::default()).unwrap())).unwrap();
    let sizes: Vec<usize> = batches.iter().map(HostBatch::len).collect();
    assert_eq!(
        sizes,
        vec![8, 8, 8, 8, 3],
        "35 examples in batches of 8, the partial one kept"
    );
    let got: Vec<i64> = batches.iter().flat_map(|b| b.labels().to_vec()).collect();
    assert_eq!(got, want);

    // The first image is the eval transform of the first record, decoded independently.
    let bytes = std::fs::read(data.dir().join(cifar10::TRAIN_FILES[0])).unwrap();
    let first = Cifar10Format
        .decode(Path::new("f"), 0, &bytes[..RECORD_BYTES])
        .unwrap();
    let image = CifarEval::default()
        .apply(first.image, &[], &mut rand::SeedableRng::seed_from_u64(0))
        .unwrap();
    assert_eq!(batches[0].image_shape(), [3, 24, 24]);
    assert_eq!(
        &batches[0].images()[..24 * 24 * 3],
        image.into_chw().as_slice()
    );
}

fn train_batches(
    dir: &Path,
    readers: usize,
    seed: u64,
    deterministic: bool,
    n: usize,
) -> Vec<HostBatch> {
    let config = PipelineConfig::train(16)
        .with_reader_threads(readers)
        .with_seed(seed)
        .with_deterministic(deterministic);
    let files = cifar10::train_files(dir).unwrap();
    no_hang(move || {
        let pipeline = start(config, files, CifarTrain::default()).unwrap();
        pipeline
            .take(n)
            .collect::<towers_data::Result<Vec<_>>>()
            .unwrap()
    })
}

#[test]
fn same_seed_same_batches_whatever_the_reader_count() {
    let data = cifar10::BuiltinCifar10::create(40, 1, 2).unwrap();
    let one = train_batches(data.dir(), 1, 11, true, 30);
    let four = train_batches(data.dir(), 4, 11, true, 30);
    assert_eq!(one, four);
    let other = train_batches(data.dir(), 4, 12, true, 30);
    assert_ne!(one, other, "another seed, other batches");
    // 30 batches of 16 run past the 200 examples of an epoch: epochs follow one another.
    assert_eq!(one.iter().map(HostBatch::len).sum::<usize>(), 480);
}

#[test]
fn shuffling_mixes_classes_across_batches() {
    let data = cifar10::BuiltinCifar10::create(40, 1, 2).unwrap();
    // Files hold classes in turn 0..9, so an unshuffled batch of 16 would start 0,1,2,...
    let batches = train_batches(data.dir(), 2, 3, true, 5);
    let in_turn: Vec<i64> = (0..16).map(|i| i % 10).collect();
    assert!(batches.iter().all(|b| b.labels() != in_turn.as_slice()));
}

#[test]
fn nondeterministic_mode_still_reads_each_example_once_per_epoch() {
    let data = cifar10::BuiltinCifar10::create(13, 1, 4).unwrap();
    let files = cifar10::train_files(data.dir()).unwrap();
    let mut want: Vec<i64> = files.iter().flat_map(|f| labels_in(f)).collect();
    let config = PipelineConfig::train(10)
        .with_reader_threads(4)
        .with_deterministic(false)
        .with_num_epochs(Some(1))
        .with_final_batch(FinalBatch::Keep);
    let batches = no_hang(move || collect(start(config, files, Identity).unwrap())).unwrap();
    let mut got: Vec<i64> = batches.iter().flat_map(|b| b.labels().to_vec()).collect();
    got.sort();
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn finite_training_drops_the_remainder() {
    let data = cifar10::BuiltinCifar10::create(10, 1, 5).unwrap();
    let files = cifar10::train_files(data.dir()).unwrap();
    let config = PipelineConfig::train(30).with_num_epochs(Some(2));
    let batches =
        no_hang(move || collect(start(config, files, CifarTrain::default()).unwrap())).unwrap();
    assert_eq!(batches.len(), 100 / 30);
    assert!(batches.iter().all(|b| b.len() == 30));
}

/// Writes `records` hand-built records with the given labels into `path`.
fn write_records(path: &Path, labels: &[u8]) {
    let image = Image::from_hwc(vec![100.0; 32 * 32 * 3], 32, 32, 3);
    let bytes: Vec<u8> = labels
        .iter()
        .flat_map(|&l| cifar10::encode_record(&image, l))
        .collect();
    std::fs::write(path, bytes).unwrap();
}

fn first_error(
    config: PipelineConfig,
    files: Vec<PathBuf>,
    transform: impl Transform + 'static,
) -> Error {
    no_hang(move || collect(start(config, files, transform).unwrap()).unwrap_err())
}

#[test]
fn label_out_of_range_names_file_and_record() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.bin");
    let bad = dir.path().join("bad.bin");
    write_records(&good, &[1; 50]);
    write_records(&bad, &[1, 2, 3, 12, 4]);
    let config = PipelineConfig::eval(4).with_reader_threads(3);
    let err = first_error(config, vec![good, bad], Identity);
    let msg = report(&err);
    // The file, the record, what is wrong, and the failing thread.
    assert_error_names(&msg, &["bad.bin", "record 3", "label 12", "reader-"]);
}

#[test]
fn truncated_file_names_the_file_even_in_an_endless_run() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.bin");
    let cut = dir.path().join("cut.bin");
    write_records(&good, &[1; 20]);
    write_records(&cut, &[1; 3]);
    let len = std::fs::metadata(&cut).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&cut)
        .unwrap()
        .set_len(len - 10)
        .unwrap();
    let err = first_error(PipelineConfig::train(4), vec![good, cut], Identity);
    let msg = report(&err);
    assert_error_names(&msg, &["cut.bin", "after record 2"]);
}

#[test]
fn missing_file_is_an_io_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.bin");
    write_records(&good, &[1; 20]);
    let err = first_error(
        PipelineConfig::eval(4),
        vec![good, dir.path().join("gone.bin")],
        Identity,
    );
    assert!(
        matches!(err.root(), Error::Io { path, .. } if path.ends_with("gone.bin")),
        "{err}"
    );
}

/// A transform that panics on the 30th image it sees.
struct PanicsOnThirtieth(std::sync::atomic::AtomicUsize);

impl Transform for PanicsOnThirtieth {
    fn apply(
        &self,
        image: Image,
        _: &[towers_data::BoundingBox],
        _: &mut Rng,
    ) -> Result<Image, Cause> {
        if self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 29 {
            panic!("decoder bug");
        }
        Ok(image)
    }
}

#[test]
fn a_panic_in_a_reader_surfaces_as_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.bin");
    write_records(&good, &[1; 100]);
    let err = first_error(
        PipelineConfig::train(4),
        vec![good],
        PanicsOnThirtieth(Default::default()),
    );
    assert!(
        matches!(&err, Error::Panic { thread, message } if thread.starts_with("reader-") && message == "decoder bug"),
        "{err}"
    );
}

#[test]
fn stopping_an_endless_pipeline_joins_every_thread() {
    let data = cifar10::BuiltinCifar10::create(20, 1, 6).unwrap();
    let files = cifar10::train_files(data.dir()).unwrap();
    no_hang(move || {
        let mut pipeline = start(
            PipelineConfig::train(8),
            files.clone(),
            CifarTrain::default(),
        )
        .unwrap();
        pipeline.next_batch().unwrap().unwrap();
        // Give the readers time to fill the queues and block on them.
        std::thread::sleep(Duration::from_millis(200));
        let fill = pipeline.fill();
        assert!(
            fill.examples > 0.5 && fill.batches == 1.0,
            "queues fill while nobody consumes: {fill:?}"
        );
        pipeline.stop().unwrap();
        // Dropping without stop must not hang either.
        let pipeline = start(PipelineConfig::train(8), files, CifarTrain::default()).unwrap();
        drop(pipeline);
    });
}

#[test]
fn a_consumer_may_stop_the_pipeline_through_its_coordinator() {
    let data = cifar10::BuiltinCifar10::create(20, 1, 6).unwrap();
    let files = cifar10::train_files(data.dir()).unwrap();
    no_hang(move || {
        let mut pipeline = start(PipelineConfig::train(8), files, CifarTrain::default()).unwrap();
        pipeline.coordinator().request_stop();
        // Batches already made may still come out; then the end, without error.
        while pipeline.next_batch().unwrap().is_some() {}
    });
}

#[test]
fn impossible_configurations_are_refused_up_front() {
    let data = cifar10::BuiltinCifar10::create(2, 1, 6).unwrap();
    let files = cifar10::train_files(data.dir()).unwrap();
    let mut config = PipelineConfig::train(64);
    config.shuffle.as_mut().unwrap().capacity = 70;
    let err = start(config, files.clone(), Identity).unwrap_err();
    assert_error_names(&report(&err), &["capacity"]);
    assert!(start(PipelineConfig::train(8), vec![], Identity).is_err());
}

/// CIFAR-10 records, plus one the file does not hold: what a reader meets when a file
/// shrinks between indexing and reading.
struct OneRecordTooMany;

impl RecordFormat for OneRecordTooMany {
    fn index(&self, path: &Path) -> towers_data::Result<Vec<towers_data::RecordSpan>> {
        let mut spans = Cifar10Format.index(path)?;
        let last = *spans.last().unwrap();
        spans.push(towers_data::RecordSpan {
            offset: last.offset + RECORD_BYTES as u64,
            ..last
        });
        Ok(spans)
    }

    fn decode(
        &self,
        path: &Path,
        record: usize,
        bytes: &[u8],
    ) -> towers_data::Result<towers_data::Example> {
        Cifar10Format.decode(path, record, bytes)
    }
}

#[test]
fn a_record_missing_at_read_time_names_file_and_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shrunk.bin");
    write_records(&path, &[1; 20]);
    let config = PipelineConfig::eval(4).with_read_chunk(8);
    let err = no_hang(move || {
        let pipeline = Pipeline::start(
            config,
            Arc::new(OneRecordTooMany),
            vec![path],
            Arc::new(Identity),
        )
        .unwrap();
        collect(pipeline).unwrap_err()
    });
    let msg = report(&err);
    assert_error_names(&msg, &["shrunk.bin", "record 20", "truncated"]);
}
