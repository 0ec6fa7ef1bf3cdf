//! [`TrainStep`]: what the trainer trains, for any model and batch: the loss of one tower's
//! part of a batch, in the style of burn-train's `TrainStep`. [`ClassifierStep`] is the one
//! for image classifiers on host image batches.

use burn::module::ParamId;
use burn::tensor::{Device, Int, Tensor};
use towers_data::{BatchSlice, HostBatch};
use towers_models::ImageClassifier;
use towers_multigpu::{TowerBatch, TowerLoss};

/// The loss of model `M` on one tower's part of a batch.
///
/// The trainer runs it on every tower's thread, with that tower's replica, part and device:
/// make the part's tensors on `device` (with a Burn `Batcher`, for instance), run the model and
/// return the part's *mean* loss, shape `[1]`, with predictions (counted as accuracy) and named
/// metrics if any; both go to the log and to TensorBoard.
///
/// ```
/// use burn::tensor::Device;
/// use towers_multigpu::TowerLoss;
/// use towers_train::TrainStep;
/// # use burn::module::Module; use burn::nn::{Linear, LinearConfig}; use burn::tensor::{Tensor, TensorData};
/// # #[derive(Module, Debug)] struct Regression { fc: Linear }
/// # impl Regression { fn mse(&self, x: &[[f32; 2]], device: &Device) -> Tensor<1> {
/// #     let n = x.len(); let v: Vec<f32> = x.iter().flatten().copied().collect();
/// #     self.fc.forward(Tensor::<2>::from_data(TensorData::new(v, [n, 2]), device)).powi_scalar(2).mean() } }
///
/// struct Fit;
///
/// impl TrainStep<Regression> for Fit {
///     type Batch = Vec<[f32; 2]>;
///
///     fn loss(&self, model: &Regression, part: &[[f32; 2]], device: &Device) -> TowerLoss {
///         TowerLoss::new(model.mse(part, device))
///     }
/// }
/// ```
pub trait TrainStep<M>: Send + Sync {
    /// The batches the step trains on (the input's).
    type Batch: TowerBatch + Send;

    /// The mean loss of `part` on `device`.
    fn loss(
        &self,
        model: &M,
        part: <Self::Batch as TowerBatch>::Part<'_>,
        device: &Device,
    ) -> TowerLoss;

    /// The L2 weight decays the trainer's optimizer adds to each named parameter's gradient in
    /// its update, `decay · W` ([`Decayed`](crate::optim::Decayed)): for a step whose loss holds
    /// those penalties as constants, without their gradients. None by default.
    fn decay_in_update(&self, model: &M) -> Vec<(ParamId, f64)> {
        let _ = model;
        Vec::new()
    }
}

/// A tower's loss on images `[n, c, h, w]` and labels `[n]`.
pub type LossFn<M> = dyn Fn(&M, Tensor<4>, Tensor<1, Int>) -> TowerLoss + Send + Sync;

/// The parameters whose decay the update adds, as a step finds them in a model.
type DecaysFn<M> = dyn Fn(&M) -> Vec<(ParamId, f64)> + Send + Sync;

/// The step of an image classifier on [`HostBatch`]es: the model's own loss or one given in
/// its place.
///
/// The model's own loss is [`ImageClassifier::loss_decay_in_update`]: its weight decay's
/// gradient is added by the optimizer ([`TrainStep::decay_in_update`]), not taken through
/// backward; the values, logged and trained, are [`ImageClassifier::loss`]'s.
pub struct ClassifierStep<M> {
    loss: Box<LossFn<M>>,
    decays: Box<DecaysFn<M>>,
}

impl<M: ImageClassifier> Default for ClassifierStep<M> {
    fn default() -> Self {
        let decays = |m: &M| m.weight_decays_by_id();
        Self {
            loss: Box::new(|m: &M, x, y| TowerLoss::new(m.loss_decay_in_update(x, y).loss)),
            decays: Box::new(decays),
        }
    }
}

impl<M> ClassifierStep<M> {
    /// Minimizes `loss` instead of the model's own; the update adds no weight decay of its own.
    pub fn with_loss(
        loss: impl Fn(&M, Tensor<4>, Tensor<1, Int>) -> TowerLoss + Send + Sync + 'static,
    ) -> Self {
        Self {
            loss: Box::new(loss),
            decays: Box::new(|_| Vec::new()),
        }
    }
}

impl<M> TrainStep<M> for ClassifierStep<M> {
    type Batch = HostBatch;

    fn loss(&self, model: &M, part: BatchSlice<'_>, device: &Device) -> TowerLoss {
        let (images, labels) = part.to_tensors(device);
        (self.loss)(model, images, labels)
    }

    fn decay_in_update(&self, model: &M) -> Vec<(ParamId, f64)> {
        (self.decays)(model)
    }
}
