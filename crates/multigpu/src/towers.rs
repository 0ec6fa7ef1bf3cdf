//! The tower strategy: one model, one replica per device, one batch split across them.
//!
//! # Threads
//!
//! Each step runs one scoped thread per tower (`std::thread::scope`), not persistent workers:
//!
//! - Burn 0.22's `RunningState` (batch-norm statistics) keeps updates pending per thread and
//!   folds them in on that thread's next update. Neither design gets the statistics right by
//!   itself: a thread that ends leaves its update pending, and a persistent worker's update
//!   arrives one step late. So the towers fold each update in explicitly on the thread that made
//!   it (see `batch_norm_sync.rs`), and then the thread's lifetime no longer
//!   matters.
//! - A scope joins every thread before the step returns, also when one panics: no tower can
//!   outlive a failed step. Threads borrow the batch slices and the loss function, so neither
//!   needs `'static` or an `Arc`.
//! - Starting a thread costs tens of microseconds, nothing next to a training step.
//!
//! # Failures
//!
//! A tower that panics (a shape error inside Burn) or whose loss function returns an error ends
//! the step with [`Error::TowerPanicked`] or [`Error::TowerFailed`], naming the tower's device.
//! In an all-reduce, its ring neighbours see the channel close and stop too. Nothing is
//! committed: the model, replicas and optimizer state are those from before the step, and the
//! micro-batches accumulated since the last update are dropped. (With one tower on the model's
//! own device, which runs on the calling thread without a replica, a batch-norm statistics update
//! made before the failure stays pending in the model, as it would after a plain Burn step.)
//!
//! Every read from a tower's device (the loss, the gradients gathered to the model's device, the
//! batch-norm statistics, the ring's chunks when a tower is remote) happens on that tower's
//! thread, so a remote server that goes away fails that tower, by name, rather than the caller.
//! Writes to a device (uploads, broadcasts) never wait on it. Keep the model on a local device
//! for this to hold for the update as well.

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};
use std::thread;

use burn::module::Module;
use burn::optim::{GradientsParams, ModuleOptimizer};
use burn::tensor::{Device, Int, Tensor};
use towers_data::{BatchSlice, HostBatch, split_sizes};

use crate::batch_norm_sync::{self, BatchNormSync, RunningStats};
use crate::cross_process::{self, Processes};
use crate::devices::TowerDevice;
use crate::error::{Error, Result};
use crate::loss::IntoTowerLoss;
use crate::reduce::{Layout, PeerGone, Reduce, RingLink, ring};

/// How the towers reduce, keep batch norm in sync and accumulate.
#[derive(Clone, Debug, PartialEq)]
pub struct TowersConfig {
    /// How gradients become one update.
    pub reduce: Reduce,
    /// What happens to batch-norm running statistics after each update.
    pub batch_norm: BatchNormSync,
    /// Micro-batches per update (at least 1). With `k`, every `k`-th call to
    /// [`Towers::step`] applies one update with the gradient of all `k` micro-batches taken as
    /// one batch: each example weighs the same, whatever the micro-batch sizes.
    pub accumulation: usize,
}

impl Default for TowersConfig {
    fn default() -> Self {
        Self {
            reduce: Reduce::default(),
            batch_norm: BatchNormSync::default(),
            accumulation: 1,
        }
    }
}

impl TowersConfig {
    /// Sets [`reduce`](Self::reduce).
    pub fn with_reduce(mut self, reduce: Reduce) -> Self {
        self.reduce = reduce;
        self
    }

    /// Sets [`batch_norm`](Self::batch_norm).
    pub fn with_batch_norm(mut self, batch_norm: BatchNormSync) -> Self {
        self.batch_norm = batch_norm;
        self
    }

    /// Sets [`accumulation`](Self::accumulation).
    pub fn with_accumulation(mut self, micro_batches: usize) -> Self {
        self.accumulation = micro_batches;
        self
    }
}

