//! What the trainer writes to its event file, each at its own period ([`SummaryConfig`]):
//!
//! - scalars: `loss` (the step's loss, as the log line prints it), `total_loss` (its moving
//!   average, decay 0.9, as TF's `_add_loss_summaries` wrote it), `tower_<i>/loss`,
//!   `learning_rate`, `examples_per_sec` (since the previous scalars) and `queue/fraction_full`
//!   (the example queue's fill);
//! - histograms of every trainable weight (`conv1/weight`) and of the gradient the update
//!   applied (`conv1/weight/gradients`), a copy the towers keep of it rather than a second
//!   computation;
//! - the first images of each tower's slice after distortions (`tower_<i>/images/image/<k>`).
//!
//! Every kind is also written at the first step of a run and at `max_steps`, so a short run
//! shows all of them. Values come from the step the log line reports, never from a second
//! computation.

use std::path::{Path, PathBuf};
use std::time::Duration;

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::Tensor;
use serde::{Deserialize, Serialize};
use towers_data::{HostBatch, Image};
use towers_multigpu::{StepOutput, TowerBatch, TowerDevice, Towers, split_sizes};

use crate::error::{Error, Result};
use crate::interval::Interval;
use crate::summary::event_file::EventWriter;
use crate::summary::histogram::Histogram;
use crate::summary::images::image_summary;
use crate::summary::proto::Value;

/// When the trainer writes which summaries ([`crate::TrainConfig::summaries`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct SummaryConfig {
    /// Write an event file at all.
    pub enabled: bool,
    /// Updates between scalar summaries.
    pub scalars_every: u64,
    /// Updates between weight and gradient histograms (TF's trainers: 100).
    pub histograms_every: u64,
    /// Updates between input images.
    pub images_every: u64,
    /// Images per tower (TF's `max_outputs`: 3).
    pub images_per_tower: usize,
    /// Seconds between flushes to disk (TF's `flush_secs` was 120): a crash loses at most
    /// this much (plus one step).
    pub flush_secs: f64,
}

/// The `with_*` setters of Burn's configs, one per field.
impl SummaryConfig {
    /// Sets [`enabled`](Self::enabled).
    pub fn with_enabled(mut self, enabled: bool) -> Self {
        self.enabled = enabled;
        self
    }

    /// Sets [`scalars_every`](Self::scalars_every).
    pub fn with_scalars_every(mut self, scalars_every: u64) -> Self {
        self.scalars_every = scalars_every;
        self
    }

    /// Sets [`histograms_every`](Self::histograms_every).
    pub fn with_histograms_every(mut self, histograms_every: u64) -> Self {
        self.histograms_every = histograms_every;
        self
    }

    /// Sets [`images_every`](Self::images_every).
    pub fn with_images_every(mut self, images_every: u64) -> Self {
        self.images_every = images_every;
        self
    }

    /// Sets [`images_per_tower`](Self::images_per_tower).
    pub fn with_images_per_tower(mut self, images_per_tower: usize) -> Self {
        self.images_per_tower = images_per_tower;
        self
    }

    /// Sets [`flush_secs`](Self::flush_secs).
    pub fn with_flush_secs(mut self, flush_secs: f64) -> Self {
        self.flush_secs = flush_secs;
        self
    }
}

impl Default for SummaryConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            scalars_every: 10,
            histograms_every: 100,
            images_every: 100,
            images_per_tower: 3,
            flush_secs: 60.0,
        }
    }
}

impl SummaryConfig {
    /// Checks the periods.
    pub fn validate(&self) -> Result<()> {
        if self.scalars_every == 0 || self.histograms_every == 0 || self.images_every == 0 {
            return Err(Error::Config(
                "summaries: scalars_every, histograms_every and images_every must be at least 1"
                    .into(),
            ));
        }
        // `try_from_secs_f64`: what `Duration` holds (about 1.8e19 s), which `open` builds.
        if Duration::try_from_secs_f64(self.flush_secs).is_err() {
            return Err(Error::Config(
                "summaries: flush_secs must be a number of seconds".into(),
            ));
        }
        Ok(())
    }
}

/// The decay of `total_loss`, TF's `loss_averages`.
const LOSS_AVERAGE_DECAY: f64 = 0.9;

