//! What a tower's loss function returns.

use std::fmt::Display;

use burn::tensor::{Int, Tensor};

/// One tower's loss: the mean loss over its slice (shape `[1]`) and, when the logits are given,
/// what the step needs to count correct predictions.
#[derive(Clone, Debug)]
pub struct TowerLoss {
    /// Mean loss over the slice, shape `[1]`.
    pub loss: Tensor<1>,
    /// Logits `[slice, classes]`, to count correct predictions; `None` skips the count.
    pub logits: Option<Tensor<2>>,
}

impl TowerLoss {
    /// A loss without logits.
    pub fn new(loss: Tensor<1>) -> Self {
        Self { loss, logits: None }
    }

    /// Adds the logits, so the step counts correct predictions.
    pub fn with_logits(mut self, logits: Tensor<2>) -> Self {
        self.logits = Some(logits);
        self
    }

    /// Correct predictions among `labels`, or `None` without logits.
    pub(crate) fn correct(&self, labels: Tensor<1, Int>) -> Option<usize> {
        let logits = self.logits.clone()?;
        let [n] = labels.dims();
        let predicted = logits.argmax(1).reshape([n]);
        let correct: i64 = predicted.equal(labels).int().sum().into_scalar();
        Some(correct as usize)
    }
}

/// What a loss function may return: a mean loss, a [`TowerLoss`], `(loss, logits)`, or a
/// `Result` of any of these (an `Err` stops the step with an error naming the tower).
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

impl IntoTowerLoss for (Tensor<1>, Tensor<2>) {
    fn into_tower_loss(self) -> Result<TowerLoss, String> {
        Ok(TowerLoss::new(self.0).with_logits(self.1))
    }
}

impl<T: IntoTowerLoss, E: Display> IntoTowerLoss for Result<T, E> {
    fn into_tower_loss(self) -> Result<TowerLoss, String> {
        self.map_err(|e| e.to_string())?.into_tower_loss()
    }
}