/// What one call to [`Towers::step`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct StepOutput {
    /// Mean loss over the batch: the towers' losses weighted by their slice sizes, which is the
    /// loss one device would report for the whole batch.
    pub loss: f64,
    /// Each tower's mean loss over its slice, in device order.
    pub tower_losses: Vec<f64>,
    /// Examples in the batch.
    pub examples: usize,
    /// Correct predictions in the batch, when the loss function returned logits.
    pub correct: Option<usize>,
    /// Whether this call applied an update (every call, or every `accumulation`-th).
    pub updated: bool,
}

/// Data-parallel training of one model on N devices, TensorFlow-tower style.
///
/// Each [`step`](Self::step) splits one host batch into one slice per tower (in proportion to
/// the towers' shares), uploads slice `i` straight to device `i`, runs forward, loss and
/// backward on all towers at once, and reduces the gradients to their mean weighted by slice
/// size, which is exactly the gradient of the whole batch on one device. One optimizer update
/// follows. N devices thus train like one device with an N-times larger batch.
///
/// This differs from burn-train's `MultiDevice` strategy, which gives each device its own
/// loader and batch and *sums* the devices' gradients (an N-times larger step); here there is
/// one input pipeline and gradients are *averaged*, so a learning rate tuned on one device
/// carries over.
///
/// One tower on the model's own device is a plain Burn step on the calling thread: no replica,
/// no thread, no copy.
///
/// See [`Reduce`] for the two ways to reduce, [`BatchNormSync`] for batch norm, and the
/// [module docs](crate::towers) for threads and failures.
pub struct Towers<M> {
    towers: Vec<TowerDevice>,
    main: Device,
    config: TowersConfig,
    layout: Layout,
    has_running_stats: bool,
    state: State<M>,
    cycle: Cycle<M>,
    tap: GradientTap,
    /// The other ranks of a multi-process job, if any.
    processes: Option<Processes>,
}

/// A copy of one update's gradient, when asked for.
#[derive(Default)]
struct GradientTap {
    /// Whether the next update keeps a copy.
    wanted: bool,
    kept: Option<GradientsParams>,
}

impl GradientTap {
    /// `grads`, after keeping a copy (sharing the tensors) when one is wanted.
    fn pass(&mut self, layout: &Layout, grads: GradientsParams) -> GradientsParams {
        if !std::mem::take(&mut self.wanted) {
            return grads;
        }
        let (grads, copy) = layout.copy(grads);
        self.kept = Some(copy);
        grads
    }
}

/// The models and optimizers between steps. The `Option`s are empty only while an optimizer
/// step, which takes the model by value, runs.
enum State<M> {
    /// One tower on the model's device.
    Single {
        model: Option<M>,
        optim: ModuleOptimizer,
    },
    /// The model and its optimizer on the parameter device; replicas forked from it after each
    /// update.
    ParameterDevice {
        master: Option<M>,
        optim: ModuleOptimizer,
        replicas: Vec<M>,
    },
    /// A replica and an optimizer per tower; the model is replica 0.
    AllReduce {
        replicas: Vec<M>,
        optims: Vec<ModuleOptimizer>,
    },
}

/// The micro-batches run since the last update.
struct Cycle<M> {
    micro: usize,
    /// Examples per tower.
    examples: Vec<usize>,
    /// Summed gradients per tower, on the tower's device (scaled by slice size).
    grads: Vec<GradientsParams>,
    /// The replicas running this cycle (towers only).
    work: Vec<M>,
}

impl<M> Default for Cycle<M> {
    fn default() -> Self {
        Self {
            micro: 0,
            examples: Vec::new(),
            grads: Vec::new(),
            work: Vec::new(),
        }
    }
}

const PRESENT: &str = "the model is only taken out during an optimizer step";

impl<M> std::fmt::Debug for Towers<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.towers.iter().map(TowerDevice::name).collect();
        f.debug_struct("Towers")
            .field("towers", &names)
            .field("main", &self.main)
            .field("config", &self.config)
            .field("micro_batches_pending", &self.cycle.micro)
            .finish_non_exhaustive()
    }
}

