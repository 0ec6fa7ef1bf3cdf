//! The training loop: input pipeline, towers, optimizer, schedule, moving averages, logs and
//! checkpoints, in the shape of TF's `cifar10_multi_gpu_train.py` and `inception_train.py`.
//!
//! Any model trains here through a [`TrainStep`] (the loss of a tower's part of a batch) on any
//! [`TrainInput`] whose batches the step takes: image files through [`crate::Input`] for the
//! image classifiers, a Burn `Dataset` for the rest.
//!
//! One step: the learning rate of the step, one batch per micro-batch from the input,
//! [`Towers::step`] (split, forward/backward on every tower, gradient mean, one update), the
//! moving averages, TensorBoard summaries (see [`crate::summary`]), a log line every
//! `log_every` steps and a checkpoint every `checkpoint_every`. A loss that is not finite ends the run with [`Error::Diverged`]; a raised
//! [`StopFlag`] ends it after a checkpoint. Either way, every pipeline thread is stopped and
//! joined before [`Trainer::run`] returns (tower threads never outlive a step).
//!
//! # Reproducibility
//!
//! With one seed, a run gives the same losses whatever the number of towers (up to float
//! rounding), backends and reader threads: the model is initialized from the seed on the CPU,
//! the input pipeline is deterministic, and the towers average to the full-batch gradient.
//! A resumed run continues with the batches, optimizer state, averages and learning rate an
//! uninterrupted run would have had: the checkpoint's input position restarts the input where
//! the checkpointed steps left it, in time independent of the step (on another number of MPI
//! ranks, the epoch in progress is re-cut among them: see `checkpointed_input.rs`).
//! Dropout masks ([`towers_models::dropout`]) come from a stream of the seed, the step, the
//! micro-batch and the tower, so they agree too, on any number of towers; Burn's device
//! generators are reseeded from the seed and the step before every step, for other random ops.

mod checkpointed_input;
mod frozen;
mod input_start;
mod ranks;
pub use ranks::mpi_job;
mod report;
mod run;
mod start;
mod watchdog;

pub use report::TrainReport;
pub use start::{init_holding_generators, load_into, lock_device_generators};

use burn::module::Module;
use burn::tensor::{Device, Int, Tensor};
use towers_kernels::Precision;
use towers_models::ImageClassifier;
use towers_multigpu::{Processes, TowerDevice, TowerLoss, parse_devices};

use crate::checkpoint::CheckpointDir;
use crate::config::TrainConfig;
use crate::error::{Error, Result};
use crate::step::{ClassifierStep, TrainStep};
use crate::stop::StopFlag;
use crate::tf_run::{ContinuedRun, TfRun};
use crate::train_dir::TrainDirLock;
use crate::train_input::{BatchSource, TrainInput};

/// The JSON-lines log in the train directory.
pub const LOG_FILE: &str = "train_log.jsonl";
/// The loss and learning-rate plot in the train directory.
pub const PLOT_FILE: &str = "train_plot.svg";

/// Run on the newly built model before training: restoring pretrained weights, freezing
/// parameters. The flag says whether a checkpoint of the run will be restored over it.
pub type PrepareFn<M> = dyn Fn(M, bool) -> Result<M> + Send + Sync;

/// How a model goes on from a TF run's checkpoint ([`TfRun::continue_into`] for its type).
type ContinueTfFn<M> =
    fn(&TfRun, M, &crate::optim::OptimizerConfig, bool) -> Result<ContinuedRun<M>>;

/// Trains a model `M` through its [`TrainStep`] `S` as [`TrainConfig`] says: an
/// [`ImageClassifier`] on image files by default ([`Trainer::new`]), any model and batch with
/// a step of its own ([`Trainer::with_step`]).
pub struct Trainer<M, S = ClassifierStep<M>> {
    config: TrainConfig,
    stop: StopFlag,
    step: S,
    prepare: Box<PrepareFn<M>>,
    /// Set when `M` has TF names ([`Trainer::with_tf_resume`]).
    continue_tf: Option<ContinueTfFn<M>>,
    /// The other ranks of a multi-process job, if any.
    processes: Option<Processes>,
}

/// What a run leaves behind.
#[derive(Debug)]
pub struct Trained<M> {
    /// The model after the last update, on the first tower's device (with autodiff).
    pub model: M,
    /// The moving averages of its weights (evaluation state), when the run keeps them.
    pub averages: Option<M>,
    /// What happened.
    pub report: TrainReport,
}

impl<M> Trained<M> {
    /// The weights to evaluate, and which they are: the moving averages when the run kept
    /// them (TF's eval scripts restore those), else the trained weights.
    pub fn eval_weights(&self) -> (&M, &'static str) {
        match &self.averages {
            Some(averages) => (averages, "moving averages"),
            None => (&self.model, "trained weights"),
        }
    }
}

impl<M: ImageClassifier + 'static> Trainer<M> {
    /// A trainer that minimizes the model's own loss ([`ImageClassifier::loss`]) on image
    /// batches.
    pub fn new(config: TrainConfig) -> Self {
        Self::with_step(config, ClassifierStep::default())
    }

    /// Minimizes `loss` instead of the model's own loss.
    pub fn with_loss(
        mut self,
        loss: impl Fn(&M, Tensor<4>, Tensor<1, Int>) -> TowerLoss + Send + Sync + 'static,
    ) -> Self {
        self.step = ClassifierStep::with_loss(loss);
        self
    }
}

