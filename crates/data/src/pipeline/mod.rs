//! [`Pipeline`]: files in, host batches out, on threads (TF's `shuffle_batch_join` family).
//!
//! ```text
//! record cursor (files x epochs, seeded)           shared, under a lock
//!   -> R reader threads: read -> decode -> transform
//!   -> ordered gate (deterministic mode)            records enter the queue in cursor order
//!                                                   (a reader ahead of its turn parks its chunk)
//!   -> example queue (shuffle or FIFO)
//!   -> batcher thread: dequeue_many(B) -> HostBatch
//!   -> batch queue (prefetch depth k)
//!   -> Pipeline::next_batch
//! ```
//!
//! The TF shapes map onto [`PipelineConfig`]: `shuffle_batch_join` is [`PipelineConfig::train`]
//! (shuffle queue, R readers); `batch_join` is the same with `shuffle: None`; `batch` is one
//! reader. [`PipelineConfig::eval`] reads every example exactly once, in file order, and keeps
//! the last partial batch.
//!
//! Reproducibility: with `deterministic` on (the default), the batches depend only on the
//! files, the config and the seed, not on the number of reader threads nor on thread timing:
//! each record's distortions are seeded by its sequence number, records enter the example
//! queue in sequence order, and the shuffle queue's picks depend only on that order.
//!
//! Resuming: [`Pipeline::position`] says where the input stands after the batches taken so far
//! (see [`InputPosition`]); [`Pipeline::resume`] starts there, reading nothing before it. With
//! `deterministic` on, the resumed pipeline gives the batches the uninterrupted one would have
//! given next; without it, no record is repeated or left out.
//!
//! [`DatasetPipeline`] is the same machinery over a Burn `Dataset` (`dataset/`): the
//! threads and queues live in `core.rs`, generic over what is read and batched.

mod batch;
mod buffer_pool;
mod core;
mod corrupt_records;
mod dataset;
mod files;
mod layout;
mod ordered_gate;
mod position;
mod record_cursor;
mod recut;
mod share;

pub use batch::{BatchSlice, HostBatch, image_loss};
pub use corrupt_records::{CorruptRecords, RecordCount};
pub use dataset::{DatasetPipeline, DatasetPosition, ItemAt, NextItem};
pub use position::{CursorAt, InputPosition, RecordAt};
pub use share::Share;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub(crate) use buffer_pool::BufferPool;
use corrupt_records::CorruptTally;
use files::FileSource;
use layout::FileLayout;

use self::core::Core;
use crate::error::{Error, Result};
use crate::format::RecordFormat;
use crate::queue::Coordinator;
use crate::transforms::Transform;

/// The shuffling example queue's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShuffleConfig {
    /// Most examples held.
    pub capacity: usize,
    /// Examples kept back for mixing until the input ends (TF's `min_after_dequeue`).
    pub min_after_dequeue: usize,
}

/// What to do with the examples left over at the end of the last epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinalBatch {
    /// Drop them: every batch has exactly `batch_size` examples.
    Drop,
    /// Emit them as one smaller batch.
    Keep,
}

/// How a [`Pipeline`] reads, mixes and batches.
#[derive(Debug, Clone, PartialEq)]
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
            shuffle: Some(ShuffleConfig {
                capacity: min_after_dequeue + 3 * batch_size,
                min_after_dequeue,
            }),
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

    fn validate(&self) -> Result<()> {
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

/// How full the pipeline's queues are, each from 0.0 to 1.0. An example queue that stays near
/// empty while training means the input is starving the devices.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueueFill {
    /// The example queue.
    pub examples: f32,
    /// The batch (prefetch) queue.
    pub batches: f32,
}

/// A running input pipeline. Dropping it stops and joins its threads.
pub struct Pipeline {
    core: Core<FileSource>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("threads", &self.core.threads())
            .field("fill", &self.fill())
            .field("finished", &self.core.finished())
            .finish()
    }
}

