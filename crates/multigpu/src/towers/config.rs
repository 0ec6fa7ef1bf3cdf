//! [`TowersConfig`]: how the towers reduce, sync batch norm and accumulate; [`StepOutput`]:
//! what a step did.

use std::time::Duration;

use burn::config::Config;

use crate::error::{Error, Result};
use crate::loss_scale::LossScaling;
use crate::reduce::Reduce;
use crate::running_state::{BatchNormSync, RunningStates};
#[cfg(doc)]
use crate::towers::Towers;

/// How the towers reduce, keep batch norm in sync and accumulate.
///
/// Built as Burn's configs are: [`TowersConfig::new`] (every setting at its default; also
/// [`Default`]) and a `with_*` per setting, e.g.
/// `TowersConfig::new().with_reduce(Reduce::AllReduce).with_accumulation(4)`; serde and
/// `Display` (JSON) come with it. New settings arrive with defaults, so adding one breaks no
/// caller (`#[non_exhaustive]`: built only through `new`).
#[derive(Config, Debug, PartialEq)]
#[non_exhaustive]
pub struct TowersConfig {
    /// How gradients become one update.
    #[config(default = "Reduce::ParameterDevice")]
    pub reduce: Reduce,
    /// What happens to running state (batch-norm statistics and the like) after each update.
    #[config(default = "BatchNormSync::Average")]
    pub batch_norm: BatchNormSync,
    /// Which tensors are running state: by default every untrained tensor that the first
    /// step changes.
    #[config(default = "RunningStates::Changed")]
    pub running_states: RunningStates,
    /// The size of the flat buckets gradients move between devices in: to the parameter
    /// device (from towers on other devices), and round the ring all-reduce, which moves one
    /// chunk of each bucket per round. One copy per bucket instead of one per parameter. 25 MB
    /// by default, as PyTorch DDP; 0: a bucket per gradient. Towers that all compute in host
    /// memory (flex, ndarray, the model's device too) move a gradient at a time whatever this
    /// says: there packing only adds a pass over the gradient (`bench_reduce`: a 2-replica ring
    /// of 96 MB 14.7 ms per tensor, 23.4 ms in buckets). The exchange across ranks has its own
    /// (e.g. `MpiConfig::bucket_bytes`).
    #[config(default = "25 << 20")]
    pub bucket_bytes: usize,
    /// Micro-batches per update (at least 1). With `k`, every `k`-th call to
    /// [`Towers::step`] applies one update with the gradient of all `k` micro-batches taken as
    /// one batch: each example weighs the same, whatever the micro-batch sizes.
    #[config(default = 1)]
    pub accumulation: usize,
    /// Whether the exchange of gradients across ranks (see
    /// [`Towers::across_processes`]) overlaps backward: each bucket of gradients travels as
    /// soon as backward has finished it on every tower, while backward goes on (see
    /// `overlap.rs`). On by default, as in PyTorch DDP and Horovod: with the ranks' bytes on a
    /// link it beats exchanging after backward (Inception v3, 2 ranks on 2 cores, loopback
    /// shaped to 10 Gbit/s; at 25 Gbit/s it won one sitting and lost the next;
    /// bench/README.md). The exchange's own CPU work comes out of backward where backward
    /// fills every core, so where the exchange is mostly that (ranks sharing one machine over
    /// loopback, no link) it costs more than it hides: use towers within a machine, or turn
    /// it off. Off: the ranks exchange after backward, which a loss function returning its own
    /// gradients needs.
    #[config(default = true)]
    pub overlap: bool,
    /// Under [`Reduce::AllReduce`], every how many updates the replicas are compared with
    /// replica 0 and given its weights if they differ (see [`Towers::check_replicas`]); 0:
    /// never by itself. 100 by default.
    #[config(default = 100)]
    pub replica_check: usize,
    /// How long a step waits for its towers before naming the ones still running on stderr,
    /// and again each time this passes. 300 s by default. Not a single tower, which runs on
    /// the calling thread as a plain step.
    #[config(default = "Duration::from_secs(300)")]
    pub tower_deadline: Duration,
    /// How long a step waits for its towers before it ends the process with an error naming
    /// the ones still running (exit code [`HUNG_TOWER_EXIT_CODE`]): a device call that hangs
    /// cannot be interrupted, and the step cannot return while the tower borrows its batch.
    /// `None` (the default): it waits on, naming them every [`tower_deadline`](Self::tower_deadline).
    ///
    /// [`HUNG_TOWER_EXIT_CODE`]: crate::HUNG_TOWER_EXIT_CODE
    pub tower_timeout: Option<Duration>,
    /// Dynamic loss scaling (see [`LossScaling`]), for products in f16; none by default.
    pub loss_scaling: Option<LossScaling>,
}

