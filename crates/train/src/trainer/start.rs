//! Where a run starts: a model drawn from the seed, or a checkpoint restored over it; and
//! the seeding that makes runs reproducible.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::ModuleOptimizer;
use burn::tensor::{Device, Tensor};
use towers_data::atomic_file::create_dir_durably;
use towers_multigpu::{LossScaleState, TowerDevice};

use super::frozen::same_frozen;
use super::ranks::Choice;
use super::{ContinueTfFn, Trainer};
use crate::checkpoint::{Checkpoint, CheckpointDir, Restored};
use crate::error::{Error, Result};
use crate::optim::{MovingAverage, OptimizerConfig};
use crate::step::TrainStep;
use crate::tf_run::TfRun;

/// What a run starts from.
pub(super) struct Start<M> {
    pub(super) model: M,
    pub(super) optimizer: burn::optim::ModuleOptimizer,
    pub(super) averages: Option<MovingAverage<M>>,
    pub(super) step: u64,
    /// The checkpoint restored, if any.
    pub(super) checkpoint: Option<PathBuf>,
    /// What the log should say about the restore (e.g. checkpoints skipped as corrupt).
    pub(super) notes: Vec<String>,
    /// Where the input stands (as the source's JSON); `None` for a fresh run or a checkpoint
    /// without a position.
    pub(super) input: Option<serde_json::Value>,
    /// Where loss scaling stood; `None` for a fresh run or a checkpoint without it.
    pub(super) loss_scale: Option<LossScaleState>,
}