impl Pipeline {
    /// Starts reading `files` in `format`, transforming each image with `transform`.
    pub fn start(
        config: PipelineConfig,
        format: Arc<dyn RecordFormat>,
        files: Vec<PathBuf>,
        transform: Arc<dyn Transform>,
    ) -> Result<Self> {
        let seed = config.seed;
        Self::start_at(config, format, InputPosition::start(files, seed), transform)
    }

    /// Starts reading `files` where `position` stands (see [`Pipeline::position`]): its
    /// buffered records first, then on from its cursor; nothing before it is read. The
    /// position's seed replaces `config.seed`. An error if `files` do not have the names the
    /// position was saved over.
    pub fn resume(
        config: PipelineConfig,
        format: Arc<dyn RecordFormat>,
        files: Vec<PathBuf>,
        transform: Arc<dyn Transform>,
        position: &InputPosition,
    ) -> Result<Self> {
        position.check(&files)?;
        let start = InputPosition {
            files,
            ..position.clone()
        };
        Self::start_at(config, format, start, transform)
    }

    /// Where the pipeline of `config.share` starts when a job resumes on another number of
    /// ranks, from the positions its old ranks saved over `files` (in rank order): its block of
    /// the records they had not consumed of their epochs in progress, then its share of the
    /// files (see `recut.rs`). Start it with [`Pipeline::resume`].
    pub fn recut(
        config: &PipelineConfig,
        format: Arc<dyn RecordFormat>,
        files: &[PathBuf],
        old: &[InputPosition],
    ) -> Result<InputPosition> {
        config.validate()?;
        for position in old {
            position.check(files)?;
        }
        let tally = Arc::new(CorruptTally::new(config.corrupt_records));
        let layout = Arc::new(FileLayout::new(files.to_vec(), format, tally));
        recut::recut(old, layout, config.shuffle_files, config.share)
    }

    fn start_at(
        config: PipelineConfig,
        format: Arc<dyn RecordFormat>,
        start: InputPosition,
        transform: Arc<dyn Transform>,
    ) -> Result<Self> {
        config.validate()?;
        let share = config.share;
        if share.count(start.files.len()) == 0 {
            return Err(Error::Config(format!(
                "{} input files for {} ranks: every rank needs at least one file (cut the data \
                 into more shards)",
                start.files.len(),
                share.ranks
            )));
        }
        let tally = Arc::new(CorruptTally::new(config.corrupt_records));
        let layout = Arc::new(FileLayout::new(
            start.files.clone(),
            format,
            Arc::clone(&tally),
        ));
        // The queued batches, the one being built and the one the consumer holds.
        let buffers = BufferPool::new(config.prefetch + 2);
        let source = FileSource::new(Arc::clone(&layout), transform, start.seed, buffers);
        Ok(Self {
            core: Core::start(&config, Arc::new(source), layout, start, tally),
        })
    }

    /// The next batch, blocking until it is ready. `Ok(None)` at the end of a finite input
    /// (or after a clean stop); the first error of any pipeline thread otherwise, after which
    /// every thread has been joined.
    pub fn next_batch(&mut self) -> Result<Option<HostBatch>> {
        self.core.next_batch()
    }

    /// Where the input stands after the batches taken so far: [`Pipeline::resume`] with it
    /// gives the batches this pipeline would give next.
    pub fn position(&self) -> InputPosition {
        self.core.position()
    }

    /// How full the queues are now.
    pub fn fill(&self) -> QueueFill {
        self.core.fill()
    }

    /// Records read so far, and those skipped as corrupt.
    pub fn record_count(&self) -> RecordCount {
        self.core.record_count()
    }

    /// The coordinator of the pipeline's threads: a trainer can share it to stop the
    /// pipeline (e.g. on Ctrl-C) or to check whether it stopped.
    pub fn coordinator(&self) -> &Coordinator {
        self.core.coordinator()
    }

    /// Stops every thread and joins them; returns the first error any of them had.
    pub fn stop(self) -> Result<()> {
        self.core.stop()
    }
}

impl Iterator for Pipeline {
    type Item = Result<HostBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_batch().transpose()
    }
}