impl Default for TowersConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl TowersConfig {
    /// [`Error::Config`] naming the first setting that cannot work: no micro-batch per update,
    /// a zero [`tower_deadline`](Self::tower_deadline) (the wait for the towers would spin,
    /// naming them without pause) or a zero [`tower_timeout`](Self::tower_timeout) (every
    /// step's towers late at once, the process ended at the first), or loss scaling that
    /// [`LossScaling::check`](crate::LossScaling::check) refuses.
    pub fn validate(&self) -> Result<()> {
        let fail = |message: &str| Err(Error::Config(message.into()));
        if self.accumulation == 0 {
            return fail("accumulation must be at least 1 micro-batch");
        }
        if self.tower_deadline.is_zero() {
            return fail("tower_deadline must be longer than zero");
        }
        if self.tower_timeout.is_some_and(|t| t.is_zero()) {
            return fail("tower_timeout must be longer than zero (None: no timeout)");
        }
        if let Some(scaling) = &self.loss_scaling {
            scaling.check().map_err(Error::Config)?;
        }
        Ok(())
    }
}

/// What one call to [`Towers::step`] did.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct StepOutput {
    /// Mean loss over the batch: the towers' losses weighted by their parts' weights (see
    /// [`TowerBatch::weights`](crate::TowerBatch::weights)), which is the loss one device
    /// would report for the whole batch.
    pub loss: f64,
    /// Each tower's mean loss over its part, in device order.
    pub tower_losses: Vec<f64>,
    /// Examples in the batch.
    pub examples: usize,
    /// The batch's weight: its examples, or what its loss is averaged over.
    pub weight: f64,
    /// Correct predictions in the batch, when the loss function gave predictions.
    pub correct: Option<usize>,
    /// The loss function's named metrics, each its mean over the batch weighted like the loss.
    pub metrics: Vec<(String, f64)>,
    /// Whether this call ended a cycle with an update (every call, or every
    /// `accumulation`-th), or with the update skipped (see [`skipped`](Self::skipped)).
    pub updated: bool,
    /// Whether this call ended a cycle but skipped its update: a gradient overflowed under
    /// [`TowersConfig::loss_scaling`], whose scale was then halved.
    pub skipped: bool,
    /// The comparison of the replicas, when this update ran one (see
    /// [`TowersConfig::replica_check`]).
    pub replica_check: Option<ReplicaCheck>,
}

/// What comparing the replicas found ([`Towers::check_replicas`]).
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct ReplicaCheck {
    /// The largest difference between a replica's checksum (per parameter tensor, the sum of
    /// its values and the sum weighted by their places) and replica 0's: 0 when they agree.
    pub max_difference: f64,
    /// Whether the replicas differed, and so were given replica 0's weights.
    pub rebroadcast: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_that_cannot_work_are_errors_naming_them() {
        assert!(TowersConfig::default().validate().is_ok());
        let cases = [
            (
                TowersConfig {
                    accumulation: 0,
                    ..Default::default()
                },
                "accumulation",
            ),
            (
                TowersConfig::default().with_tower_deadline(Duration::ZERO),
                "tower_deadline",
            ),
            (
                TowersConfig::default().with_tower_timeout(Some(Duration::ZERO)),
                "tower_timeout",
            ),
        ];
        for (config, setting) in cases {
            let message = config.validate().unwrap_err().to_string();
            assert!(message.contains(setting), "{message}");
        }
    }
}