/// What the trainer knows of a step once its update is applied.
pub(crate) struct StepScalars {
    pub step: u64,
    pub loss: f64,
    pub lr: f64,
    pub took: Duration,
    pub examples: usize,
    /// The example queue's fill, 0 to 1.
    pub queue_fill: f32,
    /// The step's named metrics (`accuracy`, the model's own).
    pub metrics: Vec<(String, f64)>,
}

/// The trainer's event file and what it accumulates between summaries.
pub(crate) struct TrainSummaries {
    config: SummaryConfig,
    /// `None` when summaries are off.
    writer: Option<EventWriter>,
    first_step: u64,
    max_steps: u64,
    /// TF's zero-debiased moving average of the loss: the biased average and `decay^steps`.
    loss_average: (f64, f64),
    interval: Interval,
    tower_loss_sums: Vec<f64>,
    micro_batches: usize,
}

impl TrainSummaries {
    /// A new event file in `dir` for a run starting after `step`, unless summaries are off. Its
    /// session start at `step + 1` makes TensorBoard drop what an earlier run wrote for that
    /// step and later: what a crashed run wrote after its last checkpoint (at `step`).
    pub(crate) fn open(
        config: &SummaryConfig,
        dir: &Path,
        step: u64,
        max_steps: u64,
    ) -> Result<Self> {
        let writer = match config.enabled {
            true => {
                let flush = Duration::from_secs_f64(config.flush_secs);
                let mut writer = EventWriter::create(dir, flush)?;
                writer.session_start(step + 1)?;
                Some(writer)
            }
            false => None,
        };
        Ok(Self {
            config: config.clone(),
            writer,
            first_step: step,
            max_steps,
            loss_average: (0.0, 1.0),
            interval: Interval::default(),
            tower_loss_sums: Vec::new(),
            micro_batches: 0,
        })
    }

    fn due(&self, step: u64, every: u64) -> bool {
        self.writer.is_some()
            && (step.is_multiple_of(every) || step == self.first_step + 1 || step == self.max_steps)
    }

    /// Before each batch of step `step` goes to the towers: on the step's first batch, the
    /// images of each tower's slice (when the batch is images), and a request for the step's
    /// gradient.
    pub(crate) fn before_batch<M: Module>(
        &mut self,
        step: u64,
        images: Option<&HostBatch>,
        towers: &mut Towers<M>,
    ) -> Result<()> {
        if self.micro_batches > 0 {
            return Ok(());
        }
        if self.due(step, self.config.histograms_every) {
            towers.keep_gradients();
        }
        if let Some(batch) = images.filter(|_| self.due(step, self.config.images_every)) {
            let values = tower_images(batch, towers.devices(), self.config.images_per_tower)?;
            self.write(step, values)?;
        }
        Ok(())
    }

    /// After each batch: its towers' losses.
    pub(crate) fn add(&mut self, out: &StepOutput) {
        self.tower_loss_sums.resize(out.tower_losses.len(), 0.0);
        for (sum, loss) in self.tower_loss_sums.iter_mut().zip(&out.tower_losses) {
            *sum += loss;
        }
        self.micro_batches += 1;
    }

    /// After the update of `s.step`: scalars and histograms when due, and a flush when due.
    pub(crate) fn after_step<M: Module>(
        &mut self,
        s: &StepScalars,
        towers: &mut Towers<M>,
    ) -> Result<()> {
        let (biased, decay_power) = self.loss_average;
        self.loss_average = (
            biased * LOSS_AVERAGE_DECAY + s.loss * (1.0 - LOSS_AVERAGE_DECAY),
            decay_power * LOSS_AVERAGE_DECAY,
        );
        self.interval.add(s.took, s.examples, s.loss);
        let tower_losses: Vec<f64> = std::mem::take(&mut self.tower_loss_sums)
            .into_iter()
            .map(|sum| sum / self.micro_batches as f64)
            .collect();
        self.micro_batches = 0;
        if self.due(s.step, self.config.scalars_every) {
            let values = self.scalars(s, &tower_losses);
            self.interval = Interval::default();
            self.write(s.step, values)?;
        }
        let gradients = towers.take_gradients();
        let histograms_due = self.due(s.step, self.config.histograms_every);
        let Some(writer) = &mut self.writer else {
            return Ok(());
        };
        if histograms_due {
            let values = histograms(towers.model(), gradients.as_ref())
                .map_err(|e| Error::io(writer.path())(std::io::Error::other(e)))?;
            writer.summary(s.step, values)?;
        }
        writer.flush_if_due()
    }

