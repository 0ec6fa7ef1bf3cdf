//! [`TowersStrategy`]: burn-train's supervised training with every step run by [`Towers`].

use std::sync::{Arc, Mutex};

use burn::data::dataloader::split::split_dataloader;
use burn::data::dataloader::{DataLoaderIterator, Progress};
use burn::optim::SgdConfig;
use burn::tensor::Device;
use burn_train::train::WorkerFailure;
use burn_train::{
    EventProcessorTraining, InferenceStep, Learner, LearnerEvent, LearnerModel,
    SupervisedLearningStrategy, SupervisedTrainingEventProcessor, TrainLoader, TrainOutput,
    TrainStep, TrainingComponents, TrainingError, TrainingItem, TrainingStrategy, ValidLoader,
};
use towers_multigpu::{Error, Reduce, TowerDevice, TowerLoss, Towers, TowersConfig, current_tower};

use crate::accumulation;
use crate::device_batches::{self, DeviceBatches};
use crate::output_loss::OutputLoss;

/// A burn-train training strategy whose steps run on [`Towers`]: one replica of the learner's
/// model per device (any backends, mixed ones included), each device's batch from its own data
/// loader (as burn-train's multi-device strategy cuts them), the gradients **averaged** over the
/// devices (weighted, see [`with_weight`](Self::with_weight)) and one update by the learner's
/// own optimizer and learning-rate schedule. Running state (batch-norm statistics, any
/// `RunningState` of the model's) is made equal on every replica after each update.
///
/// burn-train's own `MultiDevice` strategy *sums* the devices' gradients, so its step grows
/// with the device count; here N devices take the step of one device on the N batches taken
/// together, and a learning rate tuned on one device carries over.
///
/// ```no_run
/// # use std::sync::Arc;
/// # use burn_train::{Learner, SupervisedTraining, TrainStep, InferenceStep, LearnerModel};
/// # fn run<M: LearnerModel>(training: SupervisedTraining<M>, learner: Learner<M>)
/// # where <M as TrainStep>::Output: towers_learner::OutputLoss {
/// use towers_learner::TowersStrategy;
///
/// let devices = towers_multigpu::parse_devices("flex,flex").unwrap();
/// let result = training
///     .with_training_strategy(TowersStrategy::new(devices).into())
///     .launch(learner);
/// # }
/// ```
///
/// Validation runs on tower 0's device. When the device loaders run out unevenly at the end of
/// an epoch, the batches left on some devices are dropped (every step runs on every device),
/// with a warning. Gradient accumulation (`SupervisedTraining::grads_accumulation`) is
/// burn-train's: the micro-batches' gradients (each the devices' mean) summed, and a shorter
/// cycle at an epoch's end. burn-train's gradient checkpointing
/// (`SupervisedTraining::gradient_checkpointing`) applies to its own strategies only: the
/// towers keep every activation for backward.
pub struct TowersStrategy<I> {
    devices: Vec<TowerDevice>,
    config: TowersConfig,
    weight: Arc<dyn Fn(&I) -> f64 + Send + Sync>,
}

impl<I> TowersStrategy<I> {
    /// Training on `devices`, each device's batch weighing the same; the model lives on the
    /// first device.
    pub fn new(devices: Vec<TowerDevice>) -> Self {
        Self {
            devices,
            config: TowersConfig::default(),
            weight: Arc::new(|_| 1.0),
        }
    }

    /// Weighs each device's batch by `weight` in the mean gradient, e.g. by its examples
    /// (`|b: &MyBatch| b.targets.dims()[0] as f64`), so that batches of unequal sizes give the
    /// gradient of the mean loss over all their examples. Weights must be positive.
    pub fn with_weight(mut self, weight: impl Fn(&I) -> f64 + Send + Sync + 'static) -> Self {
        self.weight = Arc::new(weight);
        self
    }

