//! [`Pipeline`]: the pipeline over dataset files (the module's diagram): starts, resumes and
//! re-cuts the threads of `engine.rs` over a [`FileSource`].

use std::path::PathBuf;
use std::sync::Arc;

use super::batch::HostBatch;
use super::config::PipelineConfig;
use super::corrupt_records::{CorruptTally, RecordCount};
use super::engine::Core;
use super::files::FileSource;
use super::layout::FileLayout;
use super::position::InputPosition;
use super::queue_fill::QueueFill;
use super::recut;
use crate::buffer_pool::BufferPool;
use crate::error::{Error, Result};
use crate::format::RecordFormat;
use crate::queue::Coordinator;
use crate::transforms::Transform;

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
