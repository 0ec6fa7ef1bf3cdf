//! A job's input re-cut for another number of ranks ([`DatasetPipeline::recut`], the same code
//! as files): the items two ranks had not consumed of their epochs are read exactly once across
//! one or three new ranks, which then read whole epochs of their own shares. Counted from the
//! items themselves (each item is its index), against the even split of what was left.

use burn::data::dataset::InMemDataset;
use towers_data::{DatasetPipeline, DatasetPosition, PipelineConfig, Share};

const ITEMS: usize = 303;

fn dataset() -> InMemDataset<usize> {
    InMemDataset::new((0..ITEMS).collect())
}

/// The old job's rank `rank` of 2: a shuffle queue, so its position holds a buffer.
fn old_config(rank: usize) -> PipelineConfig {
    PipelineConfig::train(4)
        .with_reader_threads(2)
        .with_read_chunk(3)
        .with_seed(5)
        .with_share(Share::new(rank, 2))
}

/// A new rank, FIFO and one item per batch, so that the test sees the order items are read in.
fn new_config(share: Share) -> PipelineConfig {
    PipelineConfig::train(1)
        .with_shuffle(None)
        .with_share(share)
}

/// The items each of 2 ranks consumed in `batches` batches, and its position then, through
/// JSON as a checkpoint keeps it.
fn old_job(batches: usize) -> (Vec<usize>, Vec<DatasetPosition>) {
    let mut consumed = Vec::new();
    let mut positions = Vec::new();
    for rank in 0..2 {
        let mut pipeline = DatasetPipeline::start(old_config(rank), dataset()).unwrap();
        for _ in 0..batches {
            consumed.extend(pipeline.next_batch().unwrap().unwrap());
        }
        let json = serde_json::to_string(&pipeline.position()).unwrap();
        positions.push(serde_json::from_str(&json).unwrap());
        pipeline.stop().unwrap();
    }
    (consumed, positions)
}

#[test]
fn every_item_of_the_epoch_is_read_once_across_the_new_ranks() {
    let (consumed, positions) = old_job(9);
    assert!(
        positions.iter().all(|p| !p.buffer.is_empty()),
        "buffers saved"
    );
    for ranks in [1, 3] {
        let left = ITEMS - consumed.len();
        let mut count = vec![0; ITEMS];
        consumed.iter().for_each(|&i| count[i] += 1);
        for rank in 0..ranks {
            let config = new_config(Share::new(rank, ranks));
            let position = DatasetPipeline::<usize>::recut(&config, ITEMS, &positions).unwrap();
            let mut pipeline = DatasetPipeline::resume(config, dataset(), &position).unwrap();
            let mut next = || pipeline.next_batch().unwrap().unwrap()[0];
            // Its block of what was left: an even split, in rank order.
            let block = (rank + 1) * left / ranks - rank * left / ranks;
            (0..block).for_each(|_| count[next()] += 1);
            // Then a new epoch of its own share.
            let epoch: Vec<usize> = (0..Share::new(rank, ranks).count(ITEMS))
                .map(|_| next())
                .collect();
            let mut sorted = epoch.clone();
            sorted.sort();
            let share: Vec<usize> = (rank..ITEMS).step_by(ranks).collect();
            assert_eq!(sorted, share, "{ranks} ranks: rank {rank}'s next epoch");
        }
        let wrong: Vec<(usize, usize)> = (count.iter().enumerate())
            .filter(|(_, n)| **n != 1)
            .map(|(i, n)| (i, *n))
            .collect();
        assert!(
            wrong.is_empty(),
            "{ranks} ranks: (item, reads) not once: {wrong:?}"
        );
    }
}
