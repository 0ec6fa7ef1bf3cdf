//! [`TrainStep`]: what the trainer trains, for any model and batch: the loss of one tower's
//! part of a batch, in the style of burn-train's `TrainStep`. [`ClassifierStep`] is the one
//! for image classifiers on host image batches.

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
}

/// A tower's loss on images `[n, c, h, w]` and labels `[n]`.
pub type LossFn<M> = dyn Fn(&M, Tensor<4>, Tensor<1, Int>) -> TowerLoss + Send + Sync;

/// The step of an image classifier on [`HostBatch`]es: the model's own loss
/// ([`ImageClassifier::loss`]) or one given in its place.
pub struct ClassifierStep<M> {
    loss: Box<LossFn<M>>,
}

impl<M: ImageClassifier> Default for ClassifierStep<M> {
    fn default() -> Self {
        Self::with_loss(|m: &M, x, y| TowerLoss::new(m.loss(x, y).loss))
    }
}

impl<M> ClassifierStep<M> {
    /// Minimizes `loss` instead of the model's own.
    pub fn with_loss(
        loss: impl Fn(&M, Tensor<4>, Tensor<1, Int>) -> TowerLoss + Send + Sync + 'static,
    ) -> Self {
        Self {
            loss: Box::new(loss),
        }
    }
}

impl<M> TrainStep<M> for ClassifierStep<M> {
    type Batch = HostBatch;

    fn loss(&self, model: &M, part: BatchSlice<'_>, device: &Device) -> TowerLoss {
        let (images, labels) = part.to_tensors(device);
        (self.loss)(model, images, labels)
    }
}