    /// The towers' settings: running state, deadline, loss scaling. The reduction is always
    /// [`Reduce::ParameterDevice`] (the learner updates one model) and the accumulation the
    /// learner's.
    pub fn with_config(mut self, config: TowersConfig) -> Self {
        self.config = config;
        self
    }
}

impl<M> From<TowersStrategy<<M as TrainStep>::Input>> for TrainingStrategy<M>
where
    M: LearnerModel,
    <M as TrainStep>::Output: OutputLoss,
{
    fn from(strategy: TowersStrategy<<M as TrainStep>::Input>) -> Self {
        TrainingStrategy::Custom(Arc::new(strategy))
    }
}

impl<M> SupervisedLearningStrategy<M> for TowersStrategy<<M as TrainStep>::Input>
where
    M: LearnerModel,
    <M as TrainStep>::Output: OutputLoss,
{
    fn fit(
        &self,
        components: TrainingComponents<M>,
        mut learner: Learner<M>,
        loader_train: TrainLoader<M>,
        loader_valid: ValidLoader<M>,
        starting_epoch: usize,
    ) -> (M, SupervisedTrainingEventProcessor<M>) {
        let TrainingComponents {
            num_epochs,
            mut checkpointer,
            grad_accumulation,
            interrupter,
            early_stopping: mut stopping,
            mut event_processor,
            event_store,
            ..
        } = components;
        let mut towers = match self.towers(&mut learner, grad_accumulation) {
            Ok(towers) => towers,
            Err(error) => {
                interrupter.fail(training_error(error));
                return (learner.model(), event_processor);
            }
        };
        let devices: Vec<Device> = towers
            .devices()
            .iter()
            .map(|t| t.device().clone())
            .collect();
        let train_items = loader_train.num_items();
        // `split_dataloader` leaves a single loader on the device it had.
        let loaders = match devices.as_slice() {
            [only] => vec![loader_train.to_device(only)],
            devices => split_dataloader(loader_train, devices),
        };
        let loader_valid = loader_valid.to_device(&devices[0].clone().inner());
        let valid_items = loader_valid.num_items();
        let processor = &mut event_processor;
        let mut micro_batches = 0;
        for epoch in starting_epoch..=num_epochs {
            let start = |total_items| LearnerEvent::StartSplit {
                epoch_number: epoch,
                total_items,
            };
            interrupter.fail_on_error(processor.process_train(start(train_items)));
            let run = Run {
                towers: &mut towers,
                learner: &mut learner,
                processor,
                micro_batches: &mut micro_batches,
            };
            if let Err(error) = self.train_epoch(run, &loaders, &interrupter) {
                interrupter.fail(error);
            }
            interrupter.fail_on_error(processor.process_train(LearnerEvent::EndSplit(epoch)));
            if interrupter.should_stop() {
                let reason = interrupter.interruption().and_then(|i| i.reason);
                log::info!(
                    "training interrupted: {}",
                    reason.as_deref().unwrap_or("reason unknown")
                );
                break;
            }
            interrupter.fail_on_error(processor.process_valid(LearnerEvent::StartSplit {
                epoch_number: epoch,
                total_items: valid_items,
            }));
            if let Err(error) = valid_epoch(&learner, &loader_valid, processor, &interrupter) {
                interrupter.fail(error);
            }
            interrupter.fail_on_error(processor.process_valid(LearnerEvent::EndSplit(epoch)));
            interrupter.fail_on_error(processor.process_train(LearnerEvent::EndEpoch(epoch)));
            if checkpointer.is_some() || stopping.is_some() {
                interrupter.fail_on_error(processor.flush());
            }
            if interrupter.should_stop() {
                break;
            }
            if let Some(checkpointer) = &mut checkpointer {
                checkpointer.checkpoint(&learner, epoch, &event_store);
            }
            if let Some(stopping) = &mut stopping
                && stopping.should_stop(epoch, &event_store)
            {
                break;
            }
        }
        (learner.model(), event_processor)
    }
}

