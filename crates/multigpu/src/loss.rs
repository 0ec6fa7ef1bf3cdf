//! What a tower's loss function returns.

use burn::optim::GradientsParams;
use burn::tensor::{FloatDType, Int, Tensor};

use crate::buckets;
use crate::error::{Cause, While};
use crate::host_syncs;

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

    /// Whether the loss and what it reports have the shapes [`read_values`](Self::read_values)
    /// needs: told apart before anything is read, so that a tower whose values are read only
    /// at the end of the step (after the update) fails before the update instead.
    pub(crate) fn checked_shapes(&self) -> Result<(), Cause> {
        if self.loss.dims() != [1] {
            return Err(format!(
                "the loss has shape {:?}; expected the mean loss of the part, shape [1]",
                self.loss.dims()
            )
            .into());
        }
        if let Some((name, value)) = self.metrics.iter().find(|(_, v)| v.dims() != [1]) {
            return Err(format!(
                "the metric `{name}` has shape {:?}; expected its mean over the part, shape [1]",
                value.dims()
            )
            .into());
        }
        match &self.predictions {
            Some((logits, labels)) if logits.dims()[0] != labels.dims()[0] => Err(format!(
                "the logits have shape {:?} and the labels {:?}: one label per row of logits",
                logits.dims(),
                labels.dims()
            )
            .into()),
            _ => Ok(()),
        }
    }

    /// The loss, the count of correct predictions and the metrics, read from the device in
    /// one read: the step's one host sync on this tower (`host_syncs.rs`) rather than one per
    /// value. The values travel as f32 (a count is exact there up to 2^24 examples). For a loss
    /// whose [`checked_shapes`](Self::checked_shapes) passed: one value per tensor read.
    pub(crate) fn read_values(&self) -> Result<LossValues, Cause> {
        let device = self.loss.device();
        let as_f32 = |t: Tensor<1>| t.detach().cast(FloatDType::F32).to_device(&device);
        let mut values = vec![as_f32(self.loss.clone())];
        if let Some((logits, labels)) = self.predictions.clone() {
            let [n] = labels.dims();
            let predicted = logits.argmax(1).reshape([n]);
            values.push(as_f32(predicted.equal(labels).int().sum().float()));
        }
        values.extend(self.metrics.iter().map(|(_, value)| as_f32(value.clone())));
        host_syncs::note_read();
        let read = buckets::joined(values)
            .try_into_vec_as::<f32>()
            .map_err(While::doing("reading the loss from the device"))?;
        let expected = 1 + usize::from(self.predictions.is_some()) + self.metrics.len();
        debug_assert_eq!(read.len(), expected, "shapes checked by `checked_shapes`");
        let mut read = read.into_iter().map(f64::from);
        let mut next = || read.next().expect("one value per tensor read");
        Ok(LossValues {
            loss: next(),
            correct: self.predictions.is_some().then(|| next() as usize),
            metrics: (self.metrics.iter())
                .map(|(name, _)| (name.clone(), next()))
                .collect(),
        })
    }
}

/// A tower's loss values, read from its device.
pub(crate) struct LossValues {
    pub(crate) loss: f64,
    pub(crate) correct: Option<usize>,
    pub(crate) metrics: Vec<(String, f64)>,
}

/// What a loss function may return: a mean loss, a [`TowerLoss`], or a `Result` of either whose
/// error is an error value or a message (`String`, `&str`, `anyhow::Error`, any
/// `std::error::Error`): an `Err` stops the step with [`Error::TowerFailed`](crate::Error)
/// naming the tower, the loss function's error its `source`.
pub trait IntoTowerLoss {
    /// The loss, or the error there is instead.
    fn into_tower_loss(self) -> Result<TowerLoss, Cause>;
}

impl IntoTowerLoss for TowerLoss {
    fn into_tower_loss(self) -> Result<TowerLoss, Cause> {
        Ok(self)
    }
}

impl IntoTowerLoss for Tensor<1> {
    fn into_tower_loss(self) -> Result<TowerLoss, Cause> {
        Ok(TowerLoss::new(self))
    }
}

impl<T: IntoTowerLoss, E: Into<Cause>> IntoTowerLoss for Result<T, E> {
    fn into_tower_loss(self) -> Result<TowerLoss, Cause> {
        self.map_err(Into::into)?.into_tower_loss()
    }
}
