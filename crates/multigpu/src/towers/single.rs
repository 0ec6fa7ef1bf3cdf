//! A step with one tower on the model's own device: a plain Burn step on the calling thread,
//! with no replica, no thread and no copy.

use std::panic::{self, AssertUnwindSafe};

use burn::module::Module;
use burn::optim::GradientsParams;
use burn::tensor::{Int, Tensor};
use towers_data::HostBatch;

use super::state::{Cycle, PRESENT, State};
use super::tower::{backward_pass, tower_failed, tower_panicked};
use super::{StepOutput, Towers};
use crate::batch_norm_sync;
use crate::cross_process;
use crate::error::Result;
use crate::loss::IntoTowerLoss;
use crate::tower_index::on_tower;

impl<M: Module> Towers<M> {
    /// Forward, loss and backward on the model itself, then the update (or, under
    /// accumulation, the gradient kept for the cycle's last micro-batch).
    pub(super) fn step_single<F, L>(
        &mut self,
        batch: &HostBatch,
        lr: f64,
        loss_fn: &F,
    ) -> Result<StepOutput>
    where
        F: Fn(&M, Tensor<4>, Tensor<1, Int>) -> L,
        L: IntoTowerLoss,
    {
        let k = self.config.accumulation;
        // Under accumulation a micro-batch's gradient is weighed by its size; the sum is divided
        // once at the update.
        let loss_scale = (k > 1).then_some(batch.len() as f64);
        let (x, y) = batch.as_slice().to_tensors(&self.main);
        let pass = panic::catch_unwind(AssertUnwindSafe(|| {
            on_tower(0, || backward_pass(self.model(), x, y, loss_scale, loss_fn))
        }));
        let pass = match pass {
            Ok(Ok(pass)) => pass,
            Ok(Err(message)) => return Err(self.fail(tower_failed(0, &self.towers[0], message))),
            Err(panic) => return Err(self.fail(tower_panicked(0, &self.towers[0], panic))),
        };
        if self.has_running_stats {
            batch_norm_sync::commit(self.model());
        }
        let output = StepOutput {
            loss: pass.loss,
            tower_losses: vec![pass.loss],
            examples: batch.len(),
            correct: pass.correct,
            updated: self.cycle.micro + 1 == k,
        };
        // This update's examples: the cycle's so far and this micro-batch.
        let examples = self.cycle.examples.iter().sum::<usize>() + batch.len();
        let grads = if k == 1 {
            pass.grads
        } else {
            match self.accumulate_single(pass.grads, batch.len(), output.updated) {
                Some(grads) => grads,
                None => return Ok(output),
            }
        };
        self.update_single(grads, examples, lr);
        Ok(output)
    }

    /// Adds a micro-batch's gradient to the cycle's sum: the cycle's mean gradient when this
    /// micro-batch ends the cycle, `None` (the sum kept) otherwise.
    fn accumulate_single(
        &mut self,
        grads: GradientsParams,
        examples: usize,
        ends_cycle: bool,
    ) -> Option<GradientsParams> {
        let device = self.towers[0].device();
        let grads = match self.cycle.grads.pop() {
            Some(sum) => self.layout.sum(vec![sum, grads], device),
            None => grads,
        };
        self.cycle.micro += 1;
        self.cycle.examples.resize(1, 0);
        self.cycle.examples[0] += examples;
        if !ends_cycle {
            self.cycle.grads.push(grads);
            return None;
        }
        let grads = self
            .layout
            .scale(grads, 1.0 / self.cycle.examples[0] as f64);
        self.cycle = Cycle::default();
        Some(grads)
    }

    /// One optimizer step on the model, with the gradient (and then the batch-norm statistics)
    /// of all ranks when there are several.
    fn update_single(&mut self, grads: GradientsParams, examples: usize, lr: f64) {
        let processes = self.processes.as_deref();
        let grads =
            cross_process::mean_gradients(processes, &self.layout, grads, examples, &self.main);
        let grads = self.tap.pass(&self.layout, grads);
        let State::Single { model, optim } = &mut self.state else {
            unreachable!("update_single runs on one tower")
        };
        let updated = optim.step(lr, model.take().expect(PRESENT), grads);
        let updated = self.stats_across_processes(updated, examples);
        let State::Single { model, .. } = &mut self.state else {
            unreachable!()
        };
        *model = Some(updated);
    }
}
