//! The training loop: input pipeline, towers, optimizer, schedule, moving averages, logs and
//! checkpoints, in the shape of TF's `cifar10_multi_gpu_train.py` and `inception_train.py`.
//!
//! One step: the learning rate of the step, one host batch per micro-batch from the pipeline,
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
//! the checkpointed steps left it, in constant time (checkpoints without one replay the input).
//! Dropout masks ([`towers_models::dropout`]) come from a stream of the seed, the step, the
//! micro-batch and the tower, so they agree too, on any number of towers; Burn's device
//! generators are reseeded from the seed and the step before every step, for other random ops.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::{Device, Int, Tensor};
use towers_data::{HostBatch, InputPosition, Pipeline, PipelineConfig, RecordCount};
use towers_models::{ImageClassifier, with_dropout_seed};
use towers_multigpu::{TowerDevice, TowerLoss, Towers, current_tower, parse_devices};

use crate::checkpoint::Checkpoint;
use crate::checkpoint_dir::{CheckpointDir, Restored};
use crate::config::TrainConfig;
use crate::ema::MovingAverage;
use crate::error::{Error, Result};
use crate::input::Input;
use crate::log::{LogEntry, TrainLog, read_log};
use crate::plot::plot_log;
use crate::schedule::LrSchedule;
use crate::stop::StopFlag;
use crate::summary::{StepScalars, TrainSummaries};

/// The JSON-lines log in the train directory.
pub const LOG_FILE: &str = "train_log.jsonl";
/// The loss and learning-rate plot in the train directory.
pub const PLOT_FILE: &str = "train_plot.svg";

/// A tower's loss: model, images `[n, c, h, w]`, labels `[n]` to the slice's mean loss.
pub type LossFn<M> = dyn Fn(&M, Tensor<4>, Tensor<1, Int>) -> TowerLoss + Send + Sync;

/// Run on the newly built model before training: restoring pretrained weights, freezing
/// parameters. The flag says whether a checkpoint of the run will be restored over it.
pub type PrepareFn<M> = dyn Fn(M, bool) -> Result<M> + Send + Sync;

/// Trains an [`ImageClassifier`] as [`TrainConfig`] says.
pub struct Trainer<M> {
    config: TrainConfig,
    stop: StopFlag,
    loss: Box<LossFn<M>>,
    prepare: Box<PrepareFn<M>>,
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

/// A summary of a run and where its files are.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainReport {
    /// The step the run started from: 0, or the resumed checkpoint's.
    pub first_step: u64,
    /// Updates applied when the run ended.
    pub step: u64,
    /// The loss of the last step run, if any.
    pub last_loss: Option<f64>,
    /// Whether a [`StopFlag`] ended the run before `max_steps`.
    pub interrupted: bool,
    /// Training examples per second over the run (input waits included, checkpoints not).
    pub examples_per_sec: f64,
    /// The newest checkpoint.
    pub checkpoint: Option<PathBuf>,
    /// The checkpoint directory.
    pub checkpoint_dir: PathBuf,
    /// The JSON-lines log.
    pub log: PathBuf,
    /// The loss and learning-rate plot.
    pub plot: PathBuf,
    /// Input records read, and those skipped as corrupt (`skip_corrupt_records`).
    pub records: RecordCount,
    /// This run's TensorBoard event file, unless summaries were off.
    pub events: Option<PathBuf>,
}

/// How the run ended and where it wrote: the lines every example prints at the end.
impl std::fmt::Display for TrainReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let how = if self.interrupted { "stopped" } else { "done" };
        writeln!(
            f,
            "{how} at step {} ({:.1} examples/sec over the run)",
            self.step, self.examples_per_sec
        )?;
        if let Some(checkpoint) = &self.checkpoint {
            writeln!(
                f,
                "checkpoints: {} (newest {})",
                self.checkpoint_dir.display(),
                checkpoint.display()
            )?;
        }
        if self.records.skipped > 0 {
            writeln!(
                f,
                "skipped {} corrupt input records of {} read",
                self.records.skipped, self.records.read
            )?;
        }
        writeln!(f, "log:         {}", self.log.display())?;
        if let Some(events) = &self.events {
            writeln!(f, "events:      {}", events.display())?;
        }
        write!(f, "plot:        {}", self.plot.display())
    }
}