/// What a training epoch works on.
struct Run<'a, M: LearnerModel> {
    towers: &'a mut Towers<M>,
    learner: &'a mut Learner<M>,
    processor: &'a mut SupervisedTrainingEventProcessor<M>,
    /// The micro-batches of the accumulation cycle so far, this step's included once it runs.
    micro_batches: &'a mut usize,
}

impl<I: Send + 'static> TowersStrategy<I> {
    /// Towers for the learner's model, moved to the first device.
    fn towers<M: LearnerModel>(
        &self,
        learner: &mut Learner<M>,
        accumulation: Option<usize>,
    ) -> Result<Towers<M>, Error> {
        let first = self
            .devices
            .first()
            .ok_or_else(|| Error::Config("no tower devices".into()))?;
        if let Some(other) = self.devices.iter().find(|d| d.share() != first.share()) {
            return Err(Error::Config(format!(
                "{} has a share of {} and {} of {}: burn-train's data loaders give each device \
                 a batch of its own, of one size, so the devices' shares must be equal",
                first.name(),
                first.share(),
                other.name(),
                other.share()
            )));
        }
        let main = first.device().clone();
        learner.fork(&if main.is_autodiff() {
            main.clone()
        } else {
            main.autodiff()
        });
        let config = self
            .config
            .clone()
            .with_reduce(Reduce::ParameterDevice)
            .with_accumulation(accumulation.unwrap_or(1));
        // The towers' own optimizer is never stepped: every update is the learner's
        // (`step_with_update`), so that its optimizer state, schedule and checkpoints stay
        // burn-train's.
        Towers::new(
            learner.model(),
            SgdConfig::new().init(),
            &self.devices,
            config,
        )
    }

    /// One epoch: a step on every device's next batch until a device's loader runs out. The
    /// epoch's last step ends the accumulation cycle, as burn-train's strategies end it.
    fn train_epoch<M>(
        &self,
        run: Run<'_, M>,
        loaders: &[TrainLoader<M>],
        interrupter: &burn_train::Interrupter,
    ) -> Result<(), TrainingError>
    where
        M: LearnerModel + TrainStep<Input = I>,
        <M as TrainStep>::Output: OutputLoss,
    {
        let Run {
            towers,
            learner,
            processor,
            micro_batches,
        } = run;
        let mut iterators: Vec<_> = loaders.iter().map(|loader| loader.iter()).collect();
        let mut iteration = 0;
        while let Some(batches) = next_batches(&mut iterators)? {
            let progress = total_progress(iterators.iter().map(|i| i.progress()));
            // burn-train ends the cycle where its loader's epoch ends; here the epoch ends
            // where the first device's loader does.
            if iterators.iter().any(|i| i.progress().is_completed()) {
                towers.end_cycle_early();
            }
            *micro_batches += 1;
            let weights = batches.iter().map(|b| (self.weight)(b)).collect();
            let batch = DeviceBatches::new(batches, weights);
            let outputs = Mutex::new((0..loaders.len()).map(|_| None).collect::<Vec<_>>());
            let step = towers.step_with_update(
                &batch,
                |model: &M, part, _device: &Device| tower_step(model, part, &outputs),
                // The towers' model is the learner's: the running state they sync after the
                // update is written into Burn's `RunningState` buffers, which every clone of
                // the model shares, the learner's included.
                |model, grads| {
                    learner.lr_step();
                    learner.optimizer_step(accumulation::summed(grads, &model, *micro_batches));
                    learner.model()
                },
            );
            let step = step.map_err(training_error)?;
            if step.updated {
                *micro_batches = 0;
            }
            let outputs = outputs
                .into_inner()
                .expect("the towers' threads have ended");
            for item in outputs.into_iter().flatten() {
                iteration += 1;
                let lr = Some(learner.lr_current());
                let item = TrainingItem::new(item, progress.clone(), Some(iteration), lr);
                interrupter
                    .fail_on_error(processor.process_train(LearnerEvent::ProcessedItem(item)));
            }
            if interrupter.should_stop() {
                break;
            }
        }
        Ok(())
    }
}

