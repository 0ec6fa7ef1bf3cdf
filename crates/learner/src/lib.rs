//! towers-learner: burn-train's `Learner` trained on burn-towers' towers.
//!
//! A Burn model written for burn-train (`TrainStep`, `InferenceStep`, a `Learner`, a
//! `SupervisedTraining` with its metrics, checkpoints and renderer) trains on N devices by
//! changing one line: its training strategy becomes a [`TowersStrategy`]. Every step then runs
//! the model's own `TrainStep` on one replica per device, averages the gradients (rather than
//! summing them, as burn-train's `MultiDevice` strategy does) and applies one update with the
//! learner's own optimizer. See [`TowersStrategy`] for what it keeps of burn-train and what
//! differs.
//!
//! The step's output type tells the towers its loss through [`OutputLoss`], which burn-train's
//! own outputs (`ClassificationOutput`, `RegressionOutput`, ...) implement already.

mod accumulation;
mod device_batches;
mod output_loss;
mod strategy;

pub use output_loss::OutputLoss;
pub use strategy::TowersStrategy;
