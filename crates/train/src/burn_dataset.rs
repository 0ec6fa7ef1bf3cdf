//! [`DatasetInput`]: a Burn `Dataset` as the trainer's input, read by a
//! [`DatasetPipeline`] into batches of items (`Vec<I>`) that the towers split and each tower's
//! [`TrainStep`](crate::TrainStep) turns into tensors (with a Burn `Batcher`, typically).

use std::sync::Arc;

use burn::data::dataset::Dataset;
use towers_data::{
    DatasetPipeline, DatasetPosition, PipelineConfig, QueueFill, RecordCount, Share,
};

use crate::error::Result;
use crate::train_input::{
    BatchSource, TrainInput, position_from_json, position_json, positions_from_json,
};

/// A Burn `Dataset` of items `I` to train on: every epoch a seeded permutation of its
/// indices, batched into `Vec<I>`, resumed exactly from a checkpoint's input position.
pub struct DatasetInput<I> {
    dataset: Arc<dyn Dataset<I>>,
}

impl<I> Clone for DatasetInput<I> {
    fn clone(&self) -> Self {
        Self {
            dataset: Arc::clone(&self.dataset),
        }
    }
}

impl<I: Clone + Send + Sync + 'static> DatasetInput<I> {
    /// Trains on `dataset`.
    pub fn new(dataset: impl Dataset<I> + 'static) -> Self {
        Self {
            dataset: Arc::new(dataset),
        }
    }
}

impl<I: Clone + Send + Sync + 'static> TrainInput for DatasetInput<I> {
    type Source = DatasetPipeline<I>;

    fn count_examples(&self) -> Result<u64> {
        Ok(self.dataset.len() as u64)
    }

    /// Item `i` to rank `i mod ranks`, so no item is read twice in an epoch.
    fn share_note(&self, share: Share) -> String {
        let len = self.dataset.len();
        format!(
            "this rank reads {} of the dataset's {len} items (item i on rank i mod {})",
            share.count(len),
            share.ranks
        )
    }

    fn start(
        &self,
        config: PipelineConfig,
        position: Option<&serde_json::Value>,
    ) -> Result<DatasetPipeline<I>> {
        let dataset = Arc::clone(&self.dataset);
        Ok(match position {
            Some(json) => {
                let position: DatasetPosition = position_from_json(json)?;
                DatasetPipeline::resume(config, dataset, &position)?
            }
            None => DatasetPipeline::start(config, dataset)?,
        })
    }

    fn recut(
        &self,
        config: &PipelineConfig,
        positions: &[serde_json::Value],
    ) -> Result<(serde_json::Value, usize)> {
        let old: Vec<DatasetPosition> = positions_from_json(positions)?;
        let position = DatasetPipeline::<I>::recut(config, self.dataset.len(), &old)?;
        Ok((position_json(&position), position.buffer.len()))
    }
}

impl<I: Send + Sync + 'static> BatchSource for DatasetPipeline<I> {
    type Batch = Vec<I>;

    fn next_batch(&mut self) -> Result<Option<Vec<I>>> {
        Ok(DatasetPipeline::next_batch(self)?)
    }

    fn position(&self) -> serde_json::Value {
        position_json(&DatasetPipeline::position(self))
    }

    fn fill(&self) -> QueueFill {
        DatasetPipeline::fill(self)
    }

    fn record_count(&self) -> RecordCount {
        DatasetPipeline::record_count(self)
    }

    fn stop(self) -> Result<()> {
        Ok(DatasetPipeline::stop(self)?)
    }
}
