//! Continuing a TF 1.x run: `--resume` in a train directory that a TF trainer left (TF-slim's
//! `train_image_classifier.py`, the CIFAR-10 tutorial's `cifar10_train.py`), of a network whose
//! TF names the model has ([`TfNamed`]: TF-slim's Inception v3, the tutorial's net, a model of
//! your own), goes on from its newest checkpoint's weights, optimizer slots, moving averages and
//! `global_step`, as TF's own trainer does when it finds them there.

use std::path::Path;

use burn::module::Module;
use burn::optim::{OptimizerRecord, StateSink};
use burn::tensor::TensorData;
use towers_models::weights::{
    MOVING_AVERAGE_SUFFIX, RestoreOptions, TfCheckpoint, TfNamed, TfSource, TfValues, TfVariable,
    restore,
};
use towers_models::{TrainedParam, frozen_params, trained_params};

use crate::error::{Error, Result};
use crate::optim::{OptimizerConfig, TF_OPTIMIZERS};

/// The variable TF's trainers count updates in.
const GLOBAL_STEP: &str = "global_step";
/// TF's Adam's powers of its betas, `beta^(t+1)` after `t` updates.
const BETA1_POWER: &str = "beta1_power";
const BETA2_POWER: &str = "beta2_power";

/// The newest checkpoint of a TF run's train directory.
#[derive(Debug)]
pub struct TfRun {
    checkpoint: TfCheckpoint,
    step: u64,
}

/// What a TF run goes on from here (see [`TfRun::continue_into`]).
#[derive(Debug)]
#[non_exhaustive]
pub struct ContinuedRun<M> {
    /// The model with the run's weights.
    pub model: M,
    /// Its optimizer's state, made of the run's slots, for the model's parameter ids.
    pub optimizer: OptimizerRecord,
    /// The moving averages (evaluation state), when asked for: the run's shadow variables,
    /// each weight's own value where it kept none.
    pub averages: Option<M>,
    /// The run's `global_step`.
    pub step: u64,
    /// What the log should say about it, a line each.
    pub notes: Vec<String>,
}

impl TfRun {
    /// The TF run in `dir`: the checkpoint its `checkpoint` state file names, as TF's
    /// `tf.train.latest_checkpoint` finds it; `None` where there is no such file (or a file of
    /// that name that is no TF state file: no `model_checkpoint_path`). A state file naming a
    /// checkpoint that cannot be read is an error naming it.
    pub fn find(dir: &Path) -> Result<Option<Self>> {
        let state = dir.join("checkpoint");
        let is_tf_state = |text: String| text.contains("model_checkpoint_path:");
        match std::fs::read(&state) {
            Ok(bytes) if is_tf_state(String::from_utf8_lossy(&bytes).into_owned()) => {}
            Ok(_) => return Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound || state.is_dir() => {
                return Ok(None);
            }
            Err(e) => return Err(Error::io(&state)(e)),
        }
        let checkpoint = TfCheckpoint::open(dir)?;
        let step = global_step(&checkpoint)?;
        Ok(Some(Self { checkpoint, step }))
    }

    /// The checkpoint's prefix (`DIR/model.ckpt-1000`).
    pub fn path(&self) -> &Path {
        self.checkpoint.prefix()
    }

    /// The run's `global_step`: the updates it made.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// `model` (built, its frozen parameters frozen) as this run left it: every parameter's
    /// variable (a missing one is an error), the slots `optimizer`'s TF counterpart keeps for
    /// each trained parameter ([`OptimizerConfig::tf_slots`]) and, with `averages`, the moving
    /// averages. A run of another TF optimizer, or one that trained other parameters than
    /// `model` trains (TF-slim's `--trainable_scopes`), is refused, naming a variable that
    /// shows it.
    pub fn continue_into<M: Module + TfNamed>(
        &self,
        model: M,
        optimizer: &OptimizerConfig,
        with_averages: bool,
    ) -> Result<ContinuedRun<M>> {
        if let Some(reason) = model.refuses_tf_weights() {
            return Err(self.refused(reason));
        }
        if self.checkpoint.is_object_based() {
            return Err(self.refused(
                "it is a TF2 object-based checkpoint (`tf.train.Checkpoint`, \
                 `CheckpointManager`), whose optimizer slots are keyed by Python objects: a TF2 \
                 run is not continued; start from its weights with --pretrained"
                    .into(),
            ));
        }
        let slots = optimizer.tf_slots();
        let trained = trained_params(&model);
        self.trains_the_same::<M>(&model, &trained, slots)?;
        self.not_burns_adam(optimizer)?;
        let (record, with_slots) = self.optimizer_state::<M>(&trained, optimizer, slots)?;
        let (model, unused) = self.weights(model, false)?;
        let averages = match with_averages {
            true => Some(self.weights(model.valid(), true)?.0),
            false => None,
        };
        let mut notes = self.notes(slots, with_slots, with_averages);
        notes.extend(not_continued(unused, slots));
        Ok(ContinuedRun {
            model,
            optimizer: record,
            averages,
            step: self.step,
            notes,
        })
    }

