//! What a tower's loss function returns.

use std::fmt::Display;

use burn::optim::GradientsParams;
use burn::tensor::{Int, Tensor};

/// One tower's loss: the mean loss over its part of the batch (shape `[1]`), and optionally
/// what the step reports beside it: correct predictions, and named metrics of the model's own.
#[derive(Debug)]
pub struct TowerLoss {
    /// Mean loss over the part, shape `[1]`.
    pub loss: Tensor<1>,
    /// Logits `[n, classes]` and labels `[n]`, to count correct predictions; `None` skips the
    /// count.
    pub predictions: Option<(Tensor<2>, Tensor<1, Int>)>,
    /// Named metrics, each the part's mean (shape `[1]`); the step reports their mean over the
    /// batch, weighted like the loss.
    pub metrics: Vec<(String, Tensor<1>)>,
    /// The gradients of `loss`, when the loss function ran backward itself (a burn-train
    /// `TrainStep` does); the tower then reduces these instead of running backward. `None`: the
    /// tower runs backward.
    pub gradients: Option<GradientsParams>,
}

impl TowerLoss {
    /// A loss alone.
    pub fn new(loss: Tensor<1>) -> Self {
        Self {
            loss,
            predictions: None,
            metrics: Vec::new(),
            gradients: None,
        }
    }

    /// Adds the gradients of the loss, computed by the loss function itself with
    /// `GradientsParams::from_grads(loss.backward(), model)` on the model it was given: for
    /// steps that run their own backward, such as burn-train's `TrainStep`. The towers weigh
    /// and reduce them as they would their own. Dynamic loss scaling then scales them after
    /// the fact, which keeps the update right but cannot keep an f16 backward from
    /// underflowing; an overlapped exchange across ranks needs the towers' own backward and
    /// fails the step.
    pub fn with_gradients(mut self, gradients: GradientsParams) -> Self {
        self.gradients = Some(gradients);
        self
    }

    /// Adds logits `[n, classes]` and labels `[n]`, so the step counts correct predictions
    /// (argmax of the logits equal to the label).
    pub fn with_accuracy(mut self, logits: Tensor<2>, labels: Tensor<1, Int>) -> Self {
        self.predictions = Some((logits, labels));
        self
    }

    /// Adds a named metric: its mean over the part, shape `[1]` (detached from the graph or
    /// not: only its value is read).
    pub fn with_metric(mut self, name: impl Into<String>, value: Tensor<1>) -> Self {
        self.metrics.push((name.into(), value));
        self
    }

    /// Correct predictions, or `None` without logits.
    pub(crate) fn correct(&self) -> Option<usize> {
        let (logits, labels) = self.predictions.clone()?;
        let [n] = labels.dims();
        let predicted = logits.argmax(1).reshape([n]);
        let correct: i64 = predicted.equal(labels).int().sum().into_scalar();
        Some(correct as usize)
    }

    /// The metrics' values, read from the device.
    pub(crate) fn metric_values(&self) -> Result<Vec<(String, f64)>, String> {
        (self.metrics.iter())
            .map(|(name, value)| {
                let v: f32 = (value.clone().try_into_scalar())
                    .map_err(|e| format!("cannot read metric `{name}` from the device: {e}"))?;
                Ok((name.clone(), v as f64))
            })
            .collect()
    }
}

/// What a loss function may return: a mean loss, a [`TowerLoss`], or a `Result` of either (an
/// `Err` stops the step with an error naming the tower).
pub trait IntoTowerLoss {
    /// The loss, or the reason there is none.
    fn into_tower_loss(self) -> Result<TowerLoss, String>;
}

impl IntoTowerLoss for TowerLoss {
    fn into_tower_loss(self) -> Result<TowerLoss, String> {
        Ok(self)
    }
}

impl IntoTowerLoss for Tensor<1> {
    fn into_tower_loss(self) -> Result<TowerLoss, String> {
        Ok(TowerLoss::new(self))
    }
}

impl<T: IntoTowerLoss, E: Display> IntoTowerLoss for Result<T, E> {
    fn into_tower_loss(self) -> Result<TowerLoss, String> {
        self.map_err(|e| e.to_string())?.into_tower_loss()
    }
}