impl<M: Module + towers_models::weights::TfNamed + 'static, S: TrainStep<M>> Trainer<M, S> {
    /// Continues TF 1.x runs: `--resume` in a train directory that a TF trainer left (its
    /// `checkpoint` state file), holding no checkpoint of ours, goes on from the newest of TF's
    /// with its weights, optimizer slots, moving averages and `global_step` (see
    /// [`TfRun::continue_into`]), as TF's trainer would; the input starts over. Without this,
    /// such a directory is an error.
    pub fn with_tf_resume(mut self) -> Self {
        self.continue_tf = Some(TfRun::continue_into::<M>);
        self
    }
}

impl<M: Module + 'static, S: TrainStep<M>> Trainer<M, S> {
    /// A trainer that minimizes the loss of `step`, on the batches of the input given to
    /// [`run`](Self::run).
    pub fn with_step(config: TrainConfig, step: S) -> Self {
        Self {
            config,
            stop: StopFlag::new(),
            step,
            prepare: Box::new(|m, _| Ok(m)),
            continue_tf: None,
            processes: None,
        }
    }

    /// Runs `prepare` on the newly built model (see [`PrepareFn`]), e.g.
    /// [`fine_tuning`](crate::fine_tuning).
    pub fn with_prepare(
        mut self,
        prepare: impl Fn(M, bool) -> Result<M> + Send + Sync + 'static,
    ) -> Self {
        self.prepare = Box::new(prepare);
        self
    }

    /// Stops the run when `stop` is raised (e.g. [`StopFlag::ctrl_c`]).
    pub fn with_stop(mut self, stop: StopFlag) -> Self {
        self.stop = stop;
        self
    }

    /// The configuration.
    pub fn config(&self) -> &TrainConfig {
        &self.config
    }

    /// Trains a model built by `init` (on the parameter device, with autodiff) on `input`.
    ///
    /// A train directory that already holds checkpoints is an error unless the configuration
    /// says `resume`, and one another run trains in is an error (the run holds it locked,
    /// [`TrainDirLock`](crate::TrainDirLock)), so that no run overwrites another by accident.
    ///
    /// As one rank of several (see [`with_processes`](Self::with_processes)), an error here
    /// ends the job on every rank.
    pub fn run<I>(&self, init: impl FnOnce(&Device) -> M, input: &I) -> Result<Trained<M>>
    where
        I: TrainInput<Source: BatchSource<Batch = S::Batch>>,
    {
        self.or_end_job(self.run_rank(init, input))
    }

    /// [`run`](Self::run), on this process.
    fn run_rank<I>(&self, init: impl FnOnce(&Device) -> M, input: &I) -> Result<Trained<M>>
    where
        I: TrainInput<Source: BatchSource<Batch = S::Batch>>,
    {
        let c = &self.config;
        c.validate()?;
        let devices = parse_devices(&c.devices)?;
        check_precision(c.precision, &devices)?;
        let main = self.parameter_device(&devices)?;
        // After the checks above, which write nothing.
        let _training_here = match self.writes() {
            true => Some(TrainDirLock::take(&c.train_dir)?),
            false => None,
        };
        self.same_training_on_every_rank()?;
        let ckpts = CheckpointDir::new(&c.train_dir, c.keep_checkpoints);
        let start = self.start(init, &main, &ckpts)?;
        let mut run = self.begin(start, &devices, input)?;
        while run.step < c.max_steps {
            if self.stop_requested() {
                run.interrupted = true;
                break;
            }
            let timeline = run.timeline.clone();
            let _step = timeline.span("step", towers_multigpu::Track::Main);
            let update = self.train_step(&mut run)?;
            self.after_step(&mut run, &update, &ckpts)?;
        }
        self.finish(run, &ckpts)
    }

    /// The device the model and its optimizer live on: `parameter_device`, or the first
    /// tower's; with autodiff.
    fn parameter_device(&self, devices: &[TowerDevice]) -> Result<Device> {
        let device = match &self.config.parameter_device {
            Some(entry) => entry.parse::<TowerDevice>()?.device().clone(),
            None => devices[0].device().clone(),
        };
        Ok(device.autodiff())
    }
}

/// Fails when a tower device has no type for the products' `precision`: the backend would fail
/// on its own thread, compiling the first cast, not at the op that asked (wgpu's WGSL has no
/// bf16). Every device has f32. Remote devices are not asked: Burn's client panics when their
/// server cannot be reached, which their tower reports by name at the first step instead.
fn check_precision(precision: Precision, devices: &[TowerDevice]) -> Result<()> {
    if precision == Precision::F32 {
        return Ok(());
    }
    let lacks = |t: &&TowerDevice| !t.is_remote() && !precision.supported_on(t.device());
    let Some(lacking) = devices.iter().find(lacks) else {
        return Ok(());
    };
    let other = match Precision::F16.supported_on(lacking.device()) && precision != Precision::F16 {
        true => "f32 or f16",
        false => "f32",
    };
    Err(Error::Config(format!(
        "precision: products in {precision} need a {precision} type on every tower device, and \
         {} has none; choose {other} there",
        lacking.name()
    )))
}