/// Every device's next batch, or `None` at the epoch's end: where some device's loader has run
/// out, the items the others still hold are dropped (every step runs on every device), with a
/// warning that counts them.
fn next_batches<I>(
    iterators: &mut [Box<dyn DataLoaderIterator<I> + '_>],
) -> Result<Option<Vec<I>>, TrainingError> {
    let left: usize = (iterators.iter())
        .map(|i| i.progress())
        .map(|p| p.items_total.saturating_sub(p.items_processed))
        .sum();
    let next: Vec<Option<I>> = (iterators.iter_mut())
        .map(|iterator| iterator.next().transpose())
        .collect::<Result<_, _>>()?;
    let held = next.iter().filter(|b| b.is_some()).count();
    if held == next.len() {
        return Ok(Some(next.into_iter().flatten().collect()));
    }
    if left > 0 {
        log::warn!(
            "{left} items left in {held} of the {} devices' data loaders are not trained on: \
             every step takes a batch from every device, and the epoch ends where the first \
             device's loader runs out",
            next.len()
        );
    }
    Ok(None)
}

/// One tower's training step: the model's own `TrainStep` (forward, loss, backward) on the
/// tower's batch; its output is kept for burn-train's metrics, its gradients go to the towers.
fn tower_step<M>(
    model: &M,
    part: &Mutex<Option<<M as TrainStep>::Input>>,
    outputs: &Mutex<Vec<Option<<M as TrainStep>::Output>>>,
) -> Result<TowerLoss, String>
where
    M: LearnerModel,
    <M as TrainStep>::Output: OutputLoss,
{
    let batch = device_batches::take(part)?;
    let TrainOutput { grads, item } = TrainStep::step(model, batch);
    let loss = TowerLoss::new(item.loss()).with_gradients(grads);
    let tower = current_tower().unwrap_or(0);
    let mut outputs = outputs
        .lock()
        .map_err(|_| "another tower panicked".to_string())?;
    outputs[tower] = Some(item);
    Ok(loss)
}

/// A validation epoch on the learner's model, as burn-train's single-device strategy runs it.
fn valid_epoch<M: LearnerModel>(
    learner: &Learner<M>,
    loader: &ValidLoader<M>,
    processor: &mut SupervisedTrainingEventProcessor<M>,
    interrupter: &burn_train::Interrupter,
) -> Result<(), TrainingError> {
    let model = learner.model().valid();
    let mut iterator = loader.iter();
    let mut iteration = 0;
    while let Some(item) = iterator.next() {
        let output = InferenceStep::step(&model, item?);
        iteration += 1;
        let item = TrainingItem::new(output, iterator.progress(), Some(iteration), None);
        interrupter.fail_on_error(processor.process_valid(LearnerEvent::ProcessedItem(item)));
        if interrupter.should_stop() {
            break;
        }
    }
    Ok(())
}

/// The devices' loaders' progress, added up.
fn total_progress(progress: impl Iterator<Item = Progress>) -> Progress {
    progress
        .reduce(|total, p| Progress {
            items_processed: total.items_processed + p.items_processed,
            items_total: total.items_total + p.items_total,
            unit: total.unit,
        })
        .expect("at least one device")
}

/// A towers error as burn-train reports a failed worker: the tower's index and what failed.
fn training_error(error: Error) -> TrainingError {
    let device_id = match &error {
        Error::TowerFailed { tower, .. }
        | Error::TowerPanicked { tower, .. }
        | Error::Spawn { tower, .. } => *tower,
        _ => 0,
    };
    TrainingError::Workers(vec![WorkerFailure {
        device_id,
        message: towers_multigpu::ErrorChain(&error).to_string(),
    }])
}