impl<M: Module> Towers<M> {
    /// Towers for `model` on `devices`, updated by `optimizer`.
    ///
    /// The model must be on an autodiff device; that device is the parameter device of
    /// [`Reduce::ParameterDevice`] and need not be one of the towers. Tower devices without
    /// autodiff get it. Under [`Reduce::AllReduce`] every tower gets a replica and its own clone
    /// of `optimizer` (state included, so a restored optimizer restores every tower), and the
    /// model moves to tower 0.
    pub fn new(
        model: M,
        optimizer: ModuleOptimizer,
        devices: &[TowerDevice],
        config: TowersConfig,
    ) -> Result<Self> {
        if devices.is_empty() {
            return Err(Error::Config("no tower devices".into()));
        }
        if config.accumulation == 0 {
            return Err(Error::Config(
                "accumulation must be at least 1 micro-batch".into(),
            ));
        }
        if let Some(t) = devices
            .iter()
            .find(|t| !(t.share().is_finite() && t.share() > 0.0))
        {
            return Err(Error::Config(format!(
                "tower `{}` has share {}; shares must be positive",
                t.name(),
                t.share()
            )));
        }
        let main = model
            .devices()
            .into_iter()
            .next()
            .ok_or_else(|| Error::Config("the model has no parameters".into()))?;
        if !main.is_autodiff() {
            return Err(Error::Config(format!(
                "the model is on {main:?}, without autodiff: put it on e.g. \
                 `Device::flex().autodiff()` to train it"
            )));
        }
        let towers: Vec<TowerDevice> = devices
            .iter()
            .map(|t| {
                let device = t.device().clone();
                let device = if device.is_autodiff() {
                    device
                } else {
                    device.autodiff()
                };
                TowerDevice::new(t.name(), device).with_share(t.share())
            })
            .collect();
        let layout = Layout::of(&model);
        let has_running_stats = !batch_norm_sync::read(&model).is_empty();
        let state = if towers.len() == 1 && towers[0].device() == &main {
            State::Single {
                model: Some(model),
                optim: optimizer,
            }
        } else {
            let replicas = broadcast(&model, &towers);
            match config.reduce {
                Reduce::ParameterDevice => State::ParameterDevice {
                    master: Some(model),
                    optim: optimizer,
                    replicas,
                },
                Reduce::AllReduce => State::AllReduce {
                    optims: vec![optimizer; towers.len()],
                    replicas,
                },
            }
        };
        Ok(Self {
            towers,
            main,
            config,
            layout,
            has_running_stats,
            state,
            cycle: Cycle::default(),
            tap: GradientTap::default(),
            processes: None,
        })
    }

    /// Makes these towers one rank of a multi-process job (see [`crate::CrossProcess`]): every
    /// update then applies the mean gradient over all ranks' examples, batch-norm statistics
    /// are averaged across ranks too, and the model takes rank 0's weights now. Every rank must
    /// call this, and then [`step`](Self::step), in step with the others.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] under [`Reduce::AllReduce`] (each tower updates its own replica, so
    /// there is no one gradient to exchange: use [`Reduce::ParameterDevice`]);
    /// [`Error::Processes`] when the ranks' models differ in shape.
    pub fn across_processes(mut self, processes: Processes) -> Result<Self> {
        let p = &*processes;
        self.state = match self.state {
            State::AllReduce { .. } => {
                return Err(Error::Config(
                    "the ring all-reduce between towers cannot run across processes: use the \
                     parameter-device reduction"
                        .into(),
                ));
            }
            State::Single { model, optim } => State::Single {
                model: Some(cross_process::from_rank_zero(
                    p,
                    model.expect(PRESENT),
                    &self.main,
                )?),
                optim,
            },
            State::ParameterDevice { master, optim, .. } => {
                let master = cross_process::from_rank_zero(p, master.expect(PRESENT), &self.main)?;
                State::ParameterDevice {
                    replicas: broadcast(&master, &self.towers),
                    master: Some(master),
                    optim,
                }
            }
        };
        self.processes = Some(processes);
        Ok(self)
    }

