//! [`DatasetPipeline`] over Burn datasets: every index once per epoch, exact resume, and the
//! errors of a dataset whose `get` fails or panics. Expected orders and counts are computed in
//! the tests from the indices themselves.

use std::collections::HashMap;
use std::sync::mpsc::channel;
use std::time::Duration;

use burn::data::dataset::{Dataset, DatasetError, InMemDataset};
use towers_data::{DatasetPipeline, DatasetPosition, Error, PipelineConfig, ShuffleConfig};
use towers_testing::{assert_error_names, report};

/// The item of index `i`: not the index itself, so that a pipeline handing out indices fails.
fn item(i: usize) -> u64 {
    i as u64 * 7919 + 13
}

/// The index of an item.
fn index(item: u64) -> usize {
    ((item - 13) / 7919) as usize
}

fn dataset(len: usize) -> InMemDataset<u64> {
    InMemDataset::new((0..len).map(item).collect())
}

fn take(pipeline: &mut DatasetPipeline<u64>, n: usize) -> Vec<Vec<u64>> {
    (0..n)
        .map(|_| pipeline.next_batch().unwrap().expect("a batch"))
        .collect()
}

/// The position as a checkpoint stores it: through JSON and back.
fn saved(pipeline: &DatasetPipeline<u64>) -> DatasetPosition {
    let json = serde_json::to_string(&pipeline.position()).unwrap();
    serde_json::from_str(&json).unwrap()
}

/// Indices of the items of `batches`, in order.
fn indices(batches: &[Vec<u64>]) -> Vec<usize> {
    batches.iter().flatten().map(|&i| index(i)).collect()
}

/// Training over 50 items, batches of 8, a shuffle queue holding 3 epochs' worth: stopped
/// after `cut` batches, saved, and resumed, the next 20 batches are the uninterrupted run's,
/// item for item, with one reader or four.
#[test]
fn a_resumed_pipeline_gives_the_batches_of_the_uninterrupted_one() {
    let config = |readers| {
        PipelineConfig::train(8)
            .with_reader_threads(readers)
            .with_read_chunk(3)
            .with_seed(11)
    };
    let mut whole = DatasetPipeline::start(config(1), dataset(50)).unwrap();
    let all = take(&mut whole, 40);
    for cut in [1, 7, 13] {
        let mut first = DatasetPipeline::start(config(1), dataset(50)).unwrap();
        assert_eq!(take(&mut first, cut), all[..cut], "the same start");
        let position = saved(&first);
        assert!(position.buffer.len() >= 80, "the shuffle buffer is saved");
        first.stop().unwrap();
        for readers in [1, 4] {
            let mut resumed =
                DatasetPipeline::resume(config(readers), dataset(50), &position).unwrap();
            assert_eq!(
                take(&mut resumed, 20),
                all[cut..cut + 20],
                "after {cut} batches, {readers} readers"
            );
        }
    }
}

/// Without a shuffle queue, one reader: each epoch is a permutation of the indices, a
/// different one each epoch, the same for the same seed; with shuffling off, index order.
#[test]
fn each_epoch_is_a_seeded_permutation_of_the_indices() {
    let config = |shuffle_files, seed| {
        PipelineConfig::train(10)
            .with_reader_threads(1)
            .with_shuffle(None)
            .with_num_epochs(Some(3))
            .with_shuffle_files(shuffle_files)
            .with_seed(seed)
    };
    let run = |shuffle_files, seed| {
        let pipeline = DatasetPipeline::start(config(shuffle_files, seed), dataset(30)).unwrap();
        indices(&pipeline.collect::<towers_data::Result<Vec<_>>>().unwrap())
    };
    let order = run(true, 4);
    let epochs: Vec<&[usize]> = order.chunks(30).collect();
    assert_eq!(epochs.len(), 3);
    for epoch in &epochs {
        let mut sorted = epoch.to_vec();
        sorted.sort();
        assert_eq!(sorted, (0..30).collect::<Vec<_>>(), "every index once");
        assert_ne!(*epoch, &sorted[..], "shuffled");
    }
    assert_ne!(epochs[0], epochs[1], "a new permutation each epoch");
    assert_eq!(order, run(true, 4), "same seed, same order");
    assert_ne!(order, run(true, 5), "another seed, another order");
    let in_order: Vec<usize> = (0..3).flat_map(|_| 0..30).collect();
    assert_eq!(run(false, 4), in_order);
}

