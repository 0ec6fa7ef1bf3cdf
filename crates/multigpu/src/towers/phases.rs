//! A step on several towers, as named phases:
//!
//! ```text
//! split -> begin cycle -> plan -> scatter -> hand over -> tower passes (threads) -> keep | apply
//!                                                          apply = reduce -> update -> sync batch norm
//! ```
//!
//! A failure in the tower passes drops the step ([`Towers::fail`]); the phases after them
//! cannot fail, so nothing half-applied is ever left.

use burn::module::Module;
use burn::tensor::{Int, Tensor};
use towers_data::{BatchSlice, HostBatch};

use super::state::{Cycle, PRESENT, State};
use super::tower::{Done, Finish, Job, run_towers};
use super::{StepOutput, Towers, broadcast};
use crate::batch_norm_sync::{self, RunningStats};
use crate::cross_process;
use crate::error::Result;
use crate::loss::IntoTowerLoss;
use crate::reduce::ring;

/// What a step on several towers does, decided before any tower runs.
struct Plan {
    /// Examples per tower since the last update, this micro-batch included.
    examples: Vec<usize>,
    /// Whether this micro-batch ends the cycle with an update.
    apply: bool,
    /// The factor the cycle's summed gradient gets at the update (under accumulation).
    grad_scale: Option<f64>,
    /// Each tower's loss scale: its gradients then sum to the batch's mean gradient (no
    /// accumulation) or to the cycle's summed gradient (accumulation).
    loss_scales: Vec<Option<f64>>,
}

impl<M: Module> Towers<M> {
    /// One step on several towers; see the module docs for the phases.
    pub(super) fn step_towers<F, L>(
        &mut self,
        batch: &HostBatch,
        sizes: &[usize],
        lr: f64,
        loss_fn: &F,
    ) -> Result<StepOutput>
    where
        F: Fn(&M, Tensor<4>, Tensor<1, Int>) -> L + Sync,
        L: IntoTowerLoss,
    {
        let slices = batch.split(sizes)?;
        self.begin_cycle();
        let plan = self.plan(batch.len(), sizes);
        let jobs = self.scatter(slices, &plan, lr);
        self.hand_over();
        let run = run_towers(
            jobs,
            &self.towers,
            &self.layout,
            self.has_running_stats,
            loss_fn,
        );
        let done = match run {
            Ok(done) => done,
            Err(error) => return Err(self.fail(error)),
        };
        let output = step_output(&done, sizes, plan.apply);
        if plan.apply {
            self.apply(done, &plan, lr);
        } else {
            self.keep(done, plan.examples);
        }
        Ok(output)
    }

    /// Begin cycle: at a cycle's first micro-batch, the replicas that run it.
    fn begin_cycle(&mut self) {
        if self.cycle.micro > 0 {
            return;
        }
        self.cycle.work = match &self.state {
            // Clones share the replicas' batch-norm buffers; a failed step re-broadcasts.
            State::ParameterDevice { replicas, .. } => replicas.clone(),
            // Own buffers, so that a failed step leaves the replicas untouched.
            State::AllReduce { replicas, .. } => {
                replicas.iter().map(|r| r.valid().train()).collect()
            }
            State::Single { .. } => unreachable!("step_towers runs on several towers"),
        };
        self.cycle.examples = vec![0; self.towers.len()];
    }

    /// Plan: the towers' weights, and whether this micro-batch ends the cycle.
    fn plan(&self, batch_len: usize, sizes: &[usize]) -> Plan {
        let k = self.config.accumulation;
        let examples: Vec<usize> = (self.cycle.examples.iter().zip(sizes))
            .map(|(a, b)| a + b)
            .collect();
        let cycle_examples: usize = examples.iter().sum();
        let loss_scales = sizes
            .iter()
            .map(|&s| {
                let scale = if k == 1 {
                    s as f64 / batch_len as f64
                } else {
                    s as f64
                };
                (scale != 1.0).then_some(scale)
            })
            .collect();
        Plan {
            examples,
            apply: self.cycle.micro + 1 == k,
            grad_scale: (k > 1).then(|| 1.0 / cycle_examples as f64),
            loss_scales,
        }
    }

