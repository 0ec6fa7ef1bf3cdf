//! A step on several towers, as named phases:
//!
//! ```text
//! split -> begin cycle -> plan -> [start exchange] -> scatter -> hand over -> tower passes (workers)
//!       -> [finish exchange] -> keep | apply -> [read tower 0's values]
//!                                  apply = reduce -> update -> sync batch norm
//! ```
//!
//! Where nothing is to happen to the reduced gradient before the optimizer takes it, the
//! reduction joins the update: the optimizer sums each parameter's gradients just before its
//! update (`summed_in_update`).
//!
//! The exchange across ranks, when it overlaps backward (`overlap.rs`), starts before the
//! towers and ends after them; it then replaces the reduction. A failure in the tower passes
//! or the exchange drops the step ([`Towers::fail`]); the phases after them cannot fail, so
//! nothing half-applied is ever left. The one exception: when tower 0 runs on the calling
//! thread (see "Threads" in the module docs), its values are read last, and a read that fails
//! there (the model's device failed) fails the step after its update.

use std::panic::{self, AssertUnwindSafe};

use burn::module::Module;
use burn::tensor::Device;

use burn::optim::{GradientsParams, MultiGradientsParams};

use super::between_steps::{Cycle, State};
use super::tower::{Context, Done, Finish, Job, Values, run_towers, tower_failed, tower_panicked};
use super::who_updates::Update;
use super::{StepOutput, Towers, broadcast};
use crate::batch::TowerBatch;
use crate::cross_process;
use crate::devices::{TowerDevice, in_host_memory, read_hands_over};
use crate::error::{Error, Result};
use crate::gradient_tap::Tap;
use crate::loss::{IntoTowerLoss, LossValues};
use crate::reduce::all_reduce_links;
use crate::running_state::{self, Detection, RunningStats};
use crate::timeline::Track;

/// What a step on several towers does, decided before any tower runs.
struct Plan {
    /// The weight (see [`TowerBatch::weights`]) of every micro-batch since the last update,
    /// this one included.
    weight: f64,
    /// The same per tower: its parts' weights since the last update, this one's included.
    part_weights: Vec<f64>,
    /// Whether this micro-batch ends the cycle with an update.
    apply: bool,
    /// Whether that update's exchange across ranks overlaps this micro-batch's backward.
    overlapped: bool,
    /// The factor the cycle's summed gradient gets at the update (under accumulation).
    grad_scale: Option<f64>,
    /// Each tower's loss scale: its gradients then sum to the batch's mean gradient (no
    /// accumulation) or to the cycle's gradient summed with each part's weight (accumulation,
    /// or an overlapped exchange, which divides by the weights of all ranks).
    loss_scales: Vec<Option<f64>>,
}

