//! [`DatasetPipeline`]: a Burn `Dataset` in, batches of its items out, on the pipeline's
//! threads (reader threads, shuffle queue, batcher, prefetch queue; see the
//! [pipeline docs](super)).
//!
//! Items are addressed by index. Each epoch visits every index exactly once: in a seeded
//! permutation, new each epoch, when [`PipelineConfig::shuffle_files`] is on (the full shuffle
//! of Burn's `DataLoaderBuilder::shuffle`), in index order when it is off; the example queue
//! may mix further ([`PipelineConfig::shuffle`]). The batches are `Vec<I>` in batch order, for
//! the user's Burn `Batcher` to turn into tensors (the towers split a batch into consecutive
//! sub-slices, one per device).
//!
//! [`DatasetPipeline::position`] gives a [`DatasetPosition`] that
//! [`DatasetPipeline::resume`] restarts from, reading only the buffered items again; with
//! `deterministic` on, the resumed pipeline gives the batches the uninterrupted one would
//! have given next.

mod position;
mod source;

pub use position::{DatasetPosition, ItemAt, NextItem};
pub(crate) use source::ItemLayout;

use std::sync::Arc;

use burn::data::dataset::Dataset;

use self::source::DatasetSource;
use super::corrupt_records::CorruptTally;
use super::engine::Core;
use super::{PipelineConfig, QueueFill, RecordCount};
use crate::error::{Error, Result};
use crate::queue::Coordinator;

/// A running pipeline over a Burn `Dataset<I>`, giving batches `Vec<I>`. Dropping it stops
/// and joins its threads.
///
/// [`PipelineConfig`] means here what it means for files, with items for records:
/// `shuffle_files` shuffles the indices each epoch, `read_chunk` is how many consecutive
/// steps of the epoch's order a reader takes at once, `num_epochs: None` runs until stopped,
/// [`PipelineConfig::eval`] gives every index once, in order, the last partial batch kept.
/// `corrupt_records` does not apply: an item that cannot be had always stops the pipeline.
///
/// # Blocking and closing
///
/// - [`start`](Self::start) and [`resume`](Self::resume) return at once; reader threads call
///   `get` ahead of the consumer until the example and prefetch queues are full, then block.
/// - [`next_batch`](Self::next_batch) blocks until a batch is ready. It gives `Ok(None)` once
///   the last epoch is batched (finite runs) or after a stop; the first error of any thread is
///   returned once, after which every thread is joined and later calls give `Ok(None)`.
/// - [`position`](Self::position), [`fill`](Self::fill) and
///   [`record_count`](Self::record_count) never block.
/// - [`stop`](Self::stop) (or the [`coordinator`](Self::coordinator)'s `request_stop`) wakes
///   every blocked thread and joins them within `join_grace`; dropping the pipeline does the
///   same and discards any error.
pub struct DatasetPipeline<I: Send + 'static> {
    core: Core<DatasetSource<I>>,
    len: usize,
}

impl<I: Send + 'static> std::fmt::Debug for DatasetPipeline<I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatasetPipeline")
            .field("len", &self.len)
            .field("threads", &self.core.threads())
            .field("fill", &self.fill())
            .finish()
    }
}

impl<I: Send + 'static> DatasetPipeline<I> {
    /// Starts reading `dataset` (any `Dataset<I>`, an `Arc` of one to share it) from its first
    /// epoch, seeded by `config.seed`. Returns at once; the threads read ahead until the
    /// queues are full. An error if the config cannot work or the dataset is empty.
    pub fn start<D: Dataset<I> + 'static>(config: PipelineConfig, dataset: D) -> Result<Self> {
        let start = DatasetPosition::start(dataset.len(), config.seed);
        Self::start_at(config, Arc::new(dataset), &start)
    }

    /// Starts reading `dataset` where `position` stands (see [`DatasetPipeline::position`]):
    /// its buffered items first, then on from its cursor; nothing before it is read. The
    /// position's seed replaces `config.seed`. An error if the dataset's length is not the one
    /// the position was saved over.
    pub fn resume<D: Dataset<I> + 'static>(
        config: PipelineConfig,
        dataset: D,
        position: &DatasetPosition,
    ) -> Result<Self> {
        position.check(dataset.len())?;
        Self::start_at(config, Arc::new(dataset), position)
    }

    /// Where the pipeline of `config.share` starts when a job resumes on another number of
    /// ranks, from the positions its old ranks saved over a dataset of `len` items (in rank
    /// order), as [`Pipeline::recut`](crate::Pipeline::recut) says for files. Start it with
    /// [`DatasetPipeline::resume`].
    pub fn recut(
        config: &PipelineConfig,
        len: usize,
        old: &[DatasetPosition],
    ) -> Result<DatasetPosition> {
        config.validate()?;
        for position in old {
            position.check(len)?;
        }
        let old: Vec<_> = old.iter().map(DatasetPosition::to_input).collect();
        let layout = Arc::new(ItemLayout::new(len));
        let position = super::recut::recut(&old, layout, config.shuffle_files, config.share)?;
        Ok(DatasetPosition::from_input(len, position))
    }

    fn start_at(
        config: PipelineConfig,
        dataset: Arc<dyn Dataset<I>>,
        start: &DatasetPosition,
    ) -> Result<Self> {
        config.validate()?;
        let len = dataset.len();
        if len == 0 {
            return Err(Error::Config("the dataset is empty".into()));
        }
        if config.share.count(len) == 0 {
            return Err(Error::Config(format!(
                "a dataset of {len} items for {} ranks: every rank needs at least one",
                config.share.ranks
            )));
        }
        let tally = Arc::new(CorruptTally::new(config.corrupt_records));
        let source = Arc::new(DatasetSource::new(dataset));
        let layout = Arc::new(ItemLayout::new(len));
        Ok(Self {
            core: Core::start(&config, source, layout, start.to_input(), tally),
            len,
        })
    }

    /// The next batch, in batch order, blocking until it is ready. `Ok(None)` at the end of a
    /// finite input (or after a clean stop); the first error of any pipeline thread otherwise
    /// (an item whose `get` failed or panicked is an [`Error::Item`] naming its index), after
    /// which every thread has been joined and later calls give `Ok(None)`.
    pub fn next_batch(&mut self) -> Result<Option<Vec<I>>> {
        self.core.next_batch()
    }

    /// Where the input stands after the batches taken so far: [`DatasetPipeline::resume`]
    /// with it gives the batches this pipeline would give next.
    pub fn position(&self) -> DatasetPosition {
        DatasetPosition::from_input(self.len, self.core.position())
    }

    /// How full the queues are now.
    pub fn fill(&self) -> QueueFill {
        self.core.fill()
    }

    /// Items read so far.
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

impl<I: Send + 'static> Iterator for DatasetPipeline<I> {
    type Item = Result<Vec<I>>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_batch().transpose()
    }
}
