//! [`MovingAverages`]: a batch norm's moving averages of its batches' statistics, which each
//! training step moves towards the batch's, and [`moved`], that move on any backend.

use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, Dispatch};
use burn::tensor::Tensor;

/// A batch norm's moving averages of the batch means and (biased) variances, `[c]` each, and
/// how far a training step moves them towards the batch's: `(1 - momentum)·average +
/// momentum·batch`, Burn's convention (TF's `decay` is `1 - momentum`).
///
/// [`crate::batch_norm_train`] and [`crate::offset_batch_norm`] take them and give them back
/// moved: on a fused GPU the move then runs inside the kernel that takes the variance, where
/// moving them after the batch norm took two kernels of their own per layer (Inception v3's
/// forward pass on lavapipe: 769 launches before, 511 after; bench/README.md).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct MovingAverages {
    /// The moving average of the batch means, `[c]`.
    pub mean: Tensor<1>,
    /// The moving average of the batch variances, `[c]`.
    pub variance: Tensor<1>,
    /// The weight of a batch's statistics in the move, in `[0, 1]`.
    pub momentum: f64,
}

impl MovingAverages {
    /// The averages `mean` and `variance`, each moved by `momentum` towards a batch's.
    pub fn new(mean: Tensor<1>, variance: Tensor<1>, momentum: f64) -> Self {
        Self {
            mean,
            variance,
            momentum,
        }
    }

    /// The averages moved towards a batch's mean and variance (`[c]` each), without gradient.
    pub fn moved_towards(self, batch_mean: Tensor<1>, batch_variance: Tensor<1>) -> Self {
        let momentum = self.momentum;
        let move_towards = |average: Tensor<1>, batch: Tensor<1>| {
            let average = average.into_dispatch();
            let batch = batch.detach().into_dispatch();
            Tensor::from_dispatch(moved::<Dispatch>(average, batch, momentum)).detach()
        };
        Self {
            mean: move_towards(self.mean, batch_mean),
            variance: move_towards(self.variance, batch_variance),
            momentum,
        }
    }
}

/// `average` moved towards `batch` (the same shape) by `momentum`.
pub(crate) fn moved<B: Backend>(
    average: FloatTensor<B>,
    batch: FloatTensor<B>,
    momentum: f64,
) -> FloatTensor<B> {
    B::float_add(
        B::float_mul_scalar(average, (1.0 - momentum).into()),
        B::float_mul_scalar(batch, momentum.into()),
    )
}