    /// The model as of the last update.
    pub fn model(&self) -> &M {
        match &self.state {
            State::Single { model, .. } => model.as_ref().expect(PRESENT),
            State::ParameterDevice { master, .. } => master.as_ref().expect(PRESENT),
            State::AllReduce { replicas, .. } => &replicas[0],
        }
    }

    /// The model, leaving the towers (and any micro-batches not yet applied) behind.
    pub fn into_model(self) -> M {
        match self.state {
            State::Single { model, .. } => model.expect(PRESENT),
            State::ParameterDevice { master, .. } => master.expect(PRESENT),
            State::AllReduce { mut replicas, .. } => replicas.swap_remove(0),
        }
    }

    /// The towers' replicas as of the last update, in device order; the model itself when it
    /// is the only tower. Between the updates of an accumulation cycle, their batch-norm
    /// statistics may already hold the cycle's micro-batches.
    pub fn replicas(&self) -> &[M] {
        match &self.state {
            State::Single { model, .. } => std::slice::from_ref(model.as_ref().expect(PRESENT)),
            State::ParameterDevice { replicas, .. } | State::AllReduce { replicas, .. } => replicas,
        }
    }

    /// The optimizer of the model (tower 0's under [`Reduce::AllReduce`], whose state every
    /// tower's optimizer shares), e.g. to save it.
    pub fn optimizer(&self) -> &ModuleOptimizer {
        match &self.state {
            State::Single { optim, .. } | State::ParameterDevice { optim, .. } => optim,
            State::AllReduce { optims, .. } => &optims[0],
        }
    }

    /// Keeps a copy of the gradient the next update applies (the mean over the towers, on the
    /// model's device), for [`take_gradients`](Self::take_gradients): e.g. for histograms,
    /// without computing it twice. Under [`Reduce::AllReduce`] the mean gradient exists only
    /// inside the tower threads, and nothing is kept.
    pub fn keep_gradients(&mut self) {
        self.tap.wanted = true;
    }

    /// The gradient kept by [`keep_gradients`](Self::keep_gradients), once its update ran.
    pub fn take_gradients(&mut self) -> Option<GradientsParams> {
        self.tap.kept.take()
    }

    /// The tower devices (with autodiff), in order.
    pub fn devices(&self) -> &[TowerDevice] {
        &self.towers
    }

    /// The configuration.
    pub fn config(&self) -> &TowersConfig {
        &self.config
    }

    /// Trains on one batch (one micro-batch under accumulation) with learning rate `lr`.
    ///
    /// `loss` runs on every tower with that tower's replica and slice (images `[n, c, h, w]`,
    /// labels `[n]`) and returns the *mean* loss of the slice, shape `[1]`, optionally with the
    /// logits (see [`IntoTowerLoss`]); e.g. `|m, x, y| m.loss(x, y).loss`.
    ///
    /// # Errors
    ///
    /// [`Error::Batch`] when the batch cannot be split with at least one example per tower;
    /// [`Error::TowerPanicked`], [`Error::TowerFailed`] or [`Error::Spawn`] when a tower fails,
    /// which drops the step (see the [module docs](crate::towers)).
    ///
    /// # Panics
    ///
    /// When the optimizer panics, after which the towers hold no model.
    pub fn step<F, L>(&mut self, batch: &HostBatch, lr: f64, loss: F) -> Result<StepOutput>
    where
        F: Fn(&M, Tensor<4>, Tensor<1, Int>) -> L + Sync,
        L: IntoTowerLoss,
    {
        let shares: Vec<f64> = self.towers.iter().map(TowerDevice::share).collect();
        let sizes = split_sizes(batch.len(), &shares)?;
        if matches!(self.state, State::Single { .. }) {
            self.step_single(batch, lr, &loss)
        } else {
            self.step_towers(batch, &sizes, lr, &loss)
        }
    }