impl<M: Module + 'static, S: TrainStep<M>> Trainer<M, S> {
    /// A fresh model from `init` and the seed, or the newest valid checkpoint of the train
    /// directory restored over it when the config says `resume`.
    pub(super) fn start(
        &self,
        init: impl FnOnce(&Device) -> M,
        main: &Device,
        ckpts: &CheckpointDir,
    ) -> Result<Start<M>> {
        let c = &self.config;
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
        let tf_run = match resume_from {
            Some(_) => None,
            None => self.tf_run_to_continue()?,
        };
        create_dir_durably(&c.train_dir).map_err(Error::io(&c.train_dir))?;
        let resuming = resume_from.is_some() || tf_run.is_some();
        let model = (self.prepare)(init_seeded(init, main, c.seed), resuming)?;
        // Under MPI every rank resuming asks rank 0, whatever it sees in the directory itself
        // (rank 0 may be renaming a corrupt checkpoint meanwhile).
        let restored = match resume_from.is_some() || (c.resume && self.ranks() > 1) {
            true => self.restore_agreed(ckpts, main)?,
            false => None,
        };
        match (restored, tf_run) {
            (Some(r), _) => {
                let mut notes = r.notes();
                let mut start = self.restore(model, r.checkpoint, &r.path)?;
                start.checkpoint = Some(r.path);
                notes.append(&mut start.notes);
                start.notes = notes;
                Ok(start)
            }
            (None, Some((run, continue_into))) => self.continue_tf(model, &run, continue_into),
            (None, None) => Ok(Start {
                averages: (c.moving_average)
                    .then(|| MovingAverage::new(&model, c.moving_average_decay)),
                optimizer: self.optimizer_for(&model),
                model,
                step: 0,
                checkpoint: None,
                notes: Vec::new(),
                input: None,
                loss_scale: None,
            }),
        }
    }

    /// The TF run the train directory holds (see [`Trainer::with_tf_resume`]) and how the model
    /// goes on from it, when the configuration says `resume`; without it, such a directory is an
    /// error, as one of ours.
    fn tf_run_to_continue(&self) -> Result<Option<(TfRun, ContinueTfFn<M>)>> {
        let c = &self.config;
        let Some(run) = TfRun::find(&c.train_dir)? else {
            return Ok(None);
        };
        let (prefix, step) = (run.path().display(), run.step());
        match (c.resume, self.continue_tf) {
            (false, _) => Err(Error::Config(format!(
                "{} holds a TF run's checkpoint ({prefix}, step {step}): pass --resume to \
                 continue that run, or choose another --train-dir",
                c.train_dir.display()
            ))),
            (true, None) => Err(Error::Config(format!(
                "{} holds a TF run's checkpoint ({prefix}, step {step}), and this trainer \
                 cannot continue it: its model has no TF names (`Trainer::with_tf_resume` \
                 takes a model that implements `TfNamed`); choose another --train-dir",
                c.train_dir.display()
            ))),
            (true, Some(continue_into)) => Ok(Some((run, continue_into))),
        }
    }

    /// `model` as the TF run `run` left it (`continue_into`: [`TfRun::continue_into`]).
    fn continue_tf(
        &self,
        model: M,
        run: &TfRun,
        continue_into: ContinueTfFn<M>,
    ) -> Result<Start<M>> {
        let c = &self.config;
        let continued = continue_into(run, model, &c.optimizer, c.moving_average)?;
        let averages = (continued.averages)
            .map(|averages| MovingAverage::from_averages(averages, c.moving_average_decay));
        Ok(Start {
            optimizer: self
                .optimizer_for(&continued.model)
                .load_record(continued.optimizer),
            model: continued.model,
            averages,
            step: continued.step,
            checkpoint: None,
            notes: continued.notes,
            input: None,
            loss_scale: None,
        })
    }

    /// The newest valid checkpoint, the same on every rank: rank 0 (or a process alone)
    /// chooses it, renaming corrupt newer ones, and the other ranks load the one it chose,
    /// touching nothing, so that ranks sharing a train directory never race on a rename.
    fn restore_agreed(&self, ckpts: &CheckpointDir, main: &Device) -> Result<Option<Restored>> {
        if self.rank() == 0 {
            let restored = ckpts.load_newest_valid();
            let choice = match &restored {
                Ok(Some(r)) => Choice::Step(r.checkpoint.step),
                Ok(None) => Choice::Fresh,
                // The others wait for the choice: tell them, and let this error end the job.
                Err(_) => Choice::Failed,
            };
            self.agreed_checkpoint(choice, main);
            return restored;
        }
        let step = match self.agreed_checkpoint(Choice::Fresh, main) {
            Choice::Fresh => return Ok(None),
            Choice::Step(step) => step,
            Choice::Failed => {
                return Err(Error::Checkpoint {
                    path: ckpts.dir().to_path_buf(),
                    reason: "rank 0 could not load a checkpoint to resume from (its error ends \
                             the job)"
                        .into(),
                    error: None,
                });
            }
        };
        let path = ckpts.path(step);
        let checkpoint = Checkpoint::load(&path)?;
        Ok(Some(Restored {
            checkpoint,
            path,
            skipped: Vec::new(),
        }))
    }

    /// A fresh optimizer for `model` (its parameter ids final): the step's weight decays added
    /// in each decayed parameter's update ([`TrainStep::decay_in_update`]).
    fn optimizer_for(&self, model: &M) -> ModuleOptimizer {
        let decays = self.step.decay_in_update(model);
        self.config.optimizer.init_with_weight_decays(&decays)
    }

    /// The model, optimizer, averages, step and input position of `ckpt`, read from `path`.
    fn restore(&self, model: M, ckpt: Checkpoint, path: &Path) -> Result<Start<M>> {
        let c = &self.config;
        let step = ckpt.step;
        let averages = ckpt.averages;
        same_optimizer_kind(&ckpt.config, &c.optimizer, path)?;
        same_frozen(&ckpt.config, &model, path)?;
        let notes = seed_change(&ckpt.config, ckpt.input.as_ref(), c.seed);
        let notes = notes.into_iter().collect();
        let model = load_into(model, ckpt.model, path)?;
        let optimizer = self.optimizer_for(&model).load_record(ckpt.optimizer);
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
            checkpoint: None,
            notes,
            input: ckpt.input,
            loss_scale: ckpt.loss_scale,
        })
    }
}

