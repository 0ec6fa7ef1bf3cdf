//! The run's input from its first step: from its start, or where a checkpoint's input stands
//! (in time independent of the step); and the per-tower dropout streams that make a resumed
//! step draw the masks the uninterrupted run drew.

use burn::module::Module;
use burn::tensor::Device;
use towers_data::{PipelineConfig, Share};
use towers_kernels::{Precision, with_precision};
use towers_models::with_example_dropout;
use towers_multigpu::{TowerBatch, TowerLoss, current_first_example};

use super::Trainer;
use super::checkpointed_input::JobInput;
use super::start::mix;
use crate::error::{Error, Result};
use crate::log::TrainLog;
use crate::step::TrainStep;
use crate::train_input::{BatchSource, TrainInput};

impl<M: Module + 'static, S: TrainStep<M>> Trainer<M, S> {
    /// The training input: from its start for a fresh run, else where the checkpoint's
    /// `saved` input of its step stands for this rank (see `checkpointed_input.rs`; `towers`, this
    /// rank's, for the log).
    pub(super) fn start_input<I: TrainInput>(
        &self,
        input: &I,
        reader_threads: usize,
        saved: Option<(&JobInput, u64)>,
        towers: usize,
        log: &TrainLog,
    ) -> Result<I::Source> {
        let c = &self.config;
        let queue = PipelineConfig::train(c.batch_size);
        let shuffle = queue.shuffle.filter(|_| c.shuffle_queue);
        let config = queue
            .with_reader_threads(reader_threads)
            .with_seed(c.seed)
            .with_corrupt_records(c.corrupt_records())
            .with_share(Share::new(self.rank(), self.ranks()))
            .with_shuffle(shuffle);
        let position = match saved {
            Some(saved) => Some(self.resumed_position(input, &config, saved, towers, log)?),
            None => None,
        };
        input.start(config, position.as_ref())
    }
}

/// `step`'s loss as the towers take it, its products in `precision` (see
/// [`towers_kernels::with_precision`]) and its dropout masks drawn per example from streams of
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
    pipeline.next_batch()?.ok_or(Error::InputEnded)
}
