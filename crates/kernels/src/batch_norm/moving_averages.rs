//! [`MovingAverages`]: a batch norm's moving averages of its batches' statistics, which each
//! training step moves towards the batch's, and [`moved`], that move on any backend.

use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, Dispatch};
use burn::module::RunningState;
use burn::tensor::{Device, Tensor};

/// A batch norm's moving averages of the batch means and (biased) variances, `[c]` each, and
/// how far a training step moves them towards the batch's: `(1 - momentum)·average +
/// momentum·batch`, Burn's convention (TF's `decay` is `1 - momentum`).
///
/// [`crate::batch_norm_train_moving`] and [`crate::offset_batch_norm_moving`] take them and
/// give them back moved: on a fused GPU the move then runs inside the kernel that takes the
/// variance, where moving them after the batch norm took two kernels of their own per layer
/// (Inception v3's forward pass on lavapipe: 769 launches before, 511 after; bench/README.md).
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
    /// The averages `mean` and `variance` (`[c]` each), each moved by `momentum` towards a
    /// batch's.
    ///
    /// # Panics
    ///
    /// Where `momentum` is not in `[0, 1]`, or the two averages differ in length.
    pub fn new(mean: Tensor<1>, variance: Tensor<1>, momentum: f64) -> Self {
        assert!(
            (0.0..=1.0).contains(&momentum),
            "a moving average's momentum is in [0, 1], not {momentum}"
        );
        assert_eq!(
            mean.dims(),
            variance.dims(),
            "the moving averages of the mean and of the variance have one value per channel each"
        );
        Self {
            mean,
            variance,
            momentum,
        }
    }

    /// A layer's running statistics as they stand (each pending update folded in: Burn's
    /// `RunningState::value_sync`), on `device`, to be moved by `momentum`.
    ///
    /// # Panics
    ///
    /// As [`new`](Self::new).
    pub fn of_states(
        mean: &RunningState<Tensor<1>>,
        variance: &RunningState<Tensor<1>>,
        momentum: f64,
        device: &Device,
    ) -> Self {
        let [mean, variance] = [mean, variance].map(|s| s.value_sync().to_device(device));
        Self::new(mean, variance, momentum)
    }

    /// The running statistics `mean` and `variance` updated to these averages
    /// (`RunningState::update`).
    pub fn store_in(self, mean: &RunningState<Tensor<1>>, variance: &RunningState<Tensor<1>>) {
        mean.update(self.mean);
        variance.update(self.variance);
    }

    /// Panics unless the averages hold `channels` values each, naming both counts.
    pub(super) fn assert_channels(&self, channels: usize) {
        let [held] = self.mean.dims();
        assert_eq!(
            held, channels,
            "the moving averages hold {held} channels, the batch norm's input {channels}"
        );
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

    /// The averages moved towards a batch's `[2, c]` moments (the mean, then the variance), as
    /// flex's fused batch norms return them.
    pub fn moved_towards_moments(self, moments: Tensor<2>) -> Self {
        let [mean, variance] = [0, 1].map(|row| moments.clone().narrow(0, row, 1).reshape([-1]));
        self.moved_towards(mean, variance)
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

#[cfg(all(test, feature = "flex"))]
mod tests {
    use burn::tensor::{Device, Tensor, TensorData};

    use super::MovingAverages;
    use crate::batch_norm::offset_batch_norm_moving;

    fn values(t: Tensor<1>) -> Vec<f32> {
        t.into_data().try_to_vec().expect("f32 values")
    }

    #[test]
    fn the_averages_move_by_the_momentum_towards_the_batch() {
        let device = Device::flex();
        let tensor = |v: [f32; 2]| Tensor::<1>::from_data(TensorData::from(v), &device);
        let averages_again = || MovingAverages::new(tensor([1.0, 2.0]), tensor([4.0, 8.0]), 0.25);
        let moved = averages_again().moved_towards(tensor([5.0, -2.0]), tensor([0.0, 16.0]));
        assert_eq!(values(moved.mean), [2.0, 1.0]);
        assert_eq!(values(moved.variance), [3.0, 10.0]);
        assert_eq!(moved.momentum, 0.25);
        // The same batch as flex's fused kernels give it: `[2, c]`, the mean's row first.
        let moments =
            Tensor::<2>::from_data(TensorData::from([[5.0f32, -2.0], [0.0, 16.0]]), &device);
        let moved = averages_again().moved_towards_moments(moments);
        assert_eq!(values(moved.mean), [2.0, 1.0]);
        assert_eq!(values(moved.variance), [3.0, 10.0]);
    }

    #[test]
    #[should_panic(expected = "momentum is in [0, 1], not 1.5")]
    fn a_momentum_past_one_is_refused() {
        let device = Device::flex();
        MovingAverages::new(Tensor::zeros([3], &device), Tensor::ones([3], &device), 1.5);
    }

    #[test]
    #[should_panic(expected = "the moving averages hold 3 channels, the batch norm's input 4")]
    fn averages_of_another_width_than_the_input_are_refused() {
        let device = Device::flex();
        let averages =
            MovingAverages::new(Tensor::zeros([3], &device), Tensor::ones([3], &device), 0.1);
        let x = Tensor::<4>::zeros([2, 4, 3, 3], &device);
        let beta = Tensor::zeros([4], &device);
        offset_batch_norm_moving(&x, &beta, 1e-3, averages);
    }
}