    fn step_single<F, L>(&mut self, batch: &HostBatch, lr: f64, loss_fn: &F) -> Result<StepOutput>
    where
        F: Fn(&M, Tensor<4>, Tensor<1, Int>) -> L,
        L: IntoTowerLoss,
    {
        let State::Single { model, optim } = &mut self.state else {
            unreachable!("step_single runs on one tower")
        };
        let k = self.config.accumulation;
        let examples = batch.len();
        let tower = &self.towers[0];
        // Under accumulation a micro-batch's gradient is weighed by its size; the sum is divided
        // once at the update.
        let loss_scale = (k > 1).then_some(examples as f64);
        let pass = {
            let model = model.as_ref().expect(PRESENT);
            let (x, y) = batch.as_slice().to_tensors(&self.main);
            panic::catch_unwind(AssertUnwindSafe(|| {
                backward_pass(model, x, y, loss_scale, loss_fn)
            }))
        };
        let pass = match pass {
            Ok(Ok(pass)) => pass,
            Ok(Err(message)) => return Err(self.fail(tower_failed(0, &self.towers[0], message))),
            Err(panic) => return Err(self.fail(tower_panicked(0, &self.towers[0], panic))),
        };
        if self.has_running_stats {
            batch_norm_sync::commit(model.as_ref().expect(PRESENT));
        }
        let output = StepOutput {
            loss: pass.loss,
            tower_losses: vec![pass.loss],
            examples,
            correct: pass.correct,
            updated: self.cycle.micro + 1 == k,
        };
        let (grads, examples) = if k == 1 {
            (pass.grads, examples)
        } else {
            let grads = match self.cycle.grads.pop() {
                Some(sum) => self.layout.sum(vec![sum, pass.grads], tower.device()),
                None => pass.grads,
            };
            self.cycle.micro += 1;
            self.cycle.examples.resize(1, 0);
            self.cycle.examples[0] += examples;
            if !output.updated {
                self.cycle.grads.push(grads);
                return Ok(output);
            }
            let examples = self.cycle.examples[0];
            let grads = self.layout.scale(grads, 1.0 / examples as f64);
            self.cycle = Cycle::default();
            (grads, examples)
        };
        let processes = self.processes.as_deref();
        let grads =
            cross_process::mean_gradients(processes, &self.layout, grads, examples, &self.main);
        let grads = self.tap.pass(&self.layout, grads);
        let updated = optim.step(lr, model.take().expect(PRESENT), grads);
        *model = Some(if self.has_running_stats {
            cross_process::mean_running_stats(processes, updated, examples, &self.main)
        } else {
            updated
        });
        Ok(output)
    }

