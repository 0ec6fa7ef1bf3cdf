//! [`PipelineConfig`]: how a pipeline reads, mixes and batches, with TF's two shapes
//! ([`PipelineConfig::train`], [`PipelineConfig::eval`]) as starting points.

use std::time::Duration;

#[cfg(doc)]
use super::Pipeline;
use super::corrupt_records::CorruptRecords;
use super::share::Share;
use crate::error::{Error, Result};

/// The shuffling example queue's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShuffleConfig {
    /// Most examples held.
    pub capacity: usize,
    /// Examples kept back for mixing until the input ends (TF's `min_after_dequeue`).
    pub min_after_dequeue: usize,
}

impl ShuffleConfig {
    /// A queue of `capacity` examples that keeps `min_after_dequeue` back for mixing.
    pub const fn new(capacity: usize, min_after_dequeue: usize) -> Self {
        Self {
            capacity,
            min_after_dequeue,
        }
    }
}

/// What to do with the examples left over at the end of the last epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FinalBatch {
    /// Drop them: every batch has exactly `batch_size` examples.
    Drop,
    /// Emit them as one smaller batch.
    Keep,
}

/// How a [`Pipeline`] reads, mixes and batches: one of TF's two shapes
/// ([`train`](Self::train), [`eval`](Self::eval)), then `with_*` for what differs, e.g.
/// `PipelineConfig::eval(64).with_reader_threads(2)` (the `with_*` Burn's configs have; the
/// defaults depend on the batch size, so it has no `new`).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PipelineConfig {
    /// Examples per batch (the global batch, before any split across devices).
    pub batch_size: usize,
    /// Reader threads (TF `num_readers`): each reads, decodes and transforms records.
    pub reader_threads: usize,
    /// Consecutive records a reader takes at once: one read, one lock and one ordered hand-off
    /// per chunk. Larger chunks cost less per record; each reader holds a chunk of decoded
    /// images in memory, and in deterministic mode may park up to four more that are ahead of
    /// their turn.
    pub read_chunk: usize,
    /// `Some`: a shuffle queue; `None`: a FIFO queue of `fifo_capacity` examples.
    pub shuffle: Option<ShuffleConfig>,
    /// Capacity of the example queue when it is FIFO.
    pub fifo_capacity: usize,
    /// Passes over the files; `None` runs until stopped.
    pub num_epochs: Option<usize>,
    /// Shuffle the file order each epoch.
    pub shuffle_files: bool,
    /// The files each epoch reads (a process's share of a multi-process job's files; all of
    /// them alone). Record positions name files by their index in the whole list.
    pub share: Share,
    /// Batches prepared ahead of the consumer (the batch queue's capacity).
    pub prefetch: usize,
    /// Seed of file order, distortions and shuffling.
    pub seed: u64,
    /// Same batches on every run whatever the thread count and timing; `false` lets readers
    /// enqueue as soon as they finish.
    pub deterministic: bool,
    /// The last, smaller batch of a finite run.
    pub final_batch: FinalBatch,
    /// How long [`Pipeline::stop`] waits for threads after the stop request.
    pub join_grace: Duration,
    /// Records that fail to decode stop the pipeline, or are skipped within a budget.
    pub corrupt_records: CorruptRecords,
}

impl PipelineConfig {
    /// Training: endless epochs, files shuffled, a shuffle queue keeping
    /// `min_after_dequeue` = 10 batches back with room for 3 more (TF's
    /// `capacity = min_after_dequeue + 3 * batch_size`), 4 readers, 2 batches prefetched.
    pub fn train(batch_size: usize) -> Self {
        let min_after_dequeue = 10 * batch_size;
        Self {
            batch_size,
            reader_threads: 4,
            read_chunk: 16,
            shuffle: Some(ShuffleConfig::new(
                min_after_dequeue + 3 * batch_size,
                min_after_dequeue,
            )),
            fifo_capacity: 3 * batch_size,
            num_epochs: None,
            shuffle_files: true,
            share: Share::ALL,
            prefetch: 2,
            seed: 0,
            deterministic: true,
            final_batch: FinalBatch::Drop,
            join_grace: Duration::from_secs(10),
            corrupt_records: CorruptRecords::Fail,
        }
    }