impl<M: Module> Towers<M> {
    /// One step on several towers; see the module docs for the phases.
    pub(super) fn step_towers<B, F, L>(
        &mut self,
        batch: &B,
        sizes: &[usize],
        mut update: Update<'_, M>,
        loss_fn: &F,
        detection: Option<Detection>,
    ) -> Result<StepOutput>
    where
        B: TowerBatch,
        F: for<'a> Fn(&M, B::Part<'a>, &Device) -> L + Sync,
        L: IntoTowerLoss,
    {
        let parts = batch.split(sizes);
        if parts.len() != sizes.len() {
            return Err(Error::Batch(format!(
                "the batch's split into {sizes:?} gave {} parts",
                parts.len()
            )));
        }
        let weights = checked_weights(batch, sizes)?;
        self.begin_cycle();
        let plan = self.plan(&weights);
        let (exchange, taps) = match plan.overlapped {
            true => {
                let kept = std::mem::take(&mut self.cycle.grads);
                let (exchange, taps) =
                    (self.start_exchange(kept, plan.weight)).map_err(|error| self.fail(error))?;
                (Some(exchange), taps.into_iter().map(Some).collect())
            }
            false => (None, (0..sizes.len()).map(|_| None).collect()),
        };
        let first_here = self.tower_0_here();
        let jobs = self.scatter(parts, sizes, taps, (&plan, &update), first_here);
        self.hand_over();
        let context = Context {
            layout: &self.layout,
            slots: &self.slots,
            running: &self.running,
            has_running_stats: self.has_running_stats,
            timeline: &self.timeline,
            decay: &self.decay,
        };
        let workers = self.workers.as_ref().expect("several towers have workers");
        let patience = self.patience();
        let towers = (workers, self.towers.as_slice());
        let run = run_towers(jobs, towers, context, (patience, first_here), loss_fn);
        // Every rank must finish the exchange it started, whatever happened here, and then
        // fails the step if any rank's failed.
        let reduced = exchange.map(|exchange| self.finish_exchange(exchange));
        let outcome = (run.and_then(|done| self.same_metrics(done)))
            .and_then(|done| Ok((done, reduced.transpose()?)));
        let (done, reduced) = match self.agreed_by_ranks(outcome) {
            Ok(agreed) => agreed,
            Err(error) => return Err(self.fail(error)),
        };
        let (done, values): (Vec<_>, Vec<_>) = done.into_iter().unzip();
        if let Some(detection) = detection {
            let running = detection.decide(&done[0].replica, &self.config.running_states);
            self.set_running_state(running);
        }
        let updated = plan.apply;
        let (skipped, replica_check) = if updated {
            let timeline = self.timeline.clone();
            let _update = timeline.span("update", Track::Main);
            let skipped = self.apply(done, &plan, &mut update, reduced);
            match self.scheduled_replica_check() {
                Ok(check) => (skipped, check),
                Err(error) => return Err(self.fail(error)),
            }
        } else {
            self.keep(done, plan);
            (false, None)
        };
        let values = match self.read_at_end(values) {
            Ok(values) => values,
            Err(error) => return Err(self.fail(error)),
        };
        // That read handed over all this thread queued on the model's device, when tower 0 ran
        // here: the next step's hand-over can leave that device out.
        self.main_handed_over = first_here && read_hands_over(&self.main);
        Ok(StepOutput {
            skipped,
            replica_check,
            ..step_output(&values, sizes, &weights, updated)
        })
    }

    /// The towers' loss values, tower 0's read now when it ran on this thread: the read then
    /// hands over the update (and all else this thread queued on the model's device) too.
    fn read_at_end(&self, values: Vec<Values>) -> Result<Vec<LossValues>> {
        let mut read = Vec::with_capacity(values.len());
        for (i, values) in values.into_iter().enumerate() {
            let tower = &self.towers[i];
            let values = panic::catch_unwind(AssertUnwindSafe(|| values.read()))
                .map_err(|panic| tower_panicked(i, tower, panic))?
                .map_err(|error| tower_failed(i, tower, error))?;
            read.push(values);
        }
        Ok(read)
    }

    /// Whether tower 0 runs on the calling thread: when it computes on the model's own
    /// (local) device and the parameter device updates the model there, so that one read
    /// at the step's end hands over its pass and the update together (see "Threads" in the
    /// module docs).
    fn tower_0_here(&self) -> bool {
        let tower = &self.towers[0];
        matches!(self.state, State::ParameterDevice { .. })
            && tower.device() == &self.main
            && !tower.is_remote()
    }

    /// The towers' results, when every tower reported the same metrics (tower 0's names, in
    /// its order); the first tower that did not is named.
    fn same_metrics(&self, done: Vec<(Done<M>, Values)>) -> Result<Vec<(Done<M>, Values)>> {
        let names = |d: &(Done<M>, Values)| d.1.metric_names();
        let first = names(&done[0]);
        match done.iter().position(|d| names(d) != first) {
            None => Ok(done),
            Some(i) => Err(tower_failed(
                i,
                &self.towers[i],
                format!(
                    "the loss reported metrics {:?}, tower 0's {first:?}: every tower must \
                     report the same",
                    names(&done[i])
                )
                .into(),
            )),
        }
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
        self.cycle.weight = 0.0;
        self.cycle.part_weights = vec![0.0; self.towers.len()];
    }

    /// Plan: the towers' loss scales from their parts' weights, and whether this micro-batch
    /// ends the cycle.
    fn plan(&self, weights: &[f64]) -> Plan {
        let k = self.config.accumulation;
        let part_weights = (self.cycle.part_weights.iter().zip(weights))
            .map(|(a, b)| a + b)
            .collect();
        let batch_weight: f64 = weights.iter().sum();
        let weight = self.cycle.weight + batch_weight;
        let apply = self.micro_batch_ends_cycle();
        let overlapped = apply && self.overlaps();
        let loss_scale = self.loss_scale().unwrap_or(1.0);
        let loss_scales = (weights.iter())
            .map(|&w| {
                let scale = if k == 1 && !overlapped {
                    w / batch_weight
                } else {
                    w
                };
                let scale = scale * loss_scale;
                (scale != 1.0).then_some(scale)
            })
            .collect();
        Plan {
            weight,
            part_weights,
            apply,
            overlapped,
            grad_scale: (k > 1).then(|| 1.0 / weight),
            loss_scales,
        }
    }

    /// Scatter: one job per tower: its replica, slice, kept gradients, and what it does with
    /// its gradients after its pass.
    fn scatter<P>(
        &mut self,
        parts: Vec<P>,
        sizes: &[usize],
        taps: Vec<Option<Tap>>,
        (plan, update): (&Plan, &Update<'_, M>),
        first_here: bool,
    ) -> Vec<Job<M, P>> {
        let mut finishes = self.finishes(plan, update).into_iter();
        let mut sums = std::mem::take(&mut self.cycle.grads).into_iter();
        let mut work = std::mem::take(&mut self.cycle.work).into_iter();
        let mut taps = taps.into_iter();
        let mut first_example = 0;
        let mut jobs = Vec::with_capacity(parts.len());
        for (i, part) in parts.into_iter().enumerate() {
            jobs.push(Job {
                replica: work.next().expect("a replica per tower"),
                first_example,
                sum: sums.next(),
                part,
                device: self.towers[i].device().clone(),
                stats_device: self.main.clone(),
                loss_scale: plan.loss_scales[i],
                tap: taps.next().flatten(),
                finish: finishes.next().expect("a finish per tower"),
                read_at_end: first_here && i == 0,
            });
            first_example += sizes[i];
        }
        jobs
    }

    /// What each tower does after its pass: keep its gradients (mid-cycle), send them to the
    /// parameter device, or take its part in the all-reduce and update its replica.
    fn finishes(&self, plan: &Plan, update: &Update<'_, M>) -> Vec<Finish> {
        let n = self.towers.len();
        match &self.state {
            _ if !plan.apply => (0..n).map(|_| Finish::Keep).collect(),
            _ if plan.overlapped => (0..n).map(|_| Finish::Tapped).collect(),
            State::ParameterDevice { .. } => {
                let bucket_bytes = self.bucket_bytes();
                (0..n)
                    .map(|_| Finish::Gather(self.main.clone(), bucket_bytes))
                    .collect()
            }
            State::AllReduce { optims, .. } => all_reduce_links(
                &self
                    .towers
                    .iter()
                    .map(TowerDevice::device)
                    .collect::<Vec<_>>(),
                self.towers.iter().any(|t| t.is_remote() || t.is_fused()),
                self.bucket_bytes(),
            )
            .into_iter()
            .zip(optims.iter().cloned())
            .map(|(link, optim)| Finish::AllReduce {
                link,
                optim,
                lr: (update.learning_rate())
                    .expect("a caller's update runs under Reduce::ParameterDevice"),
                grad_scale: plan.grad_scale,
                loss_scale: self.loss_scale(),
            })
            .collect(),
            State::Single { .. } => unreachable!("step_towers runs on several towers"),
        }
    }

    /// The buckets gradients move in: [`TowersConfig::bucket_bytes`], or one per gradient when
    /// every tower and the model compute in host memory (see [`in_host_memory`]).
    ///
    /// [`TowersConfig::bucket_bytes`]: super::TowersConfig::bucket_bytes
    fn bucket_bytes(&self) -> usize {
        let mut devices = (self.towers.iter().map(TowerDevice::device)).chain([&self.main]);
        match devices.all(in_host_memory) {
            true => 0,
            false => self.config.bucket_bytes,
        }
    }

    /// Keep: a micro-batch that does not end the cycle leaves its replicas and gradient sums
    /// for the next one.
    fn keep(&mut self, done: Vec<Done<M>>, plan: Plan) {
        self.cycle.micro += 1;
        self.cycle.weight = plan.weight;
        self.cycle.part_weights = plan.part_weights;
        for d in done {
            self.cycle.work.push(d.replica);
            let grads = d
                .grads
                .expect("a tower that keeps its gradients returns them");
            self.cycle.grads.push(grads);
        }
    }

    /// Apply: the update that ends a cycle, then batch-norm statistics in sync. `reduced` is
    /// the overlapped exchange's gradient, if it ran (`Some(None)`: not finite). Whether the
    /// update was skipped (see `loss_scale.rs`).
    fn apply(
        &mut self,
        done: Vec<Done<M>>,
        plan: &Plan,
        update: &mut Update<'_, M>,
        reduced: Option<Option<GradientsParams>>,
    ) -> bool {
        self.cycle = Cycle::default();
        if matches!(self.state, State::ParameterDevice { .. }) {
            self.update_on_parameter_device(done, plan, update, reduced)
        } else {
            let skipped = done[0].skipped;
            if let Some(scaler) = &mut self.scaler {
                scaler.record(skipped);
            }
            self.adopt_all_reduced(done, plan);
            skipped
        }
    }

    /// Reduce the gathered gradients (unless the overlapped exchange did: `reduced`), update
    /// the model on the parameter device (unless the update is skipped, which it returns),
    /// sync batch norm into it and broadcast it to the towers.
    fn update_on_parameter_device(
        &mut self,
        done: Vec<Done<M>>,
        plan: &Plan,
        update: &mut Update<'_, M>,
        reduced: Option<Option<GradientsParams>>,
    ) -> bool {
        let (grads, stats): (Vec<_>, Vec<_>) = done.into_iter().map(|d| (d.grads, d.stats)).unzip();
        // The replicas go before the update: on the parameter device they share the model's
        // tensors, which the optimizer can then update in place.
        if let State::ParameterDevice { replicas, .. } = &mut self.state {
            replicas.clear();
        }
        let grads: Vec<GradientsParams> = grads.into_iter().flatten().collect();
        let (mut model, skipped) = match (reduced, update.learning_rate()) {
            (None, Some(lr)) if self.sums_in_update(plan) => {
                (self.summed_in_update(grads, lr), false)
            }
            (reduced, _) => {
                let grads = reduced.unwrap_or_else(|| self.reduce(grads, plan));
                self.updated(grads, update)
            }
        };
        if let Some(stats) = self.synced_stats(stats, plan) {
            model = running_state::write(model, &stats);
        }
        let model = self.stats_across_processes(model, plan.weight);
        let State::ParameterDevice {
            master, replicas, ..
        } = &mut self.state
        else {
            unreachable!()
        };
        *replicas = broadcast(&model, &self.towers);
        *master = Some(model);
        skipped
    }

    /// Whether the optimizer can sum the towers' gradients itself, each parameter's just
    /// before its update: nothing is to happen to the summed gradient first (no scale of an
    /// accumulation cycle, no loss scaling, no mean over ranks, no decay, no copy kept).
    fn sums_in_update(&self, plan: &Plan) -> bool {
        plan.grad_scale.is_none()
            && self.scaler.is_none()
            && self.processes.is_none()
            && self.decay.is_empty()
            && !self.tap.wanted
    }

    /// The model updated by the optimizer at `lr` with the sum of the towers' gradients, each
    /// parameter's summed just before its update (Burn's `step_multi`): on a fused GPU the
    /// sum then joins the update's kernel, where summed beforehand each parameter's addition
    /// ran as a kernel of its own (burn-fusion keeps at most 5 independent blocks open).
    fn summed_in_update(&mut self, grads: Vec<GradientsParams>, lr: f64) -> M {
        let master = self.state.take_model();
        let grads = grads.into_iter().map(|g| (g, self.main.clone())).collect();
        (self.state.optimizer_mut()).step_multi(lr, master, MultiGradientsParams { grads })
    }

    /// Reduce: the towers' gradients summed on the parameter device, then their mean over the
    /// ranks' examples when there are other ranks (`None` when that is not finite).
    fn reduce(&self, grads: Vec<GradientsParams>, plan: &Plan) -> Option<GradientsParams> {
        let grads = self.layout.sum(grads, &self.main);
        let grads = match plan.grad_scale {
            Some(factor) => self.layout.scale(grads, factor),
            None => grads,
        };
        let processes = self.processes.as_deref();
        cross_process::mean_gradients(processes, &self.layout, grads, plan.weight, &self.main)
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
                .map(|r| running_state::write(r, &stats))
                .collect();
        }
        self.state = State::AllReduce { replicas, optims };
    }

    /// Sync running state: the towers' running state combined as the config says, when the
    /// model has any.
    fn synced_stats(&self, stats: Vec<Option<RunningStats>>, plan: &Plan) -> Option<RunningStats> {
        // At the first step the towers read every untrained tensor, before the running state
        // was known.
        let stats: Vec<RunningStats> = (stats.into_iter().flatten())
            .map(|stats| stats.select(&self.running))
            .collect();
        (self.has_running_stats)
            .then(|| (self.config.batch_norm).combine(stats, &plan.part_weights, &self.main))
    }
}

