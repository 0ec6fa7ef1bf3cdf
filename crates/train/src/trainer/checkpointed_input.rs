//! What a checkpoint keeps of the job's input ([`JobInput`]): the world that read it, the
//! examples trained on, every rank's input position; and where each rank's input starts from
//! it on resume: its own position on the same number of ranks, or its block of the epoch in
//! progress re-cut for another number (see [`TrainInput::recut`]). Either way in time
//! independent of the step: nothing is replayed.

use burn::module::Module;
use serde::{Deserialize, Serialize};
use towers_data::PipelineConfig;

use super::Trainer;
use crate::error::{Error, Result};
use crate::log::TrainLog;
use crate::step::TrainStep;
use crate::train_input::TrainInput;

/// What a checkpoint keeps of the job's input, alone or under MPI.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct JobInput {
    /// The ranks of the job that wrote it (1 alone).
    pub ranks: usize,
    /// Rank 0's towers.
    pub towers_per_rank: usize,
    /// Examples per update over all ranks.
    pub global_batch: u64,
    /// Examples trained on so far, over all ranks: what the learning rate follows.
    pub examples: u64,
    /// Every rank's input position, in rank order, as its source wrote it.
    pub rank_positions: Vec<serde_json::Value>,
}

impl JobInput {
    /// A checkpoint's `input` section read back; `None` (a checkpoint of another tool) or a
    /// section of another shape is an error naming the step.
    pub(super) fn from_checkpoint(input: Option<serde_json::Value>, step: u64) -> Result<Self> {
        let bad = |why: String| Error::Config(format!("the checkpoint of step {step} {why}"));
        let input = input.ok_or_else(|| bad("holds no input position: it cannot resume".into()))?;
        let saved: Self = serde_json::from_value(input)
            .map_err(|e| bad(format!("holds an input section of another shape: {e}")))?;
        if saved.rank_positions.len() != saved.ranks {
            return Err(bad(format!(
                "holds {} input positions for {} ranks",
                saved.rank_positions.len(),
                saved.ranks
            )));
        }
        Ok(saved)
    }
}

impl<M: Module + 'static, S: TrainStep<M>> Trainer<M, S> {
    /// What a checkpoint keeps of the input after `examples`: this process's `position`, or
    /// under MPI every rank's, gathered. Every rank calls this at the same steps.
    pub(super) fn checkpoint_input(
        &self,
        position: serde_json::Value,
        towers: usize,
        examples: u64,
    ) -> serde_json::Value {
        let rank_positions = match self.processes.as_ref().filter(|p| p.size() > 1) {
            None => vec![position],
            Some(p) => {
                let mine = serde_json::to_vec(&position).expect("JSON always serializes");
                (p.all_gather("the input positions", &mine).iter())
                    .map(|bytes| serde_json::from_slice(bytes).expect("every rank sent JSON"))
                    .collect()
            }
        };
        let saved = JobInput {
            ranks: self.ranks(),
            towers_per_rank: towers,
            global_batch: self.global_examples_per_step(),
            examples,
            rank_positions,
        };
        serde_json::to_value(saved).expect("JSON always serializes")
    }

    /// Where this rank's input starts after `saved` (the checkpoint of `step`): its own
    /// position when the job has as many ranks as the one that saved it, else its block of the
    /// re-cut epoch, said in the log with what changed (this rank has `towers`).
    pub(super) fn resumed_position<I: TrainInput>(
        &self,
        input: &I,
        config: &PipelineConfig,
        (saved, step): (&JobInput, u64),
        towers: usize,
        log: &TrainLog,
    ) -> Result<serde_json::Value> {
        if saved.ranks == self.ranks() {
            log.println(&format!(
                "resuming the input at step {step} from the checkpoint's input position"
            ));
            return Ok(saved.rank_positions[self.rank()].clone());
        }
        let (position, first) = input.recut(config, &saved.rank_positions)?;
        log.println(&self.world_change(saved, towers, first));
        Ok(position)
    }

    /// What the log says of a resume on another world size: the world and the global batch
    /// before and after, the re-cut epoch, and the learning rate by examples.
    fn world_change(&self, saved: &JobInput, towers_now: usize, first: usize) -> String {
        let ranks = |n: usize| format!("{n} rank{}", if n == 1 { "" } else { "s" });
        let (before, now) = (saved.global_batch, self.global_examples_per_step());
        format!(
            "warning: world size changed: {} -> {} (towers per rank {} -> {}; global batch \
             {before} -> {now}): the epoch in progress is re-cut: the records the old ranks had not read of \
             it are dealt among the new ranks, each read once (rank {} reads its {first} first), \
             then every rank reads its share; the learning rate follows the {} examples seen \
             (step {:.2} at the new global batch)",
            ranks(saved.ranks),
            ranks(self.ranks()),
            saved.towers_per_rank,
            towers_now,
            self.rank(),
            saved.examples,
            saved.examples as f64 / now as f64,
        )
    }
}