    fn scalars(&self, s: &StepScalars, tower_losses: &[f64]) -> Vec<Value> {
        let (biased, decay_power) = self.loss_average;
        let mut values = vec![
            Value::scalar("loss", s.loss as f32),
            Value::scalar("total_loss", (biased / (1.0 - decay_power)) as f32),
        ];
        values.extend(
            (tower_losses.iter().enumerate())
                .map(|(i, &loss)| Value::scalar(format!("tower_{i}/loss"), loss as f32)),
        );
        values.extend([
            Value::scalar("learning_rate", s.lr as f32),
            Value::scalar("examples_per_sec", self.interval.examples_per_sec() as f32),
            Value::scalar("queue/fraction_full", s.queue_fill),
        ]);
        values.extend((s.metrics.iter()).map(|(name, v)| Value::scalar(name.clone(), *v as f32)));
        values
    }

    fn write(&mut self, step: u64, values: Vec<Value>) -> Result<()> {
        match &mut self.writer {
            Some(writer) if !values.is_empty() => writer.summary(step, values),
            _ => Ok(()),
        }
    }

    /// Flushes everything to disk; returns the event file.
    pub(crate) fn close(self) -> Result<Option<PathBuf>> {
        match self.writer {
            Some(mut writer) => {
                writer.flush()?;
                Ok(Some(writer.path().to_path_buf()))
            }
            None => Ok(None),
        }
    }
}

/// The first `per_tower` images of each tower's slice of `batch`.
fn tower_images(batch: &HostBatch, towers: &[TowerDevice], per_tower: usize) -> Result<Vec<Value>> {
    let shares: Vec<f64> = towers.iter().map(TowerDevice::share).collect();
    let sizes = split_sizes(batch.len(), &shares).map_err(towers_multigpu::Error::Batch)?;
    let [c, h, w] = batch.image_shape();
    let mut values = Vec::new();
    for (tower, slice) in batch.split(&sizes).into_iter().enumerate() {
        let images = slice.images().chunks_exact(c * h * w);
        for (k, planes) in images.take(per_tower).enumerate() {
            if let Some(image) = image_summary(&Image::from_chw(planes, c, h, w)) {
                values.push(Value::image(
                    format!("tower_{tower}/images/image/{k}"),
                    image,
                ));
            }
        }
    }
    Ok(values)
}

/// Histograms of the trainable weights of `model` and, when given, of their gradients; the
/// error names the tensor that could not be read from its device.
fn histograms<M: Module>(
    model: &M,
    gradients: Option<&GradientsParams>,
) -> Result<Vec<Value>, String> {
    let mut visitor = Histograms {
        path: Vec::new(),
        gradients,
        values: Vec::new(),
        error: None,
    };
    model.visit(&mut visitor);
    match visitor.error {
        Some(error) => Err(error),
        None => Ok(visitor.values),
    }
}

struct Histograms<'a> {
    path: Vec<String>,
    gradients: Option<&'a GradientsParams>,
    values: Vec<Value>,
    error: Option<String>,
}

impl Histograms<'_> {
    /// Adds the histogram of `tensor` as `tag`; a tensor with NaN or infinite values is left
    /// out (the next step's loss ends the run).
    fn add<const D: usize>(&mut self, tag: String, tensor: Tensor<D>) {
        let values = tensor
            .try_into_data()
            .map_err(|e| format!("{e:?}"))
            .and_then(|data| data.try_into_vec_as::<f32>().map_err(|e| format!("{e:?}")));
        match values {
            Ok(values) => {
                if let Some(histogram) = Histogram::of(&values) {
                    self.values
                        .push(Value::histogram(tag, histogram.to_proto()));
                }
            }
            Err(e) if self.error.is_none() => {
                self.error = Some(format!(
                    "histogram of {tag}: cannot read it from its device: {e}"
                ));
            }
            Err(_) => {}
        }
    }
}

impl ModuleVisitor for Histograms<'_> {
    fn enter_module(&mut self, name: &str, _: &str) {
        self.path.push(name.to_string());
    }

    fn exit_module(&mut self, _: &str, _: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let weight = param.val();
        if !weight.is_require_grad() {
            return; // batch-norm moving statistics, frozen weights
        }
        let tag = self.path.join("/");
        let gradient = self.gradients.and_then(|g| g.get::<D>(param.id));
        self.add(tag.clone(), weight);
        if let Some(gradient) = gradient {
            self.add(format!("{tag}/gradients"), gradient);
        }
    }
}