    /// Scatter: one job per tower: its replica, slice, kept gradients, and what it does with
    /// its gradients after its pass.
    fn scatter<'a>(
        &mut self,
        slices: Vec<BatchSlice<'a>>,
        plan: &Plan,
        lr: f64,
    ) -> Vec<Job<'a, M>> {
        let finishes = self.finishes(plan, lr);
        let mut sums = std::mem::take(&mut self.cycle.grads).into_iter();
        let work = std::mem::take(&mut self.cycle.work);
        (work.into_iter().zip(slices).zip(&plan.loss_scales))
            .zip(finishes.into_iter().zip(&self.towers))
            .map(|(((replica, slice), &loss_scale), (finish, tower))| Job {
                replica,
                sum: sums.next(),
                slice,
                device: tower.device().clone(),
                stats_device: self.main.clone(),
                loss_scale,
                finish,
            })
            .collect()
    }

    /// What each tower does after its pass: keep its gradients (mid-cycle), send them to the
    /// parameter device, or take its part in the ring all-reduce and update its replica.
    fn finishes(&self, plan: &Plan, lr: f64) -> Vec<Finish> {
        let n = self.towers.len();
        match &self.state {
            _ if !plan.apply => (0..n).map(|_| Finish::Keep).collect(),
            State::ParameterDevice { .. } => {
                (0..n).map(|_| Finish::Gather(self.main.clone())).collect()
            }
            State::AllReduce { optims, .. } => ring(n, self.towers.iter().any(|t| t.is_remote()))
                .into_iter()
                .zip(optims.iter().cloned())
                .map(|(link, optim)| Finish::AllReduce {
                    link,
                    optim,
                    lr,
                    grad_scale: plan.grad_scale,
                })
                .collect(),
            State::Single { .. } => unreachable!("step_towers runs on several towers"),
        }
    }

    /// Keep: a micro-batch that does not end the cycle leaves its replicas and gradient sums
    /// for the next one.
    fn keep(&mut self, done: Vec<Done<M>>, examples: Vec<usize>) {
        self.cycle.micro += 1;
        self.cycle.examples = examples;
        for d in done {
            self.cycle.work.push(d.replica);
            let grads = d
                .grads
                .expect("a tower that keeps its gradients returns them");
            self.cycle.grads.push(grads);
        }
    }

    /// Apply: the update that ends a cycle, then batch-norm statistics in sync.
    fn apply(&mut self, done: Vec<Done<M>>, plan: &Plan, lr: f64) {
        self.cycle = Cycle::default();
        if matches!(self.state, State::ParameterDevice { .. }) {
            self.update_on_parameter_device(done, plan, lr);
        } else {
            self.adopt_all_reduced(done, plan);
        }
    }

    /// Reduce the gathered gradients, update the model on the parameter device, sync batch
    /// norm into it and broadcast it to the towers.
    fn update_on_parameter_device(&mut self, done: Vec<Done<M>>, plan: &Plan, lr: f64) {
        let (grads, stats): (Vec<_>, Vec<_>) = done.into_iter().map(|d| (d.grads, d.stats)).unzip();
        let State::ParameterDevice {
            master,
            optim,
            replicas,
        } = &mut self.state
        else {
            unreachable!("update_on_parameter_device runs under Reduce::ParameterDevice")
        };
        // The replicas go before the update: on the parameter device they share the model's
        // tensors, which the optimizer can then update in place.
        replicas.clear();
        let grads = self
            .layout
            .sum(grads.into_iter().flatten().collect(), &self.main);
        let grads = match plan.grad_scale {
            Some(factor) => self.layout.scale(grads, factor),
            None => grads,
        };
        let examples = plan.examples.iter().sum();
        let processes = self.processes.as_deref();
        let grads =
            cross_process::mean_gradients(processes, &self.layout, grads, examples, &self.main);
        let grads = self.tap.pass(&self.layout, grads);
        let mut model = optim.step(lr, master.take().expect(PRESENT), grads);
        if let Some(stats) = self.synced_stats(stats, plan) {
            model = batch_norm_sync::write(model, &stats);
        }
        let model = self.stats_across_processes(model, examples);
        let State::ParameterDevice {
            master, replicas, ..
        } = &mut self.state
        else {
            unreachable!()
        };
        *replicas = broadcast(&model, &self.towers);
        *master = Some(model);
    }

    /// Take the replicas the ring updated, with their batch-norm statistics in sync.
    fn adopt_all_reduced(&mut self, done: Vec<Done<M>>, plan: &Plan) {
        let mut replicas = Vec::with_capacity(done.len());
        let mut optims = Vec::with_capacity(done.len());
        let mut stats = Vec::with_capacity(done.len());
        for d in done {
            replicas.push(d.replica);
            optims.extend(d.optim);
            stats.push(d.stats);
        }
        if let Some(stats) = self.synced_stats(stats, plan) {
            replicas = (replicas.into_iter())
                .map(|r| batch_norm_sync::write(r, &stats))
                .collect();
        }
        self.state = State::AllReduce { replicas, optims };
    }

    /// Sync batch norm: the towers' statistics combined as the config says, when the model
    /// has any.
    fn synced_stats(&self, stats: Vec<Option<RunningStats>>, plan: &Plan) -> Option<RunningStats> {
        let stats: Vec<RunningStats> = stats.into_iter().flatten().collect();
        (self.has_running_stats)
            .then(|| (self.config.batch_norm).combine(stats, &plan.examples, &self.main))
    }
}

/// The step's losses and counts, from the towers' results.
fn step_output<M>(done: &[Done<M>], sizes: &[usize], updated: bool) -> StepOutput {
    let examples: usize = sizes.iter().sum();
    let weighted: f64 = done
        .iter()
        .zip(sizes)
        .map(|(d, &s)| d.loss * s as f64)
        .sum();
    StepOutput {
        loss: weighted / examples as f64,
        tower_losses: done.iter().map(|d| d.loss).collect(),
        examples,
        correct: done.iter().map(|d| d.correct).sum(),
        updated,
    }
}
