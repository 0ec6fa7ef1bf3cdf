//! The run's input from its first step: where a checkpoint's input position stands, in
//! constant time, or for a checkpoint without one (written before positions were saved) a
//! replay from step 0, with a warning; and the per-tower dropout streams that make a resumed
//! step draw the masks the uninterrupted run drew.

use burn::module::Module;
use burn::tensor::Device;
use towers_data::PipelineConfig;
use towers_models::{Precision, with_example_dropout, with_precision};
use towers_multigpu::{TowerBatch, TowerLoss, current_first_example};

use super::Trainer;
use super::start::mix;
use crate::error::{Error, Result};
use crate::log::TrainLog;
use crate::source::{BatchSource, TrainInput};
use crate::step::TrainStep;

impl<M: Module + 'static, S: TrainStep<M>> Trainer<M, S> {
    /// The training input from `step`: where `position` stands when the checkpoint saved one
    /// for this rank; otherwise (`Err`: why not) replayed from step 0
    /// (`replay_input_on_resume`) or started afresh under a seed of the step, with a warning
    /// either way.
    pub(super) fn start_input<I: TrainInput>(
        &self,
        input: &I,
        reader_threads: usize,
        step: u64,
        position: std::result::Result<serde_json::Value, String>,
        log: &TrainLog,
    ) -> Result<I::Source> {
        let c = &self.config;
        let config = PipelineConfig {
            reader_threads,
            seed: c.seed,
            corrupt_records: c.corrupt_records(),
            ..PipelineConfig::train(c.batch_size)
        };
        if step == 0 {
            return input.start(config, None);
        }
        let why_not = match position {
            Ok(position) => {
                log.println(&format!(
                    "resuming the input at step {step} from the checkpoint's input position"
                ));
                return input.start(config, Some(&position));
            }
            Err(why_not) => why_not,
        };
        let warning = format!("warning: {why_not}");
        if !c.replay_input_on_resume {
            log.println(&format!(
                "{warning}: the input starts afresh under a seed derived from the step"
            ));
            let seed = mix(c.seed, step);
            return input.start(PipelineConfig { seed, ..config }, None);
        }
        let batches = step * c.towers.accumulation as u64;
        log.println(&format!(
            "{warning}: reading past the {batches} batches its steps consumed"
        ));
        let mut pipeline = input.start(config, None)?;
        for _ in 0..batches {
            next_batch(&mut pipeline)?;
        }
        Ok(pipeline)
    }
}

/// `step`'s loss as the towers take it, its products in `precision` (see
/// [`towers_models::with_precision`]) and its dropout masks drawn per example from streams of
/// `seed`, the `rank` and the example's index in the batch (see
/// [`towers_models::with_example_dropout`]): the same masks in a resumed run, whichever thread
/// runs which tower when, and whatever the number of towers.
pub(super) fn seeded_step<M, S: TrainStep<M>>(
    step: &S,
    seed: u64,
    rank: usize,
    precision: Precision,
) -> impl for<'a> Fn(&M, <S::Batch as TowerBatch>::Part<'a>, &Device) -> TowerLoss + Sync + '_ {
    move |m, part, device| {
        let first = current_first_example().unwrap_or(0);
        with_precision(precision, || {
            with_example_dropout(mix(seed, rank as u64), first, || step.loss(m, part, device))
        })
    }
}

/// The next training batch; the end of the input is an error (training input never ends).
pub(super) fn next_batch<P: BatchSource>(pipeline: &mut P) -> Result<P::Batch> {
    pipeline
        .next_batch()?
        .ok_or_else(|| Error::Config("the training input ended".into()))
}