/// Refuses the checkpoint `path`, whose run's config is `saved`, when that run used another
/// kind of optimizer than `optimizer`: its state (momentum, Adam's moments, RMSProp's mean
/// square) cannot carry over, and Burn's `load_record` would drop it without a word, where TF's
/// `Saver.restore` and PyTorch's `Optimizer.load_state_dict` refuse it. The other settings may
/// change on resume (a new schedule, batch size or devices), as in TF.
fn same_optimizer_kind(
    saved: &serde_json::Value,
    optimizer: &OptimizerConfig,
    path: &Path,
) -> Result<()> {
    let kind = |config: &serde_json::Value| config.get("kind")?.as_str().map(str::to_owned);
    let ours = serde_json::to_value(optimizer).expect("an optimizer config always serializes");
    match (saved.get("optimizer").and_then(kind), kind(&ours)) {
        (Some(theirs), Some(ours)) if theirs != ours => Err(Error::Checkpoint {
            path: path.to_path_buf(),
            reason: format!(
                "written by a run with the `{theirs}` optimizer, where this run's is `{ours}`: \
                 its optimizer state cannot carry over; resume with `kind = \"{theirs}\"` in \
                 the config's [optimizer], or train in another --train-dir"
            ),
            error: None,
        }),
        _ => Ok(()),
    }
}

/// A note when this run's seed is not the one the checkpoint's input or steps went on with: the
/// input goes on under the seed its position keeps (`input`, rank 0's; every rank's is the
/// same), so that no record is read twice or skipped, and each step's own draws (dropout)
/// follow this run's seed, where the run that wrote the checkpoint (`config`) drew from its own.
fn seed_change(
    config: &serde_json::Value,
    input: Option<&serde_json::Value>,
    seed: u64,
) -> Option<String> {
    let input_seed =
        input.and_then(|input| input.get("rank_positions")?.get(0)?.get("seed")?.as_u64());
    let steps_seed = config.get("seed").and_then(serde_json::Value::as_u64);
    let mut changes = Vec::new();
    if let Some(theirs) = input_seed.filter(|&theirs| theirs != seed) {
        changes.push(format!(
            "the input goes on under seed {theirs}, which its position keeps (its order, \
             shuffling and distortions)"
        ));
    }
    if let Some(theirs) = steps_seed.filter(|&theirs| theirs != seed) {
        changes.push(format!(
            "each step's own draws (dropout) follow seed {seed}, where the checkpoint's run \
             drew from seed {theirs} (--seed {theirs} goes on as it would have)"
        ));
    }
    (!changes.is_empty()).then(|| format!("seed {seed}: {}", changes.join("; ")))
}

/// `model` with the weights of `record`, which must name exactly its parameters.
pub fn load_into<M: Module>(model: M, record: burn::store::ModuleRecord, path: &Path) -> Result<M> {
    model
        .try_load_record(record)
        .map_err(|e| Error::Checkpoint {
            path: path.to_path_buf(),
            reason: "does not fit the model".into(),
            error: Some(Box::new(e)),
        })
}

/// Burn's CPU generators are global per backend: concurrent runs (tests) take this lock to
/// seed them, so that no run reseeds a generator while another draws its initial weights.
static DEVICE_RNG: Mutex<()> = Mutex::new(());

/// Holds Burn's device generators as a [`Trainer`](super::Trainer) does while it seeds them and
/// draws its initial weights. Code that draws from a generator (builds a module, calls
/// `Tensor::random`) in the same process while runs start, as tests side by side do, holds this
/// guard meanwhile: otherwise it can take numbers from between a run's seed and its weights,
/// and the run's weights no longer follow its seed. A module draws its weights at their first
/// use, not when built: build it with [`init_holding_generators`]. Blocks while a run is
/// seeding; one run per process, the usual case, never waits on it.
pub fn lock_device_generators() -> MutexGuard<'static, ()> {
    DEVICE_RNG.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `build`'s module with every weight drawn while holding [`lock_device_generators`]: Burn draws