/// The batch's weights for parts of `sizes`, checked: one per part, each positive and finite.
pub(super) fn checked_weights<B: TowerBatch>(batch: &B, sizes: &[usize]) -> Result<Vec<f64>> {
    let weights = batch.weights(sizes);
    if weights.len() != sizes.len() || weights.iter().any(|w| !(w.is_finite() && *w > 0.0)) {
        return Err(Error::Batch(format!(
            "the batch's weights for parts of {sizes:?} are {weights:?}: one positive, finite \
             weight per part is needed"
        )));
    }
    Ok(weights)
}

/// The step's losses and counts, from the towers' values: means weighted like the gradient.
fn step_output(
    values: &[LossValues],
    sizes: &[usize],
    weights: &[f64],
    updated: bool,
) -> StepOutput {
    let weight: f64 = weights.iter().sum();
    let mean = |value: &dyn Fn(&LossValues) -> f64| {
        values
            .iter()
            .zip(weights)
            .map(|(v, w)| value(v) * w)
            .sum::<f64>()
            / weight
    };
    let metrics = (values[0].metrics.iter().enumerate())
        .map(|(i, (name, _))| (name.clone(), mean(&|v| v.metrics[i].1)))
        .collect();
    StepOutput {
        loss: mean(&|v| v.loss),
        tower_losses: values.iter().map(|v| v.loss).collect(),
        examples: sizes.iter().sum(),
        weight,
        correct: values.iter().map(|v| v.correct).sum(),
        metrics,
        updated,
        skipped: false,
        replica_check: None,
    }
}