    /// What the log says of what was taken: the weights, `slots` of `trained` parameters and,
    /// `with_averages`, the moving averages or their absence.
    fn notes(&self, slots: &[&str], trained: usize, with_averages: bool) -> Vec<String> {
        let mut taken = vec!["weights".to_string()];
        if trained > 0 {
            taken.push(format!(
                "{} slots of {trained} parameters",
                slots.join(" and ")
            ));
        }
        if with_averages && self.has_averages() {
            taken.push("moving averages".into());
        }
        let mut notes = vec![format!(
            "continuing the TF run of {} at step {}: its {}; the input starts over (TF's \
             checkpoints keep no input position)",
            self.path().display(),
            self.step,
            taken.join(", ")
        )];
        if with_averages && !self.has_averages() {
            notes.push("the TF run kept no moving averages: they start at its weights".into());
        }
        notes
    }

    /// Refuses Burn's Adam for a TF run of Adam: TF's adds its epsilon elsewhere.
    fn not_burns_adam(&self, optimizer: &OptimizerConfig) -> Result<()> {
        match optimizer {
            OptimizerConfig::Adam { .. } => Err(self.refused(
                "a TF run's Adam is TF's (`kind = \"tf_adam\"` in the config's [optimizer]), \
                 not Burn's (`adam`): TF's AdamOptimizer adds its epsilon before the bias \
                 correction, Burn's Adam after, so the run would not go on as TF's"
                    .into(),
            )),
            _ => Ok(()),
        }
    }

    /// Refuses the run when the optimizer that wrote it is not `slots`' (the first slot of each
    /// variable it trained says which), or when it trained a parameter `model` freezes or
    /// froze one `model` trains (`trained`, its [`trained_params`]).
    fn trains_the_same<M: Module + TfNamed>(
        &self,
        model: &M,
        trained: &[TrainedParam],
        slots: &[&str],
    ) -> Result<()> {
        for param in trained {
            let variable = tf_variable::<M>(&param.path)?;
            match (self.tf_optimizer_of(&variable.name), slots.first()) {
                (Some((theirs, class)), ours) if Some(&theirs) != ours => {
                    return Err(self.refused(format!(
                        "written by TF's {class} (`{}/{theirs}`), where this run's optimizer \
                         keeps {}: resume with the [optimizer] of the run's kind",
                        variable.name,
                        ours.map_or("no slots (`sgd`)".into(), |s| format!("`{s}` slots")),
                    )));
                }
                (None, Some(ours)) => {
                    return Err(self.refused(format!(
                        "it keeps no `{}/{ours}`: TF's run did not train `{}` (TF-slim's \
                         --trainable_scopes) or trained it with GradientDescentOptimizer, \
                         where this run trains it: resume with the run's --trainable-scopes \
                         and optimizer",
                        variable.name, param.path
                    )));
                }
                _ => {}
            }
            if slots.first() == Some(&"RMSProp")
                && self.has(&format!("{}/RMSProp_2", variable.name))
            {
                return Err(self.refused(format!(
                    "a centered RMSProp's run (`{}/RMSProp_2`, the mean gradient): this \
                     RMSProp is not centered",
                    variable.name
                )));
            }
        }
        for path in frozen_params(model) {
            let variable = tf_variable::<M>(&path)?;
            if let Some((slot, class)) = self.tf_optimizer_of(&variable.name) {
                return Err(self.refused(format!(
                    "TF's run trained `{path}` with {class} (`{}/{slot}`), where this run \
                     freezes it: resume with the run's --trainable-scopes",
                    variable.name
                )));
            }
        }
        Ok(())
    }

    /// The TF optimizer whose slot `variable` has (`Momentum`, `MomentumOptimizer`), if any.
    fn tf_optimizer_of(&self, variable: &str) -> Option<(&'static str, &'static str)> {
        TF_OPTIMIZERS
            .into_iter()
            .find(|(slot, _)| self.has(&format!("{variable}/{slot}")))
    }

