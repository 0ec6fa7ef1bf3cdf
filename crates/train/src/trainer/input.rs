//! The run's input from its first step: where a checkpoint's input position stands, in
//! constant time, or for a checkpoint without one (written before positions were saved) a
//! replay from step 0, with a warning; and the per-tower dropout streams that make a resumed
//! step draw the masks the uninterrupted run drew.

use burn::tensor::{Int, Tensor};
use towers_data::{InputPosition, Pipeline, PipelineConfig};
use towers_models::{ImageClassifier, with_dropout_seed};
use towers_multigpu::{TowerLoss, current_tower};

use super::start::mix;
use super::{LossFn, Trainer};
use crate::error::{Error, Result};
use crate::input::Input;
use crate::log::TrainLog;

impl<M: ImageClassifier + 'static> Trainer<M> {
    /// The training input from `step`: where `position` stands when the checkpoint saved one;
    /// otherwise replayed from step 0 (`replay_input_on_resume`) or started afresh under a seed
    /// of the step, with a warning either way.
    pub(super) fn start_input(
        &self,
        input: &Input,
        reader_threads: usize,
        step: u64,
        position: Option<InputPosition>,
        log: &TrainLog,
    ) -> Result<Pipeline> {
        let c = &self.config;
        let config = PipelineConfig {
            reader_threads,
            seed: c.seed,
            corrupt_records: c.corrupt_records(),
            ..PipelineConfig::train(c.batch_size)
        };
        if let Some(position) = position {
            log.println(&format!(
                "resuming the input at step {step}: epoch {}, record {} of the run",
                position.next.epoch, position.next.seq
            ));
            return input.resume(config, &position);
        }
        if step == 0 {
            return input.start(config);
        }
        let warning = format!("warning: the checkpoint of step {step} holds no input position");
        if !c.replay_input_on_resume {
            log.println(&format!(
                "{warning}: the input starts afresh under a seed derived from the step"
            ));
            let seed = mix(c.seed, step);
            return input.start(PipelineConfig { seed, ..config });
        }
        let batches = step * c.towers.accumulation as u64;
        log.println(&format!(
            "{warning}: reading past the {batches} batches its steps consumed"
        ));
        let mut pipeline = input.start(config)?;
        for _ in 0..batches {
            next_batch(&mut pipeline)?;
        }
        Ok(pipeline)
    }
}

/// `loss` with its dropout masks drawn from a stream of `seed` and the tower, numbered from
/// `first_tower` (see [`towers_models::with_dropout_seed`]): the same masks in a resumed run,
/// whichever thread runs which tower when.
pub(super) fn seeded_loss<M>(
    loss: &LossFn<M>,
    seed: u64,
    first_tower: usize,
) -> impl Fn(&M, Tensor<4>, Tensor<1, Int>) -> TowerLoss + Sync + '_ {
    move |m, x, y| {
        let tower = (first_tower + current_tower().unwrap_or(0)) as u64;
        with_dropout_seed(mix(seed, tower), || loss(m, x, y))
    }
}

/// The next training batch; the end of the input is an error (training input never ends).
pub(super) fn next_batch(pipeline: &mut Pipeline) -> Result<towers_data::HostBatch> {
    pipeline
        .next_batch()?
        .ok_or_else(|| Error::Config("the training input ended".into()))
}