impl<M: ImageClassifier + 'static> Trainer<M> {
    /// A trainer that minimizes the model's own loss ([`ImageClassifier::loss`]).
    pub fn new(config: TrainConfig) -> Self {
        Self {
            config,
            stop: StopFlag::new(),
            loss: Box::new(|m: &M, x, y| TowerLoss::new(m.loss(x, y).loss)),
            prepare: Box::new(|m, _| Ok(m)),
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

    /// Minimizes `loss` instead of the model's own loss.
    pub fn with_loss(
        mut self,
        loss: impl Fn(&M, Tensor<4>, Tensor<1, Int>) -> TowerLoss + Send + Sync + 'static,
    ) -> Self {
        self.loss = Box::new(loss);
        self
    }

    /// The configuration.
    pub fn config(&self) -> &TrainConfig {
        &self.config
    }

    /// Trains a model built by `init` (on the parameter device, with autodiff) on `input`.
    ///
    /// A train directory that already holds checkpoints is an error unless the configuration
    /// says `resume`, so that no run overwrites another by accident.
    pub fn run(&self, init: impl FnOnce(&Device) -> M, input: &Input) -> Result<Trained<M>> {
        let c = &self.config;
        c.validate()?;
        let towers_list = parse_devices(&c.devices)?;
        let main = match &c.parameter_device {
            Some(entry) => entry.parse::<TowerDevice>()?.device().clone(),
            None => towers_list[0].device().clone(),
        }
        .autodiff();
        let ckpts = CheckpointDir::new(&c.train_dir, c.keep_checkpoints);
        let resume_from = match ckpts.latest()? {
            Some((step, _)) if !c.resume => {
                return Err(Error::Config(format!(
                    "{} already holds checkpoints up to step {step}: pass --resume to continue \
                     that run, or choose another --train-dir",
                    c.train_dir.display()
                )));
            }
            latest => latest,
        };
        std::fs::create_dir_all(&c.train_dir).map_err(Error::io(&c.train_dir))?;

        let model = (self.prepare)(init_seeded(init, &main, c.seed), resume_from.is_some())?;
        let restored = match resume_from {
            Some(_) => ckpts.load_newest_valid()?,
            None => None,
        };
        let resume_notes = restored.as_ref().map_or_else(Vec::new, Restored::notes);
        let mut checkpoint = restored.as_ref().map(|r| r.path.clone());
        let start = match restored {
            Some(r) => self.restore(model, r.checkpoint, &r.path)?,
            None => Start {
                averages: c
                    .moving_average
                    .then(|| MovingAverage::new(&model, c.moving_average_decay)),
                model,
                optimizer: c.optimizer.init(),
                step: 0,
                input: None,
            },
        };
        let Start {
            model,
            optimizer,
            mut averages,
            mut step,
            input: position,
        } = start;
        let first_step = step;
        let mut towers = Towers::new(model, optimizer, &towers_list, c.towers.to_towers_config())?;

        let examples_per_epoch = match c.examples_per_epoch {
            Some(n) => n,
            None => input.count_examples()?,
        };
        let schedule =
            c.learning_rate
                .resolve(examples_per_epoch, c.examples_per_step(), c.max_steps)?;
        let mut log = TrainLog::open(&c.train_dir.join(LOG_FILE), step, c.max_steps)?;
        log.println(&self.banner(&towers_list, examples_per_epoch, &schedule, step));
        for note in &resume_notes {
            log.println(note);
        }
        let reader_threads = c.reader_threads.unwrap_or(4 * towers_list.len());
        let mut pipeline = self.start_input(input, reader_threads, step, position, &log)?;
        let mut summaries = TrainSummaries::open(&c.summaries, &c.train_dir, step, c.max_steps)?;

        let mut saved_step = checkpoint.is_some().then_some(step);
        let mut interval = Interval::default();
        let mut total = Interval::default();
        let mut last_loss = None;
        let mut interrupted = false;
        while step < c.max_steps {
            if self.stop.is_requested() {
                interrupted = true;
                break;
            }
            let started = Instant::now();
            let lr = schedule.at(step);
            seed_devices(towers.devices(), mix(c.seed, step));
            let (mut loss_sum, mut examples) = (0.0, 0usize);
            for micro in 0.. {
                let batch = next_batch(&mut pipeline)?;
                summaries.before_batch(step + 1, &batch, &mut towers)?;
                let seed = mix(mix(c.seed, step), micro);
                let out = towers.step(&batch, lr, seeded_loss(&*self.loss, seed))?;
                summaries.add(&out);
                loss_sum += out.loss * out.examples as f64;
                examples += out.examples;
                if out.updated {
                    break;
                }
            }
            let loss = loss_sum / examples as f64;
            step += 1;
            if !loss.is_finite() {
                log.finish();
                return Err(Error::Diverged {
                    step,
                    loss,
                    last_checkpoint: checkpoint
                        .as_ref()
                        .map_or("none".into(), |p| p.display().to_string()),
                });
            }
            if let Some(averages) = &mut averages {
                averages.update(towers.model(), step);
            }
            last_loss = Some(loss);
            let took = started.elapsed();
            interval.add(took, examples);
            total.add(took, examples);
            let fill = pipeline.fill();
            let scalars = StepScalars {
                step,
                loss,
                lr,
                took,
                examples,
                queue_fill: fill.examples,
            };
            summaries.after_step(&scalars, &mut towers)?;
            log.progress(step);
            if step % c.log_every == 0 || step == c.max_steps {
                log.record(&LogEntry {
                    step,
                    loss,
                    lr,
                    examples_per_sec: interval.examples_per_sec(),
                    sec_per_batch: interval.sec_per_step(),
                    input_queue_fill: fill.examples,
                    batch_queue_fill: fill.batches,
                    corrupt_records_skipped: pipeline.record_count().skipped,
                })?;
                interval = Interval::default();
            }
            if step % c.checkpoint_every == 0 && step < c.max_steps {
                let position = pipeline.position();
                checkpoint = Some(self.save(&ckpts, &towers, averages.as_ref(), step, position)?);
                saved_step = Some(step);
            }
        }
        if saved_step != Some(step) {
            let position = pipeline.position();
            checkpoint = Some(self.save(&ckpts, &towers, averages.as_ref(), step, position)?);
        }
        let records = pipeline.record_count();
        pipeline.stop()?;
        let events = summaries.close()?;
        log.finish();
        let log_path = c.train_dir.join(LOG_FILE);
        let plot_path = c.train_dir.join(PLOT_FILE);
        plot_log(&read_log(&log_path)?, &plot_path)?;
        Ok(Trained {
            model: towers.into_model(),
            averages: averages.map(|a| a.averages().clone()),
            report: TrainReport {
                first_step,
                step,
                last_loss,
                interrupted,
                examples_per_sec: total.examples_per_sec(),
                checkpoint,
                checkpoint_dir: c.train_dir.clone(),
                log: log_path,
                plot: plot_path,
                records,
                events,
            },
        })
    }

    /// The training input from `step`: where `position` stands when the checkpoint saved one;
    /// for a checkpoint without one, replayed from step 0 (`replay_input_on_resume`) or
    /// started afresh under a seed of the step, with a warning either way.
    fn start_input(
        &self,
        input: &Input,
        reader_threads: usize,
        step: u64,
        position: Option<InputPosition>,
        log: &TrainLog,
    ) -> Result<Pipeline> {
        let c = &self.config;
        let config = PipelineConfig {
            reader_threads,
            seed: c.seed,
            corrupt_records: c.corrupt_records(),
            ..PipelineConfig::train(c.batch_size)
        };
        if let Some(position) = position {
            log.println(&format!(
                "resuming the input at step {step}: epoch {}, record {} of the run",
                position.next.epoch, position.next.seq
            ));
            return input.resume(config, &position);
        }
        if step == 0 {
            return input.start(config);
        }
        let warning = format!("warning: the checkpoint of step {step} holds no input position");
        if !c.replay_input_on_resume {
            log.println(&format!(
                "{warning}: the input starts afresh under a seed derived from the step"
            ));
            return input.start(PipelineConfig {
                seed: mix(c.seed, step),
                ..config
            });
        }
        let batches = step * c.towers.accumulation as u64;
        log.println(&format!(
            "{warning}: reading past the {batches} batches its steps consumed"
        ));
        let mut pipeline = input.start(config)?;
        for _ in 0..batches {
            next_batch(&mut pipeline)?;
        }
        Ok(pipeline)
    }

    /// The model, optimizer, averages, step and input position of `ckpt`, read from `path`.
    fn restore(&self, model: M, ckpt: Checkpoint, path: &Path) -> Result<Start<M>> {
        let c = &self.config;
        let step = ckpt.step;
        let averages = ckpt.averages;
        let optimizer = c.optimizer.init().load_record(ckpt.optimizer);
        let model = load_into(model, ckpt.model, path)?;
        let averages = match (c.moving_average, averages) {
            (false, _) => None,
            (true, Some(record)) => Some(MovingAverage::from_averages(
                load_into(model.valid(), record, path)?,
                c.moving_average_decay,
            )),
            // The run that wrote it kept none: start them at the restored weights.
            (true, None) => Some(MovingAverage::new(&model, c.moving_average_decay)),
        };
        Ok(Start {
            model,
            optimizer,
            averages,
            step,
            input: ckpt.input,
        })
    }

    fn save(
        &self,
        ckpts: &CheckpointDir,
        towers: &Towers<M>,
        averages: Option<&MovingAverage<M>>,
        step: u64,
        input: InputPosition,
    ) -> Result<PathBuf> {
        ckpts.save(Checkpoint {
            step,
            model: towers.model().clone().into_record(),
            optimizer: towers.optimizer().to_record(),
            averages: averages.map(|a| a.averages().clone().into_record()),
            input: Some(input),
            config: serde_json::to_value(&self.config).expect("a config always serializes"),
        })
    }

    fn banner(
        &self,
        towers: &[TowerDevice],
        examples_per_epoch: u64,
        schedule: &LrSchedule,
        step: u64,
    ) -> String {
        let c = &self.config;
        let names: Vec<&str> = towers.iter().map(TowerDevice::name).collect();
        let parameters = match &c.parameter_device {
            Some(entry) => format!(", model on {entry}"),
            None => String::new(),
        };
        format!(
            "training on {} tower{} ({}){parameters}, batch {} per step, {} examples per epoch, steps {step}..{}, \
             {:?}, learning rate {schedule:?}, train dir {}",
            towers.len(),
            if towers.len() == 1 { "" } else { "s" },
            names.join(", "),
            c.examples_per_step(),
            examples_per_epoch,
            c.max_steps,
            c.optimizer,
            c.train_dir.display()
        )
    }
}

/// What a run starts from.
struct Start<M> {
    model: M,
    optimizer: burn::optim::ModuleOptimizer,
    averages: Option<MovingAverage<M>>,
    step: u64,
    /// Where the input stands; `None` for a fresh run or a checkpoint without a position.
    input: Option<InputPosition>,
}

/// `model` with the weights of `record`, which must name exactly its parameters.
pub fn load_into<M: Module>(model: M, record: burn::store::ModuleRecord, path: &Path) -> Result<M> {
    model
        .try_load_record(record)
        .map_err(|e| Error::Checkpoint {
            path: path.to_path_buf(),
            reason: format!("does not fit the model: {e}"),
        })
}

/// Burn's CPU generators are global per backend: concurrent runs (tests) take this lock to
/// seed them, so that no run reseeds a generator while another draws its initial weights.
static DEVICE_RNG: Mutex<()> = Mutex::new(());

/// Builds the model with a generator seeded, and draws every lazily initialized weight at once,
/// in module order, so the weights depend on the seed alone.
///
/// The weights are drawn on the host's CPU backend (flex) when this build has it, then moved to
/// `device`: GPU generators draw other numbers from the same seed, and a run must start from the
/// same weights on `flex`, `wgpu` or `flex,wgpu`. Without flex, they are drawn on `device`.
fn init_seeded<M: Module>(init: impl FnOnce(&Device) -> M, device: &Device, seed: u64) -> M {
    let host = match "flex".parse::<TowerDevice>() {
        Ok(flex) => flex.device().clone().autodiff(),
        Err(_) => device.clone(),
    };
    let _guard = DEVICE_RNG.lock().unwrap_or_else(PoisonError::into_inner);
    host.seed(seed);
    let model = init(&host);
    model.visit(&mut Materialize);
    if &host == device {
        model
    } else {
        model.fork(device)
    }
}

struct Materialize;

impl ModuleVisitor for Materialize {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let _ = param.val();
    }
}