    fn step_towers<F, L>(
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
        let n = self.towers.len();
        let k = self.config.accumulation;
        let slices = batch.split(sizes)?;
        if self.cycle.micro == 0 {
            self.cycle.work = match &self.state {
                // Clones share the replicas' batch-norm buffers; a failed step re-broadcasts.
                State::ParameterDevice { replicas, .. } => replicas.clone(),
                // Own buffers, so that a failed step leaves the replicas untouched.
                State::AllReduce { replicas, .. } => {
                    replicas.iter().map(|r| r.valid().train()).collect()
                }
                State::Single { .. } => unreachable!("step_towers runs on several towers"),
            };
            self.cycle.examples = vec![0; n];
        }
        let examples: Vec<usize> = self
            .cycle
            .examples
            .iter()
            .zip(sizes)
            .map(|(a, b)| a + b)
            .collect();
        let cycle_examples: usize = examples.iter().sum();
        let apply = self.cycle.micro + 1 == k;
        // Loss scales that make the towers' gradients sum to the batch's mean gradient (k = 1),
        // or to the cycle's summed gradient, divided once at the update (k > 1).
        let grad_scale = (k > 1).then(|| 1.0 / cycle_examples as f64);
        let loss_scales = sizes.iter().map(|&s| {
            let scale = if k == 1 {
                s as f64 / batch.len() as f64
            } else {
                s as f64
            };
            (scale != 1.0).then_some(scale)
        });
        let finishes: Vec<Finish> = match &self.state {
            _ if !apply => (0..n).map(|_| Finish::Keep).collect(),
            State::ParameterDevice { .. } => {
                (0..n).map(|_| Finish::Gather(self.main.clone())).collect()
            }
            State::AllReduce { optims, .. } => {
                ring(n, self.towers.iter().any(TowerDevice::is_remote))
                    .into_iter()
                    .zip(optims.iter().cloned())
                    .map(|(link, optim)| Finish::AllReduce {
                        link,
                        optim,
                        lr,
                        grad_scale,
                    })
                    .collect()
            }
            State::Single { .. } => unreachable!("step_towers runs on several towers"),
        };
        let mut sums = std::mem::take(&mut self.cycle.grads).into_iter();
        let jobs: Vec<Job<'_, M>> = std::mem::take(&mut self.cycle.work)
            .into_iter()
            .zip(slices)
            .zip(loss_scales)
            .zip(finishes)
            .zip(&self.towers)
            .map(|((((replica, slice), loss_scale), finish), tower)| Job {
                replica,
                sum: sums.next(),
                slice,
                device: tower.device().clone(),
                stats_device: self.main.clone(),
                loss_scale,
                finish,
            })
            .collect();

        let done = match run_towers(
            jobs,
            &self.towers,
            &self.layout,
            self.has_running_stats,
            loss_fn,
        ) {
            Ok(done) => done,
            Err(error) => return Err(self.fail(error)),
        };

        let loss = done
            .iter()
            .zip(sizes)
            .map(|(d, &s)| d.loss * s as f64)
            .sum::<f64>()
            / batch.len() as f64;
        let output = StepOutput {
            loss,
            tower_losses: done.iter().map(|d| d.loss).collect(),
            examples: batch.len(),
            correct: done.iter().map(|d| d.correct).sum(),
            updated: apply,
        };
        if !apply {
            self.cycle.micro += 1;
            self.cycle.examples = examples;
            for d in done {
                self.cycle.work.push(d.replica);
                self.cycle.grads.push(
                    d.grads
                        .expect("a tower that keeps its gradients returns them"),
                );
            }
            return Ok(output);
        }
        self.cycle = Cycle::default();
        let sync = self.config.batch_norm;
        match &mut self.state {
            State::ParameterDevice {
                master,
                optim,
                replicas,
            } => {
                let mut grads = Vec::with_capacity(n);
                let mut stats = Vec::with_capacity(n);
                for d in done {
                    grads.extend(d.grads);
                    stats.extend(d.stats);
                    // The replicas go before the update: on the parameter device they share
                    // the model's tensors, which the optimizer can then update in place.
                }
                replicas.clear();
                let grads = self.layout.sum(grads, &self.main);
                let grads = match grad_scale {
                    Some(factor) => self.layout.scale(grads, factor),
                    None => grads,
                };
                let processes = self.processes.as_deref();
                let grads = cross_process::mean_gradients(
                    processes,
                    &self.layout,
                    grads,
                    cycle_examples,
                    &self.main,
                );
                let grads = self.tap.pass(&self.layout, grads);
                let mut model = optim.step(lr, master.take().expect(PRESENT), grads);
                if self.has_running_stats {
                    let stats = sync.combine(stats, &examples, &self.main);
                    model = batch_norm_sync::write(model, &stats);
                    model = cross_process::mean_running_stats(
                        processes,
                        model,
                        cycle_examples,
                        &self.main,
                    );
                }
                *replicas = broadcast(&model, &self.towers);
                *master = Some(model);
            }
            State::AllReduce { replicas, optims } => {
                let mut stats = Vec::with_capacity(n);
                replicas.clear();
                optims.clear();
                for d in done {
                    replicas.push(d.replica);
                    optims.extend(d.optim);
                    stats.extend(d.stats);
                }
                if self.has_running_stats {
                    let stats = sync.combine(stats, &examples, &self.main);
                    *replicas = std::mem::take(replicas)
                        .into_iter()
                        .map(|r| batch_norm_sync::write(r, &stats))
                        .collect();
                }
            }
            State::Single { .. } => unreachable!("step_towers runs on several towers"),
        }
        Ok(output)
    }

