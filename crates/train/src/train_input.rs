//! What the trainer reads batches from: [`TrainInput`] describes an input (files and a
//! format, a Burn `Dataset`, ...) and starts a [`BatchSource`] over it, fresh or where a
//! checkpoint's input position stands.
//!
//! The position is kept in checkpoints as JSON (whatever the source's own position type
//! serializes to), so that any source resumes exactly without the checkpoint knowing its type.

use serde::Serialize;
use serde::de::DeserializeOwned;
use towers_data::{HostBatch, PipelineConfig, QueueFill, RecordCount, Share};
use towers_multigpu::TowerBatch;

use crate::error::{Error, Result};

/// A running source of training batches, e.g. a [`towers_data::Pipeline`].
pub trait BatchSource: Send {
    /// The batches it yields.
    type Batch: TowerBatch + Send;

    /// The next batch, blocking until it is ready; `None` when the input ended.
    fn next_batch(&mut self) -> Result<Option<Self::Batch>>;

    /// Where the input stands after the batches taken so far, as JSON: a source started from
    /// it yields the batches this one would yield next.
    fn position(&self) -> serde_json::Value;

    /// How full the source's queues are (zero for a source without queues).
    fn fill(&self) -> QueueFill;

    /// Records read so far, and those skipped as corrupt.
    fn record_count(&self) -> RecordCount;

    /// Stops the source's threads and returns the first error any of them had.
    fn stop(self) -> Result<()>;

    /// The batch as images, for the images summary (TensorBoard's `tower_<i>/images`); `None`
    /// (no images summary) unless the batches are images.
    fn images(batch: &Self::Batch) -> Option<&HostBatch> {
        let _ = batch;
        None
    }
}

/// An input the trainer can read: what it counts, how it is shared among ranks, and how a
/// source over it starts.
pub trait TrainInput: Clone + Send + Sync {
    /// The source it starts.
    type Source: BatchSource;

    /// The number of examples in one epoch (for epoch-based schedules).
    fn count_examples(&self) -> Result<u64>;

    /// A line for the log saying what `share` of the input one rank reads each epoch (a source
    /// started with it in its config reads no example another rank reads in the epoch).
    fn share_note(&self, share: Share) -> String;

    /// A source over the input from its start, batched, mixed and shared as `config` says, or
    /// from `position` (as [`BatchSource::position`] or [`TrainInput::recut`] gave it) when
    /// there is one.
    fn start(
        &self,
        config: PipelineConfig,
        position: Option<&serde_json::Value>,
    ) -> Result<Self::Source>;

    /// Where the source of `config.share` starts when a job resumes on another number of
    /// ranks than the one whose ranks saved `positions` (in rank order): the records they had
    /// not consumed of their epochs in progress are dealt among the new ranks, each read once
    /// (see [`towers_data::Pipeline::recut`]). Also how many of them this rank reads first.
    fn recut(
        &self,
        config: &PipelineConfig,
        positions: &[serde_json::Value],
    ) -> Result<(serde_json::Value, usize)>;
}

/// `position` as JSON.
pub(crate) fn position_json(position: &impl Serialize) -> serde_json::Value {
    serde_json::to_value(position).expect("an input position always serializes")
}

/// Every one of a checkpoint's JSON input positions read back as `T`.
pub(crate) fn positions_from_json<T: DeserializeOwned>(
    json: &[serde_json::Value],
) -> Result<Vec<T>> {
    json.iter().map(position_from_json).collect()
}

/// A checkpoint's JSON input position read back as `T`.
pub(crate) fn position_from_json<T: DeserializeOwned>(json: &serde_json::Value) -> Result<T> {
    serde_json::from_value(json.clone()).map_err(|e| {
        Error::Config(format!(
            "the checkpoint's input position does not fit this input: {e}"
        ))
    })
}