/// Counts of each index in `batches`.
fn counts(batches: &[Vec<u64>]) -> HashMap<usize, usize> {
    let mut counts = HashMap::new();
    for i in indices(batches) {
        *counts.entry(i).or_default() += 1;
    }
    counts
}

/// Four readers racing without the ordered hand-off, a shuffle queue, a stop and resume in
/// the middle: still every index exactly once per epoch, over two epochs.
#[test]
fn parallel_readers_read_each_index_once_per_epoch_across_a_resume() {
    let config = PipelineConfig::train(7)
        .with_reader_threads(4)
        .with_read_chunk(2)
        .with_deterministic(false)
        .with_num_epochs(Some(2))
        .with_shuffle(Some(ShuffleConfig::new(40, 20)))
        .with_final_batch(towers_data::FinalBatch::Keep);
    let mut first = DatasetPipeline::start(config.clone(), dataset(61)).unwrap();
    let mut batches = take(&mut first, 6);
    let position = saved(&first);
    first.stop().unwrap();
    let resumed = DatasetPipeline::resume(config, dataset(61), &position).unwrap();
    batches.extend(resumed.collect::<towers_data::Result<Vec<_>>>().unwrap());
    let counts = counts(&batches);
    assert_eq!(counts.len(), 61, "every index read");
    assert!(counts.values().all(|&c| c == 2), "{counts:?}");
}

/// Evaluation: one epoch in index order, four readers, the last partial batch kept.
#[test]
fn eval_gives_every_index_once_in_order_and_keeps_the_last_batch() {
    let config = PipelineConfig::eval(8)
        .with_reader_threads(4)
        .with_read_chunk(2);
    let pipeline = DatasetPipeline::start(config, dataset(21)).unwrap();
    let batches: Vec<Vec<u64>> = pipeline.collect::<towers_data::Result<_>>().unwrap();
    let sizes: Vec<usize> = batches.iter().map(Vec::len).collect();
    assert_eq!(sizes, [8, 8, 5]);
    assert_eq!(indices(&batches), (0..21).collect::<Vec<_>>());
}

#[test]
fn a_position_saved_over_another_length_is_refused() {
    let mut pipeline = DatasetPipeline::start(PipelineConfig::train(4), dataset(30)).unwrap();
    take(&mut pipeline, 2);
    let position = saved(&pipeline);
    let err = DatasetPipeline::resume(PipelineConfig::train(4), dataset(31), &position)
        .unwrap_err()
        .to_string();
    assert_error_names(&err, &["30 items", "31"]);
}

/// A dataset of `len` items whose item `bad` fails (an error, or a panic).
struct Flaky {
    len: usize,
    bad: usize,
    panics: bool,
}

impl Dataset<u64> for Flaky {
    fn get(&self, index: usize) -> Result<u64, DatasetError> {
        match (index == self.bad, self.panics) {
            (false, _) => Ok(item(index)),
            (true, false) => Err(DatasetError::new(std::io::Error::other("disk gone"))),
            (true, true) => panic!("boom at {index}"),
        }
    }

    fn len(&self) -> usize {
        self.len
    }
}

/// The first error of an endless three-reader run over `dataset`, within 60 s (a hang fails).
fn first_error(dataset: Flaky) -> Error {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let config = PipelineConfig::train(4).with_reader_threads(3);
        let pipeline = DatasetPipeline::start(config, dataset).unwrap();
        let error = pipeline.filter_map(Result::err).next();
        tx.send(error.expect("the run fails")).unwrap();
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the pipeline hung")
}

#[test]
fn a_failing_get_is_an_error_naming_the_index() {
    let err = first_error(Flaky {
        len: 40,
        bad: 13,
        panics: false,
    });
    assert!(
        matches!(
            err.root(),
            Error::Item {
                index: 13,
                len: 40,
                ..
            }
        ),
        "{err}"
    );
    assert_error_names(&report(&err), &["disk gone"]);
}

#[test]
fn a_panicking_get_is_an_error_naming_the_index() {
    let err = first_error(Flaky {
        len: 40,
        bad: 27,
        panics: true,
    });
    let message = report(&err);
    assert_error_names(&message, &["dataset item 27 (of 40)", "boom at 27"]);
}
