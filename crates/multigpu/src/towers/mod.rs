//! The tower strategy: one model, one replica per device, one batch split across them.
//!
//! # Threads
//!
//! Each tower runs on a worker thread of its own, started with the towers and joined when they
//! drop (`workers.rs`): on fusion backends a tower thus keeps one stream from step to step.
//! One tower on the model's own device runs on the calling thread. So does tower 0 of several
//! under [`Reduce::ParameterDevice`] when it computes on the model's own local device, while
//! the others run on their workers: the caller's thread then queues tower 0's pass, the
//! reduction and the update on one stream, and reads tower 0's loss values last, after the
//! update, so that one read hands all of it over (below) and a step makes one host sync per
//! tower (`host_syncs.rs`). Worker 0, idle meanwhile, watches tower 0 for
//! [`TowersConfig::tower_deadline`] and `tower_timeout` as the caller watches the others.
//!
//! - Burn 0.22's `RunningState` (batch-norm statistics) keeps updates pending per thread and
//!   folds them in on that thread's next update, one step late on a long-lived thread. So the
//!   towers fold each update in explicitly on the thread that made it (see
//!   `running_state.rs`), and the thread's lifetime does not matter.
//! - A step returns only once every tower's task has ended, also when one panics: tasks
//!   borrow the batch slices and the loss function, as scoped threads do, so neither needs
//!   `'static` or an `Arc`.
//! - Burn's fusion backends (wgpu, CUDA, ...) queue operations per thread, lazily. A tensor
//!   computed on one thread and used on another must have its operations handed over first
//!   (`Device::flush`, which does not wait for them to run): without that, on wgpu, gradients
//!   kept across micro-batches came out up to 13% wrong, and the ring's batch-norm writes
//!   reached the next step late (found on lavapipe, 2026-11-23; compare Burn issues #4947 and
//!   #5563). So each tower thread hands its work over before it ends: its one read (the loss
//!   values, last) does on its own device, a flush on the model's (where it moved its
//!   statistics and gradients) when that is another; a ring tower flushes before it sends chunk
//!   tensors to the next; and the caller's thread flushes each device once before it starts the
//!   towers' threads (after its broadcasts, updates and statistics writes of the step before,
//!   and the replicas of a new cycle), except the model's device when the step before ended
//!   with tower 0's read there, which handed over the same. On Burn's fusion backend the
//!   ring's chunk tensors are still lost now and then after the flush ("Should have handle for
//!   tensor", found on lavapipe, 2026-11-26; the message of Burn issues #4328, #4347 and
//!   #4950, fusion with several threads), so there they pass through host memory
//!   (`TowerDevice::is_fused`).
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

mod between_steps;
mod config;
mod phases;
mod processes;
mod replicas;
mod single;
mod tower;
mod who_updates;
mod workers;

pub use config::{ReplicaCheck, StepOutput, TowersConfig};
pub use workers::HUNG_TOWER_EXIT_CODE;

use std::collections::HashMap;

use burn::module::{Module, ParamId};
use burn::optim::{GradientsParams, ModuleOptimizer};
use burn::tensor::Device;