    /// Drops the step and the micro-batches since the last update, and returns `error`.
    fn fail(&mut self, error: Error) -> Error {
        self.cycle = Cycle::default();
        if let State::ParameterDevice {
            master, replicas, ..
        } = &mut self.state
        {
            // The failed step's replicas shared these replicas' batch-norm buffers.
            *replicas = broadcast(master.as_ref().expect(PRESENT), &self.towers);
        }
        error
    }
}

/// One replica per tower, forked from `model`, each with batch-norm buffers of its own:
/// `fork` alone would share them (and move the model's to the tower's device).
fn broadcast<M: Module>(model: &M, towers: &[TowerDevice]) -> Vec<M> {
    towers
        .iter()
        .map(|t| model.valid().train().fork(t.device()))
        .collect()
}

/// Forward, loss and backward of one slice.
struct Pass {
    grads: GradientsParams,
    loss: f64,
    correct: Option<usize>,
}

fn backward_pass<M, F, L>(
    model: &M,
    x: Tensor<4>,
    y: Tensor<1, Int>,
    loss_scale: Option<f64>,
    loss_fn: &F,
) -> Result<Pass, String>
where
    M: Module,
    F: Fn(&M, Tensor<4>, Tensor<1, Int>) -> L,
    L: IntoTowerLoss,
{
    let labels = y.clone();
    let out = loss_fn(model, x, y).into_tower_loss()?;
    if out.loss.dims() != [1] {
        return Err(format!(
            "the loss has shape {:?}; expected the mean loss of the slice, shape [1]",
            out.loss.dims()
        ));
    }
    let grads = match loss_scale {
        Some(scale) => out.loss.clone().mul_scalar(scale).backward(),
        None => out.loss.backward(),
    };
    let grads = GradientsParams::from_grads(grads, model);
    // The first read from the tower's device: where a remote server that went away shows.
    let loss: f32 = out
        .loss
        .clone()
        .try_into_scalar()
        .map_err(|e| format!("cannot read the loss from the device: {e}"))?;
    let correct = out.correct(labels);
    Ok(Pass {
        grads,
        loss: loss as f64,
        correct,
    })
}

/// One tower's share of a step.
struct Job<'a, M> {
    replica: M,
    /// The gradients of the cycle's earlier micro-batches.
    sum: Option<GradientsParams>,
    slice: BatchSlice<'a>,
    device: Device,
    /// Where the batch-norm statistics are combined: the model's device. The tower moves its
    /// own there, so that every read from its device (a remote one that can go away included)
    /// happens on its thread, where a failure is caught and named.
    stats_device: Device,
    loss_scale: Option<f64>,
    finish: Finish,
}

/// What a tower does with its gradients.
enum Finish {
    /// Keeps them for the next micro-batch.
    Keep,
    /// Sends them to the parameter device.
    Gather(Device),
    /// Ring all-reduce, then its own update.
    AllReduce {
        link: RingLink,
        optim: ModuleOptimizer,
        lr: f64,
        grad_scale: Option<f64>,
    },
}

struct Done<M> {
    replica: M,
    /// Kept or gathered gradients; `None` after an all-reduce update.
    grads: Option<GradientsParams>,
    /// The optimizer after an all-reduce update.
    optim: Option<ModuleOptimizer>,
    /// Batch-norm statistics, read when the cycle ends.
    stats: Option<RunningStats>,
    loss: f64,
    correct: Option<usize>,
}

enum Failure {
    /// The loss function's error, or a malformed loss.
    Failed(String),
    /// A ring neighbour failed: a consequence, not a cause.
    PeerGone,
}

