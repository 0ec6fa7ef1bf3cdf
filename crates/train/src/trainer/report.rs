//! What a run reports: [`TrainReport`], and the mean metrics of its updates ([`Metrics`]).

use std::path::PathBuf;

use towers_data::RecordCount;
use towers_multigpu::StepOutput;

#[cfg(doc)]
use crate::stop::StopFlag;

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

/// The named metrics of one update: each the mean over the update's micro-batches, weighted
/// like the loss; `accuracy` among them when the step gave predictions.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    /// Name, weighted sum, weight.
    sums: Vec<(String, f64, f64)>,
}

impl Metrics {
    /// Adds one batch's metrics.
    pub(crate) fn add(&mut self, out: &StepOutput) {
        let accuracy = (out.correct).map(|c| {
            (
                "accuracy".to_string(),
                c as f64 / out.examples as f64,
                out.examples as f64,
            )
        });
        let others = (out.metrics.iter()).map(|(name, v)| (name.clone(), *v, out.weight));
        for (name, value, weight) in accuracy.into_iter().chain(others) {
            match self.sums.iter_mut().find(|(n, ..)| *n == name) {
                Some((_, sum, total)) => {
                    *sum += value * weight;
                    *total += weight;
                }
                None => self.sums.push((name, value * weight, weight)),
            }
        }
    }

    /// The means, by name, in the order first seen.
    pub(crate) fn means(&self) -> Vec<(String, f64)> {
        (self.sums.iter())
            .map(|(name, sum, total)| (name.clone(), sum / total))
            .collect()
    }
}