    /// The optimizer state of `params`, each made of its TF variable's `slots`, and how many
    /// parameters it holds state for.
    fn optimizer_state<M: TfNamed>(
        &self,
        params: &[TrainedParam],
        optimizer: &OptimizerConfig,
        slots: &[&str],
    ) -> Result<(OptimizerRecord, usize)> {
        let steps = self.optimizer_steps(optimizer)?;
        let mut record = BurnpackRecord::default();
        for param in params.iter().filter(|_| !slots.is_empty()) {
            let variable = tf_variable::<M>(&param.path)?;
            let values = slots
                .iter()
                .map(|slot| self.slot(&variable, slot, param))
                .collect::<Result<Vec<_>>>()?;
            let mut sink = StateSink::default();
            let prefix = param.id.val().to_string();
            (optimizer.record_tf_slots(values, steps, &prefix, &mut sink))
                .map_err(|e| self.refused(e))?;
            record.add(sink, param);
        }
        let parameters = record.parameters;
        let record = record.into_record().map_err(|e| self.refused(e))?;
        Ok((record, parameters))
    }

    /// The updates the run's optimizer made, as its state counts them: TF's Adam keeps
    /// `beta1^(t+1)` and `beta2^(t+1)` after `t` updates (`beta1_power`, `beta2_power`, f32s
    /// multiplied by the betas each update), so `t` is the logarithm of the first (to the
    /// config's `beta1`), while it is a normal f32 (some 800 updates at 0.9; past them TF's bias
    /// correction is 1, and `global_step` serves). Each must fit the config's beta, the second
    /// within its rounding, which grows with the updates: other betas are refused. 0 for the
    /// other optimizers.
    fn optimizer_steps(&self, optimizer: &OptimizerConfig) -> Result<usize> {
        let OptimizerConfig::TfAdam { beta1, beta2, .. } = *optimizer else {
            return Ok(0);
        };
        let (power1, power2) = (self.power(BETA1_POWER)?, self.power(BETA2_POWER)?);
        let exponent = |power: f32, beta: f64| (power as f64).ln() / beta.ln();
        let steps = match power1.is_normal() {
            true => exponent(power1, beta1) - 1.0,
            false => self.step as f64,
        };
        let fits1 = !power1.is_normal() || (steps - steps.round()).abs() < 0.05;
        let off2 = (exponent(power2, beta2) - 1.0 - steps.round()).abs();
        let fits2 = !power2.is_normal() || off2 < 0.05 + 1e-4 * steps;
        match steps.round() >= 0.0 && fits1 && fits2 {
            true => Ok(steps.round() as usize),
            false => Err(self.refused(format!(
                "its Adam step counts do not fit this run's betas: `{BETA1_POWER}` {power1} \
                 (beta1 {beta1}), `{BETA2_POWER}` {power2} (beta2 {beta2}): resume with the TF \
                 run's beta1 and beta2"
            ))),
        }
    }

    /// The scalar `name`, one of TF's Adam's powers of its betas: in [0, 1].
    fn power(&self, name: &str) -> Result<f32> {
        let values = match self.checkpoint.info(name) {
            Some(_) => self.checkpoint.read_f32(name)?,
            None => return Err(self.refused(format!("an Adam run's without `{name}`"))),
        };
        match values[..] {
            [power] if (0.0..=1.0).contains(&power) => Ok(power),
            _ => Err(self.refused(format!("`{name}` is not one number in [0, 1]"))),
        }
    }

    /// The slot `VARIABLE/slot` of `param`, in its layout; of another shape, an error naming it.
    fn slot(&self, variable: &TfVariable, slot: &str, param: &TrainedParam) -> Result<TensorData> {
        let name = format!("{}/{slot}", variable.name);
        let shape = (self.checkpoint.info(&name).map(|info| info.shape.clone()))
            .ok_or_else(|| self.refused(format!("no `{name}`, a slot of `{}`", param.path)))?;
        let values = self.checkpoint.read_f32(&name)?;
        let (shape, values) = variable.layout.convert(shape, values);
        if shape != param.shape {
            return Err(self.refused(format!(
                "`{name}` is {shape:?}, where `{}` is {:?}",
                param.path, param.shape
            )));
        }
        Ok(TensorData::new(values, shape))
    }

    /// `model` with the run's weights, or with `averages` its shadow variables where it has
    /// them; and the tensors of the checkpoint no parameter took.
    fn weights<M: Module + TfNamed>(&self, model: M, averages: bool) -> Result<(M, Vec<String>)> {
        let checkpoint = TfCheckpoint::open(self.path())?;
        let mut source = TfSource::new::<M>(checkpoint, averages);
        let (model, report) = restore(model, &mut source, &RestoreOptions::new())?;
        if let Some(missing) = report.missing.first() {
            let name =
                M::tf_variable(missing).map_or(String::new(), |v| format!(" (`{}`)", v.name));
            return Err(self.refused(format!(
                "it has no variable for `{missing}`{name}, nor for {} other parameters",
                report.missing.len() - 1
            )));
        }
        Ok((model, report.unused))
    }

