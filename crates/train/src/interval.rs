//! [`Interval`]: training time, examples and losses summed over some steps, for the log line,
//! the run's report and TensorBoard's scalars alike.

use std::time::Duration;

use crate::log::MeanLoss;

/// Training time, examples and losses over some steps.
#[derive(Default)]
pub(crate) struct Interval {
    time: Duration,
    steps: u64,
    examples: usize,
    /// Each step's loss times its examples, and those examples: steps whose loss overflowed
    /// (and so skipped their update, under loss scaling) are left out.
    loss_sum: f64,
    loss_examples: usize,
}

impl Interval {
    pub(crate) fn add(&mut self, took: Duration, examples: usize, loss: f64) {
        self.time += took;
        self.steps += 1;
        self.examples += examples;
        if loss.is_finite() {
            self.loss_sum += loss * examples as f64;
            self.loss_examples += examples;
        }
    }

    pub(crate) fn mean_loss(&self) -> MeanLoss {
        MeanLoss {
            loss: self.loss_sum / self.loss_examples.max(1) as f64,
            steps: self.steps,
        }
    }

    pub(crate) fn examples_per_sec(&self) -> f64 {
        self.examples as f64 / self.time.as_secs_f64().max(1e-9)
    }

    pub(crate) fn sec_per_step(&self) -> f64 {
        self.time.as_secs_f64() / self.steps.max(1) as f64
    }
}