    /// Evaluation: one epoch, files in order, FIFO, every example exactly once, the last
    /// partial batch kept.
    pub fn eval(batch_size: usize) -> Self {
        Self {
            shuffle: None,
            num_epochs: Some(1),
            shuffle_files: false,
            final_batch: FinalBatch::Keep,
            ..Self::train(batch_size)
        }
    }

    /// Sets [`batch_size`](Self::batch_size).
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size;
        self
    }

    /// Sets [`reader_threads`](Self::reader_threads).
    pub fn with_reader_threads(mut self, reader_threads: usize) -> Self {
        self.reader_threads = reader_threads;
        self
    }

    /// Sets [`read_chunk`](Self::read_chunk).
    pub fn with_read_chunk(mut self, read_chunk: usize) -> Self {
        self.read_chunk = read_chunk;
        self
    }

    /// Sets [`shuffle`](Self::shuffle).
    pub fn with_shuffle(mut self, shuffle: Option<ShuffleConfig>) -> Self {
        self.shuffle = shuffle;
        self
    }

    /// Sets [`fifo_capacity`](Self::fifo_capacity).
    pub fn with_fifo_capacity(mut self, fifo_capacity: usize) -> Self {
        self.fifo_capacity = fifo_capacity;
        self
    }

    /// Sets [`num_epochs`](Self::num_epochs).
    pub fn with_num_epochs(mut self, num_epochs: Option<usize>) -> Self {
        self.num_epochs = num_epochs;
        self
    }

    /// Sets [`shuffle_files`](Self::shuffle_files).
    pub fn with_shuffle_files(mut self, shuffle_files: bool) -> Self {
        self.shuffle_files = shuffle_files;
        self
    }

    /// Sets [`share`](Self::share).
    pub fn with_share(mut self, share: Share) -> Self {
        self.share = share;
        self
    }

    /// Sets [`prefetch`](Self::prefetch).
    pub fn with_prefetch(mut self, prefetch: usize) -> Self {
        self.prefetch = prefetch;
        self
    }

    /// Sets [`seed`](Self::seed).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Sets [`deterministic`](Self::deterministic).
    pub fn with_deterministic(mut self, deterministic: bool) -> Self {
        self.deterministic = deterministic;
        self
    }

    /// Sets [`final_batch`](Self::final_batch).
    pub fn with_final_batch(mut self, final_batch: FinalBatch) -> Self {
        self.final_batch = final_batch;
        self
    }

    /// Sets [`join_grace`](Self::join_grace).
    pub fn with_join_grace(mut self, join_grace: Duration) -> Self {
        self.join_grace = join_grace;
        self
    }

    /// Sets [`corrupt_records`](Self::corrupt_records).
    pub fn with_corrupt_records(mut self, corrupt_records: CorruptRecords) -> Self {
        self.corrupt_records = corrupt_records;
        self
    }

    /// An error naming the first setting that cannot work.
    pub(super) fn validate(&self) -> Result<()> {
        let fail = |m: String| Err(Error::Config(m));
        if [
            self.batch_size,
            self.reader_threads,
            self.read_chunk,
            self.prefetch,
        ]
        .contains(&0)
        {
            return fail(format!(
                "batch_size ({}), reader_threads ({}), read_chunk ({}) and prefetch ({}) must be at least 1",
                self.batch_size, self.reader_threads, self.read_chunk, self.prefetch
            ));
        }
        if self.share.rank >= self.share.ranks {
            return fail(format!(
                "share: rank {} of {} ranks",
                self.share.rank, self.share.ranks
            ));
        }
        match self.shuffle {
            Some(s) if s.capacity < s.min_after_dequeue + self.batch_size => fail(format!(
                "shuffle capacity {} must hold min_after_dequeue {} plus a batch of {}",
                s.capacity, s.min_after_dequeue, self.batch_size
            )),
            None if self.fifo_capacity < self.batch_size => fail(format!(
                "fifo_capacity {} is smaller than a batch of {}",
                self.fifo_capacity, self.batch_size
            )),
            _ => Ok(()),
        }
    }
}