    fn has_averages(&self) -> bool {
        let mut names = self.checkpoint.tensors().map(|(name, _)| name);
        names.any(|name| name.ends_with(MOVING_AVERAGE_SUFFIX))
    }

    fn has(&self, name: &str) -> bool {
        self.checkpoint.info(name).is_some()
    }

    /// An error naming the checkpoint's index (a V1 checkpoint's file), `reason` why it cannot
    /// be continued.
    fn refused(&self, reason: String) -> Error {
        Error::Checkpoint {
            path: self.checkpoint.index(),
            reason: format!("a TF run's checkpoint that cannot be continued: {reason}"),
            error: None,
        }
    }
}

/// Parameters' optimizer states as Burn's `ModuleOptimizer::to_record` writes them, in
/// burnpack: the only way to an [`OptimizerRecord`] from outside Burn is its file format.
#[derive(Default)]
struct BurnpackRecord {
    tensors: Vec<burn_pack::Tensor>,
    scalars: Vec<(String, burn_pack::Scalar)>,
    parameters: usize,
}

impl BurnpackRecord {
    /// `param`'s state (`sink`, recorded under its id): its tensors, its scalars (Adam's step
    /// count) and its rank.
    fn add(&mut self, sink: StateSink, param: &TrainedParam) {
        let id = param.id.val();
        for (name, data) in sink.tensors {
            let (bytes, shape, dtype) = data.into_parts();
            (self.tensors).push(burn_pack::Tensor::new(name, dtype, shape, Some(id), bytes));
        }
        self.scalars.extend(sink.scalars);
        // Burn's `RANK_KEY`: the rank the state is rebuilt with.
        let rank = burn_pack::Scalar::from(param.shape.len());
        self.scalars.push((format!("{id}.__rank"), rank));
        self.parameters += 1;
    }

    fn into_record(self) -> std::result::Result<OptimizerRecord, String> {
        let mut writer = burn_pack::Writer::new(self.tensors);
        for (name, value) in &self.scalars {
            writer = writer.with_scalar(name, *value);
        }
        let bytes = writer.into_bytes().map_err(|e| e.to_string())?;
        OptimizerRecord::from_bytes(bytes).map_err(|e| e.to_string())
    }
}

/// The TF variable of the parameter at `path`; none is an error naming it.
fn tf_variable<M: TfNamed>(path: &str) -> Result<TfVariable> {
    M::tf_variable(path).ok_or_else(|| {
        Error::Config(format!(
            "the model's parameter `{path}` has no TF name: a TF run cannot be continued"
        ))
    })
}

/// The run's step: its `global_step` variable, else the number its prefix ends in
/// (`model.ckpt-1000`); neither is an error.
fn global_step(checkpoint: &TfCheckpoint) -> Result<u64> {
    let from_prefix = || {
        let name = checkpoint.prefix().file_name()?.to_str()?;
        name.rsplit_once('-')?.1.parse().ok()
    };
    let step = match checkpoint.info(GLOBAL_STEP) {
        Some(_) => match checkpoint.read(GLOBAL_STEP)? {
            TfValues::Int(values) if values.len() == 1 => u64::try_from(values[0]).ok(),
            _ => None,
        },
        None => from_prefix(),
    };
    step.ok_or_else(|| Error::Checkpoint {
        path: checkpoint.prefix().to_path_buf(),
        reason: format!(
            "a TF run's checkpoint without a step: no `{GLOBAL_STEP}` (a scalar integer of at \
             least 0) and no `-STEP` ending its name"
        ),
        error: None,
    })
}

/// A note naming what of the checkpoint (`unused` by the weights) goes on nowhere, the slots
/// and the step aside.
fn not_continued(unused: Vec<String>, slots: &[&str]) -> Option<String> {
    let is_slot = |name: &str| {
        let last = name.rsplit('/').next().unwrap_or(name);
        slots.contains(&last)
    };
    let counters = [GLOBAL_STEP, BETA1_POWER, BETA2_POWER];
    let left: Vec<String> = unused
        .into_iter()
        .filter(|name| !counters.contains(&name.as_str()) && !is_slot(name))
        .collect();
    (!left.is_empty()).then(|| {
        let shown: Vec<&str> = left.iter().take(5).map(String::as_str).collect();
        format!(
            "not continued, as no parameter here has them: {} tensors of the TF run ({}{})",
            left.len(),
            shown.join(", "),
            if left.len() > 5 { ", ..." } else { "" }
        )
    })
}