/// a module's initial weights lazily, at each parameter's first use, so a module built under
/// the guard and used after it draws then, beside other runs. For code that builds modules
/// beside runs (tests side by side).
pub fn init_holding_generators<M: Module>(build: impl FnOnce() -> M) -> M {
    let _guard = lock_device_generators();
    let module = build();
    module.visit(&mut Materialize);
    module
}

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
    let model = init_holding_generators(|| {
        host.seed(seed);
        init(&host)
    });
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

pub(super) fn seed_devices(towers: &[TowerDevice], seed: u64) {
    let _guard = lock_device_generators();
    let mut seeded: Vec<&Device> = Vec::new();
    for tower in towers {
        if !seeded.contains(&tower.device()) {
            tower.device().seed(seed);
            seeded.push(tower.device());
        }
    }
}

/// A seed for step `step` of a run seeded `seed` (SplitMix64's finalizer over both).
pub(super) fn mix(seed: u64, step: u64) -> u64 {
    let mut z = seed ^ step.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TrainConfig;

    /// A checkpoint of a momentum run resumed with Adam is refused, naming the file and both
    /// kinds; the same kind with another factor passes, as does a config that names none.
    #[test]
    fn a_checkpoint_of_another_optimizer_kind_is_refused() {
        let path = Path::new("/train/model.ckpt-20");
        let momentum = |momentum| OptimizerConfig::Momentum {
            momentum,
            nesterov: false,
        };
        let config = |optimizer| TrainConfig::cifar10().with_optimizer(optimizer);
        let saved = serde_json::to_value(config(momentum(0.9))).unwrap();
        let adam = OptimizerConfig::Adam {
            beta1: 0.9,
            beta2: 0.999,
            epsilon: 1e-8,
        };
        let error = same_optimizer_kind(&saved, &adam, path).unwrap_err();
        let said = error.to_string();
        for words in [
            "model.ckpt-20",
            "`momentum` optimizer",
            "this run's is `adam`",
        ] {
            assert!(said.contains(words), "{said}");
        }
        same_optimizer_kind(&saved, &momentum(0.5), path).expect("the same kind");
        same_optimizer_kind(&serde_json::Value::Null, &adam, path).expect("no config kept");
    }

    #[test]
    fn a_resume_under_another_seed_says_what_follows_which_seed() {
        let config = |seed| serde_json::to_value(TrainConfig::cifar10().with_seed(seed)).unwrap();
        let input = |seed: u64| serde_json::json!({"ranks": 1, "rank_positions": [{"seed": seed}]});
        // Started with 7, resumed with 8: both change.
        let note = seed_change(&config(7), Some(&input(7)), 8).expect("a note");
        for words in [
            "seed 8:",
            "goes on under seed 7",
            "follow seed 8",
            "--seed 7 goes on",
        ] {
            assert!(note.contains(words), "{note}");
        }
        // Resumed with 8 again: the input still goes on under 7, the steps as before.
        let note = seed_change(&config(8), Some(&input(7)), 8).expect("a note");
        assert!(note.contains("goes on under seed 7"), "{note}");
        assert!(!note.contains("dropout"), "{note}");
        // Back to 7: the input as it always was, the steps' draws changed again.
        let note = seed_change(&config(8), Some(&input(7)), 7).expect("a note");
        assert!(
            !note.contains("input") && note.contains("--seed 8"),
            "{note}"
        );
        assert_eq!(seed_change(&config(7), Some(&input(7)), 7), None);
        assert_eq!(seed_change(&serde_json::Value::Null, None, 8), None);
    }
}
