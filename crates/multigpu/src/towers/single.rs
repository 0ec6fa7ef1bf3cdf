//! A step with one tower on the model's own device: a plain Burn step on the calling thread,
//! with no replica, no thread and no copy.

use std::panic::{self, AssertUnwindSafe};

use burn::module::Module;
use burn::optim::GradientsParams;
use burn::tensor::Device;

use super::between_steps::{Cycle, State};
use super::tower::{backward_pass, tower_failed, tower_panicked};
use super::who_updates::Update;
use super::{StepOutput, Towers};
use crate::batch::TowerBatch;
use crate::cross_process;
use crate::error::Result;
use crate::loss::IntoTowerLoss;
use crate::running_state::{self, Detection};
use crate::timeline::Track;
use crate::tower_index::on_tower;

impl<M: Module> Towers<M> {
    /// Forward, loss and backward on the model itself, then the update (or, under
    /// accumulation, the gradient kept for the cycle's last micro-batch).
    pub(super) fn step_single<B, F, L>(
        &mut self,
        batch: &B,
        weight: f64,
        mut update: Update<'_, M>,
        loss_fn: &F,
        detection: Option<Detection>,
    ) -> Result<StepOutput>
    where
        B: TowerBatch,
        F: for<'a> Fn(&M, B::Part<'a>, &Device) -> L,
        L: IntoTowerLoss,
    {
        let k = self.config.accumulation;
        let ends_cycle = self.micro_batch_ends_cycle();
        // This update's weight: the cycle's so far and this micro-batch's.
        let update_weight = self.cycle.weight + weight;
        // An overlapped exchange takes the gradients during backward (see `overlap.rs`).
        let exchange = match ends_cycle && self.overlaps() {
            true => {
                let kept = self.cycle.grads.drain(..).collect();
                let started = self.start_exchange(kept, update_weight);
                Some(started.map_err(|error| self.fail(error))?)
            }
            false => None,
        };
        let (exchange, tap) = match exchange {
            Some((exchange, mut taps)) => (Some(exchange), taps.pop()),
            None => (None, None),
        };
        // Under accumulation, or when the ranks exchange the sum, a micro-batch's gradient is
        // weighed by its weight; the sum is divided once at the update.
        let loss_scale = match (k > 1 || exchange.is_some(), self.loss_scale()) {
            (true, scale) => Some(weight * scale.unwrap_or(1.0)),
            (false, scale) => scale,
        };
        let pass = panic::catch_unwind(AssertUnwindSafe(|| {
            let part = batch.split(&[batch.len()]).pop();
            let part = part.ok_or_else(|| "the batch's split gave no part".to_string())?;
            let tapped = tap.as_ref().map(|tap| (tap, &self.slots));
            let timeline = (&self.timeline, Track::Tower(0));
            on_tower(0, 0, || {
                let pass = backward_pass(
                    (self.model(), &self.layout),
                    part,
                    &self.main,
                    loss_scale,
                    tapped,
                    timeline,
                    loss_fn,
                )?;
                // The step's one read (see `host_syncs.rs`).
                Ok((pass.grads, pass.out.read_values()?))
            })
        }));
        drop(tap);
        let reduced = exchange.map(|exchange| self.finish_exchange(exchange));
        let pass = match pass {
            Ok(Ok(pass)) => Ok(pass),
            Ok(Err(message)) => Err(tower_failed(0, &self.towers[0], message)),
            Err(panic) => Err(tower_panicked(0, &self.towers[0], panic)),
        };
        // A failure on any rank fails the step on every rank.
        let outcome = pass.and_then(|pass| Ok((pass, reduced.transpose()?)));
        let ((grads, values), reduced) = match self.agreed_by_ranks(outcome) {
            Ok(agreed) => agreed,
            Err(error) => return Err(self.fail(error)),
        };
        if self.has_running_stats {
            running_state::commit(self.model());
        }
        if let Some(detection) = detection {
            let running = detection.decide(self.model(), &self.config.running_states);
            self.set_running_state(running);
        }
        let mut output = StepOutput {
            loss: values.loss,
            tower_losses: vec![values.loss],
            examples: batch.len(),
            weight,
            correct: values.correct,
            metrics: values.metrics,
            updated: ends_cycle,
            skipped: false,
            replica_check: None,
        };
        let grads = match (reduced, grads) {
            (Some(reduced), _) => {
                self.cycle = Cycle::default();
                reduced
            }
            (None, Some(grads)) if k == 1 => self.mean_over_ranks(grads, update_weight),
            (None, Some(grads)) => match self.accumulate_single(grads, weight, ends_cycle) {
                Some(grads) => self.mean_over_ranks(grads, update_weight),
                None => return Ok(output),
            },
            (None, None) => unreachable!("only a tap takes the gradients"),
        };
        let timeline = self.timeline.clone();
        let _update = timeline.span("update", Track::Main);
        output.skipped = self.update_single(grads, update_weight, &mut update);
        Ok(output)
    }

    /// Adds a micro-batch's gradient to the cycle's sum: the cycle's mean gradient when this
    /// micro-batch ends the cycle, `None` (the sum kept) otherwise.
    fn accumulate_single(
        &mut self,
        grads: GradientsParams,
        weight: f64,
        ends_cycle: bool,
    ) -> Option<GradientsParams> {
        let device = self.towers[0].device();
        let grads = match self.cycle.grads.pop() {
            Some(sum) => self.layout.sum(vec![sum, grads], device),
            None => grads,
        };
        self.cycle.micro += 1;
        self.cycle.weight += weight;
        if !ends_cycle {
            self.cycle.grads.push(grads);
            return None;
        }
        let grads = self.layout.scale(grads, 1.0 / self.cycle.weight);
        self.cycle = Cycle::default();
        Some(grads)
    }

    /// The mean over the ranks' examples of this rank's mean gradient over `weight`, when there
    /// are other ranks (`None` when that is not finite).
    fn mean_over_ranks(&self, grads: GradientsParams, weight: f64) -> Option<GradientsParams> {
        let processes = self.processes.as_deref();
        cross_process::mean_gradients(processes, &self.layout, grads, weight, &self.main)
    }

    /// One optimizer step on the model with the update's gradient (unless it is skipped, which
    /// it returns; `None`: the exchange gave no finite gradient), then the batch-norm statistics
    /// of all ranks when there are several (`weight` is this update's).
    fn update_single(
        &mut self,
        grads: Option<GradientsParams>,
        weight: f64,
        update: &mut Update<'_, M>,
    ) -> bool {
        let (updated, skipped) = self.updated(grads, update);
        let updated = self.stats_across_processes(updated, weight);
        let State::Single { model, .. } = &mut self.state else {
            unreachable!()
        };
        *model = Some(updated);
        skipped
    }
}