fn run_tower<M, F, L>(
    job: Job<'_, M>,
    layout: &Layout,
    has_running_stats: bool,
    loss_fn: &F,
) -> Result<Done<M>, Failure>
where
    M: Module,
    F: Fn(&M, Tensor<4>, Tensor<1, Int>) -> L,
    L: IntoTowerLoss,
{
    let Job {
        replica,
        sum,
        slice,
        device,
        stats_device,
        loss_scale,
        finish,
    } = job;
    let (x, y) = slice.to_tensors(&device);
    let pass = backward_pass(&replica, x, y, loss_scale, loss_fn).map_err(Failure::Failed)?;
    if has_running_stats {
        batch_norm_sync::commit(&replica);
    }
    let grads = match sum {
        Some(sum) => layout.sum(vec![sum, pass.grads], &device),
        None => pass.grads,
    };
    let stats = (has_running_stats && !matches!(finish, Finish::Keep))
        .then(|| batch_norm_sync::read(&replica).into_device(&stats_device));
    let (replica, grads, optim) = match finish {
        Finish::Keep => (replica, Some(grads), None),
        Finish::Gather(main) => (replica, Some(layout.sum(vec![grads], &main)), None),
        Finish::AllReduce {
            link,
            mut optim,
            lr,
            grad_scale,
        } => {
            let sum = layout
                .ring_all_reduce(&link, grads, &device)
                .map_err(|PeerGone| Failure::PeerGone)?;
            let sum = match grad_scale {
                Some(factor) => layout.scale(sum, factor),
                None => sum,
            };
            (optim.step(lr, replica, sum), None, Some(optim))
        }
    };
    Ok(Done {
        replica,
        grads,
        optim,
        stats,
        loss: pass.loss,
        correct: pass.correct,
    })
}

/// Runs every job on a thread of its own and waits for all of them.
fn run_towers<M, F, L>(
    jobs: Vec<Job<'_, M>>,
    towers: &[TowerDevice],
    layout: &Layout,
    has_running_stats: bool,
    loss_fn: &F,
) -> Result<Vec<Done<M>>>
where
    M: Module,
    F: Fn(&M, Tensor<4>, Tensor<1, Int>) -> L + Sync,
    L: IntoTowerLoss,
{
    let outcomes: Vec<_> = thread::scope(|s| {
        // Start every tower before joining any: an all-reduce needs them all.
        let handles: Vec<_> = jobs
            .into_iter()
            .enumerate()
            .map(|(i, job)| {
                thread::Builder::new()
                    .name(format!("tower-{i}"))
                    .spawn_scoped(s, move || {
                        run_tower(job, layout, has_running_stats, loss_fn)
                    })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.map(|h| h.join()))
            .collect()
    });
    let mut done = Vec::with_capacity(outcomes.len());
    let mut ring_broken = None;
    for (i, outcome) in outcomes.into_iter().enumerate() {
        let tower = &towers[i];
        match outcome {
            Ok(Ok(Ok(d))) => done.push(d),
            Ok(Ok(Err(Failure::PeerGone))) => ring_broken = ring_broken.or(Some(i)),
            Ok(Ok(Err(Failure::Failed(message)))) => return Err(tower_failed(i, tower, message)),
            Ok(Err(panic)) => return Err(tower_panicked(i, tower, panic)),
            Err(error) => {
                return Err(Error::Spawn {
                    tower: i,
                    device: tower.name().to_string(),
                    error,
                });
            }
        }
    }
    match ring_broken {
        // Only reachable if a neighbour left the ring without failing, which is a bug here.
        Some(i) => Err(tower_failed(
            i,
            &towers[i],
            "the ring all-reduce broke off".into(),
        )),
        None => Ok(done),
    }
}

fn tower_failed(tower: usize, device: &TowerDevice, message: String) -> Error {
    Error::TowerFailed {
        tower,
        device: device.name().to_string(),
        message,
    }
}

fn tower_panicked(tower: usize, device: &TowerDevice, panic: Box<dyn Any + Send>) -> Error {
    Error::TowerPanicked {
        tower,
        device: device.name().to_string(),
        message: panic_message(&*panic),
    }
}

/// The message a panic was raised with, when it was a string.
pub(crate) fn panic_message(panic: &(dyn Any + Send)) -> String {
    match (panic.downcast_ref::<String>(), panic.downcast_ref::<&str>()) {
        (Some(message), _) => message.clone(),
        (_, Some(message)) => message.to_string(),
        _ => "(a panic without a message)".to_string(),
    }
}