/// `loss` with its dropout masks drawn from a stream of `seed` and the tower (see
/// [`towers_models::with_dropout_seed`]): the same masks in a resumed run, whichever thread
/// runs which tower when.
fn seeded_loss<M>(
    loss: &LossFn<M>,
    seed: u64,
) -> impl Fn(&M, Tensor<4>, Tensor<1, Int>) -> TowerLoss + Sync + '_ {
    move |m, x, y| {
        let tower = current_tower().unwrap_or(0) as u64;
        with_dropout_seed(mix(seed, tower), || loss(m, x, y))
    }
}

fn seed_devices(towers: &[TowerDevice], seed: u64) {
    let _guard = DEVICE_RNG.lock().unwrap_or_else(PoisonError::into_inner);
    let mut seeded: Vec<&Device> = Vec::new();
    for tower in towers {
        if !seeded.contains(&tower.device()) {
            tower.device().seed(seed);
            seeded.push(tower.device());
        }
    }
}

/// A seed for step `step` of a run seeded `seed` (SplitMix64's finalizer over both).
fn mix(seed: u64, step: u64) -> u64 {
    let mut z = seed ^ step.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn next_batch(pipeline: &mut Pipeline) -> Result<HostBatch> {
    pipeline
        .next_batch()?
        .ok_or_else(|| Error::Config("the training input ended".into()))
}

/// Training time and examples over some steps.
#[derive(Default)]
pub(crate) struct Interval {
    time: Duration,
    steps: u64,
    examples: usize,
}

impl Interval {
    pub(crate) fn add(&mut self, took: Duration, examples: usize) {
        self.time += took;
        self.steps += 1;
        self.examples += examples;
    }

    pub(crate) fn examples_per_sec(&self) -> f64 {
        self.examples as f64 / self.time.as_secs_f64().max(1e-9)
    }

    fn sec_per_step(&self) -> f64 {
        self.time.as_secs_f64() / self.steps.max(1) as f64
    }
}