use crate::batch::{TowerBatch, split_sizes};
use crate::cross_process::Processes;
use crate::devices::TowerDevice;
use crate::error::{Error, Result, While};
use crate::gradient_tap::{Tap, TapSchedule};
use crate::loss::IntoTowerLoss;
use crate::loss_scale::{self, LossScaleState, LossScaler};
use crate::overlap::OverlappedExchange;
use crate::reduce::{Layout, Reduce};
use crate::running_state::{self, Detection, Selection};
use crate::stderr_line::eprint_line;
use crate::timeline::{Timeline, Track};
use crate::weight_decay::DecayInUpdate;
use between_steps::{Cycle, GradientTap, PRESENT, State};
use who_updates::Update;
use workers::{Patience, Workers};

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
/// See [`Reduce`] for the two ways to reduce, [`BatchNormSync`](crate::BatchNormSync) for batch norm, and the
/// [module docs](crate::towers) for threads and failures.
pub struct Towers<M> {
    towers: Vec<TowerDevice>,
    main: Device,
    config: TowersConfig,
    layout: Layout,
    /// Each trainable parameter's slot in `layout`, for the taps of an overlapped exchange.
    slots: HashMap<ParamId, usize>,
    /// Which tensors are running state: decided at the first step.
    running: Selection,
    /// Whether `running` selects any tensor.
    has_running_stats: bool,
    state: State<M>,
    cycle: Cycle<M>,
    tap: GradientTap,
    /// Where the taps of an overlapped exchange report in backward, learned at its first step.
    tap_schedule: TapSchedule,
    /// The other ranks of a multi-process job, if any.
    processes: Option<Processes>,
    /// Updates applied so far, for the replica checks.
    updates: u64,
    /// Where the phases of each step are recorded (off unless asked for).
    timeline: Timeline,
    /// The loss scale, under [`TowersConfig::loss_scaling`].
    scaler: Option<LossScaler>,
    /// The weight decay each update adds ([`Towers::with_weight_decay`]).
    decay: DecayInUpdate,
    /// One thread per tower; none for one tower on the model's device.
    workers: Option<Workers>,
    /// Whether the last step ended with a read, on this thread, that handed over all it had
    /// queued on the model's device (see "Threads" in the module docs): the next hand-over
    /// then leaves that device out.
    main_handed_over: bool,
}

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
        config.validate()?;
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
        #[cfg(feature = "fusion")]
        crate::tuning::note_run_on(devices);
        #[cfg(feature = "fusion")]
        if crate::tuning::tunes(devices) {
            crate::tuning::open_tuning_database();
        }
        let layout = Layout::of(&model);
        let running = Selection::Undecided;
        let has_running_stats = !running_state::read(&model, &running).is_empty();
        let single = towers.len() == 1 && towers[0].device() == &main;
        let workers = (!single).then(|| Workers::start(&towers)).transpose()?;
        let state = if single {
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
            slots: layout.slot_map(),
            layout,
            running,
            has_running_stats,
            state,
            cycle: Cycle::default(),
            tap: GradientTap::default(),
            tap_schedule: TapSchedule::default(),
            processes: None,
            updates: 0,
            timeline: Timeline::default(),
            scaler: config.loss_scaling.clone().map(LossScaler::new),
            decay: DecayInUpdate::default(),
            workers,
            main_handed_over: false,
            config,
        })
    }

    /// The scale the next step multiplies its losses by, under
    /// [`TowersConfig::loss_scaling`].
    pub fn loss_scale(&self) -> Option<f64> {
        self.scaler.as_ref().map(LossScaler::scale)
    }

    /// Where loss scaling stands, for a checkpoint; `None` without loss scaling.
    pub fn loss_scale_state(&self) -> Option<LossScaleState> {
        self.scaler.as_ref().map(LossScaler::state)
    }

    /// Continues loss scaling from `state` (a checkpoint's); nothing without loss scaling. A
    /// scale no scaler reaches (0, infinite: a damaged checkpoint) is brought into
    /// [[`LEAST_LOSS_SCALE`](crate::LEAST_LOSS_SCALE), [`LARGEST_LOSS_SCALE`](crate::LARGEST_LOSS_SCALE)], NaN
    /// back to the initial scale.
    pub fn restore_loss_scale(&mut self, state: LossScaleState) {
        if let Some(scaler) = &mut self.scaler {
            scaler.restore(state);
        }
    }

    /// `grads` unscaled for the update, or `None` when the update is to be skipped (see
    /// `loss_scale.rs`); the scale follows. `grads` as they are without loss scaling. `None`
    /// in: the exchange across ranks gave no finite gradient, which skips the update too.
    fn unscaled(&mut self, grads: Option<GradientsParams>) -> Option<GradientsParams> {
        let Some(grads) = grads else {
            if let Some(scaler) = &mut self.scaler {
                scaler.record(true);
            }
            return None;
        };
        let Some(scaler) = &mut self.scaler else {
            return Some(grads);
        };
        let grads = loss_scale::unscaled(&self.layout, grads, scaler.scale(), &self.main);
        scaler.record(grads.is_none());
        grads
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

    /// Makes the next step end the accumulation cycle ([`TowersConfig::accumulation`]) with
    /// its update, however few micro-batches the cycle then holds: the update is their mean
    /// gradient, as a full cycle's is. What burn-train does at an epoch's end, so that no
    /// micro-batch is left out of the epoch's updates (nor of a checkpoint taken after it).
    /// Without accumulation every step ends its cycle anyway. A step whose towers fail drops
    /// the cycle, and this with it; a batch refused before any tower runs ([`Error::Batch`])
    /// leaves both. Under MPI, every rank must ask it before the same step.
    pub fn end_cycle_early(&mut self) {
        self.cycle.ends_early = true;
    }

    /// Whether the micro-batch about to run ends the cycle with an update.
    fn micro_batch_ends_cycle(&self) -> bool {
        self.cycle.micro + 1 == self.config.accumulation || self.cycle.ends_early
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

    /// Records every step's phases in `timeline`: each tower's forward, backward and
    /// reduction, the exchange across ranks and the update.
    pub fn with_timeline(mut self, timeline: Timeline) -> Self {
        self.timeline = timeline;
        self
    }

    /// Adds `decay · W` to each listed parameter's mean gradient before every update (the
    /// optimizer's or the caller's, once per update, after loss scaling is undone and before a
    /// gradient is kept): the gradient of an L2 penalty `decay · ΣW² / 2` that the loss does not
    /// take through backward, as PyTorch's optimizers' `weight_decay` and TF's L2 loss give it.
    /// It works with any optimizer and a caller's update. On a fused GPU it costs one
    /// element-wise kernel per decayed tensor, where the penalty's backward costs three; an
    /// optimizer that adds it in each parameter's own step costs none (towers-train's
    /// `Decayed`, the trainer's). Parameters are named by [`ParamId`], as in the model; a decay
    /// of 0 leaves its parameter out. Across
    /// processes, call it before [`across_processes`](Self::across_processes), which checks that
    /// every rank decays the same parameters by the same amounts. Parameters the model does
    /// not hold (ids of another instance of the model) are counted in a warning on stderr:
    /// they would never be decayed.
    pub fn with_weight_decay(mut self, decays: impl IntoIterator<Item = (ParamId, f64)>) -> Self {
        self.decay = DecayInUpdate::new(decays);
        if let Some(warning) = self.decay.strangers_warning(self.model()) {
            eprint_line(&warning);
        }
        self
    }

    /// The timeline the steps are recorded in.
    pub fn timeline(&self) -> &Timeline {
        &self.timeline
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
    /// The batch is split into one part per tower, in proportion to the towers' shares (see
    /// [`TowerBatch`]). `loss` runs on every tower's thread with that tower's replica, part and
    /// device: it makes the part's tensors on the device and returns the *mean* loss of the
    /// part, shape `[1]`, optionally with predictions and metrics (see [`IntoTowerLoss`]);
    /// e.g. `|m, items, device| m.loss(batcher.batch(items.to_vec(), device))`.
    ///
    /// # Errors
    ///
    /// [`Error::Batch`] when the batch cannot be split with at least one example per tower or
    /// its weights are not positive; [`Error::TowerPanicked`], [`Error::TowerFailed`] or
    /// [`Error::Spawn`] when a tower fails, which drops the step (see the
    /// [module docs](crate::towers)).
    ///
    /// # Panics
    ///
    /// When the optimizer panics, after which the towers hold no model.
    pub fn step<B, F, L>(&mut self, batch: &B, lr: f64, loss: F) -> Result<StepOutput>
    where
        B: TowerBatch,
        F: for<'a> Fn(&M, B::Part<'a>, &Device) -> L + Sync,
        L: IntoTowerLoss,
    {
        self.step_updated_by(batch, Update::Optimizer(lr), &loss)
    }

    /// [`step`](Self::step), with the update that ends the cycle applied by `update` instead
    /// of the towers' optimizer: it gets the model and the batch's mean gradient (on the
    /// model's device, unscaled, averaged over the ranks) and returns the updated model, e.g.
    /// `|model, grads| { learner.optimizer_step(grads); learner.model() }` for a burn-train
    /// `Learner`, which owns its optimizer and learning-rate schedule. Running state is synced
    /// into the model it returns, and the replicas are forked from it. Never called for
    /// micro-batches that do not end the cycle, nor for an update that loss scaling skips.
    ///
    /// # Errors
    ///
    /// As [`step`](Self::step); and [`Error::Config`] under [`Reduce::AllReduce`], where every
    /// tower updates its own replica with its own optimizer.
    pub fn step_with_update<B, F, L, U>(
        &mut self,
        batch: &B,
        loss: F,
        mut update: U,
    ) -> Result<StepOutput>
    where
        B: TowerBatch,
        F: for<'a> Fn(&M, B::Part<'a>, &Device) -> L + Sync,
        L: IntoTowerLoss,
        U: FnMut(M, GradientsParams) -> M,
    {
        if matches!(self.state, State::AllReduce { .. }) {
            return Err(Error::Config(
                "a caller's update needs Reduce::ParameterDevice: under Reduce::AllReduce every \
                 tower updates its own replica with its own optimizer"
                    .into(),
            ));
        }
        self.step_updated_by(batch, Update::Caller(&mut update), &loss)
    }

    /// A step whose update `update` applies.
    fn step_updated_by<B, F, L>(
        &mut self,
        batch: &B,
        update: Update<'_, M>,
        loss: &F,
    ) -> Result<StepOutput>
    where
        B: TowerBatch,
        F: for<'a> Fn(&M, B::Part<'a>, &Device) -> L + Sync,
        L: IntoTowerLoss,
    {
        let shares: Vec<f64> = self.towers.iter().map(TowerDevice::share).collect();
        let sizes = split_sizes(batch.len(), &shares).map_err(Error::Batch)?;
        // Which tensors are running state shows at the first step that succeeds.
        let detection = (matches!(self.running, Selection::Undecided) && self.has_running_stats)
            .then(|| Detection::before(&self.replicas()[0]));
        if matches!(self.state, State::Single { .. }) {
            let weight = phases::checked_weights(batch, &[batch.len()])?[0];
            self.step_single(batch, weight, update, loss, detection)
        } else {
            self.step_towers(batch, &sizes, update, loss, detection)
        }
    }

    /// Running state from here on: what the first step changed, as [`Detection::decide`]
    /// found it on tower 0's replica.
    fn set_running_state(&mut self, running: Selection) {
        self.has_running_stats = matches!(&running, Selection::Ids(ids) if !ids.is_empty());
        self.running = running;
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

    /// Whether the exchange across ranks overlaps backward (see `overlap.rs`): there are other
    /// ranks, one gradient to exchange (not a ring), and the config asks for it.
    fn overlaps(&self) -> bool {
        self.config.overlap
            && self.processes.as_ref().is_some_and(|p| p.size() > 1)
            && !matches!(self.state, State::AllReduce { .. })
    }

    /// Starts the exchange across ranks of the update this micro-batch ends, before backward:
    /// one tap per tower. `kept` are the towers' gradients from the cycle's earlier
    /// micro-batches; `weight` is the update's.
    fn start_exchange(
        &self,
        kept: Vec<GradientsParams>,
        weight: f64,
    ) -> Result<(OverlappedExchange, Vec<Tap>)> {
        let processes = self
            .processes
            .clone()
            .expect("overlaps() checked the ranks");
        let kept = (kept.into_iter().zip(&self.towers))
            .map(|(grads, tower)| self.layout.flatten_present(grads, tower.device()))
            .collect();
        let towers = self.towers.len();
        let timeline = self.timeline.clone();
        let taps = (towers, &self.tap_schedule);
        OverlappedExchange::start(processes, &self.layout, taps, kept, weight, timeline).map_err(
            |e| Error::Exchange {
                error: While::doing("starting the exchange's thread")(e),
            },
        )
    }

    /// The overlapped exchange's result, once the towers are done: the mean gradient over
    /// every rank's examples.
    fn finish_exchange(&self, exchange: OverlappedExchange) -> Result<Option<GradientsParams>> {
        let _wait = self.timeline.span("exchange wait", Track::Main);
        exchange
            .finish(&self.layout, &self.main)
            .map_err(|error| Error::Exchange { error })
    }

    /// How long the towers' workers are waited for (see `workers.rs`).
    fn patience(&self) -> Patience {
        Patience {
            deadline: self.config.tower_deadline,
            timeout: self.config.tower_timeout,
        }
    }

    /// Hands what the caller's thread queued on the devices since the last step (uploads,
    /// broadcasts, updates, statistics) over for execution, before the towers' threads use the
    /// tensors (see "Threads" in the module docs). A device that fails here fails the tower
    /// pass on it, where it is named.
    /// Each device once (towers often share one GPU); none that computes in host memory,
    /// where nothing is queued; not the model's when the last step's read handed it over.
    fn hand_over(&mut self) {
        let main_handed_over = std::mem::take(&mut self.main_handed_over);
        let mut devices: Vec<&Device> = Vec::with_capacity(self.towers.len() + 1);
        for device in [&self.main]
            .into_iter()
            .chain(self.towers.iter().map(TowerDevice::device))
        {
            let handed_over = main_handed_over && device == &self.main;
            if !handed_over && !devices.contains(&device) && !crate::devices::in_host_memory(device)
            {
                devices.push(device);
            }
        }
        for device in devices {
            crate::host_syncs::note_flush();
            let _ = device.flush();
        }
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
