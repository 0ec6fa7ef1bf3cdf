//! The backend extension behind [`super::batch_norm_train`] and [`super::offset_batch_norm`],
//! their forward pass, and which devices it routes.

use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, Dispatch, TensorMetadata};
use burn::tensor::{Shape, Tensor};

use super::MovingAverages;
use super::column_sums::column_means;
use super::moving_averages::moved;
use super::rectifier::Rectifier;
use crate::cubecl_device::channel_columns;
use crate::short_sums::loops_stop_early;

pub(super) use routing::BatchNorm;

/// The extension, apart: its expansion names `NdArray`, deprecated in Burn 0.22.
mod routing {
    #![allow(deprecated)]

    use burn::backend::tensor::FloatTensor;
    use burn::backend::{Backend, backend_extension};

    use super::Options;

    /// Batch norm on the batch's statistics, followed by a `rectifier` where there is one:
    /// Burn's ops forward; under autodiff, the backward pass of `backward.rs`. Each returns the
    /// output and the moving averages of the mean and the biased variance (`[c]` each) moved
    /// towards the batch's by `momentum`.
    #[backend_extension(Cube, Autodiff)]
    pub(crate) trait BatchNorm: Backend {
        /// See [`crate::batch_norm_train`].
        // The averages and the momentum apart, as the extension's arguments are tensors and
        // plain values.
        fn towers_batch_norm(
            x: FloatTensor<Self>,
            gamma: FloatTensor<Self>,
            beta: FloatTensor<Self>,
            average_mean: FloatTensor<Self>,
            average_variance: FloatTensor<Self>,
            momentum: f64,
            options: Options,
        ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
            let averages = ([average_mean, average_variance], momentum);
            super::forward::<Self>(x, Some(gamma), beta, averages, options).results()
        }

        /// See [`crate::offset_batch_norm`].
        fn towers_offset_batch_norm(
            x: FloatTensor<Self>,
            beta: FloatTensor<Self>,
            average_mean: FloatTensor<Self>,
            average_variance: FloatTensor<Self>,
            momentum: f64,
            options: Options,
        ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
            let averages = ([average_mean, average_variance], momentum);
            super::forward::<Self>(x, None, beta, averages, options).results()
        }
    }

    impl BatchNorm for burn::backend::Cube {}
}

/// What the forward pass does besides its tensors: `epsilon`, the rectifier that follows, if
/// any, and whether its sums are taken in pieces (`column_sums.rs`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Options {
    pub(super) epsilon: f64,
    pub(super) rectifier: Option<Rectifier>,
    pub(super) in_pieces: bool,
}

/// The output and the moved averages on a CubeCL device, with `gamma` or without a scale, a
/// `rectifier` after it where there is one.
pub(super) fn batch_norm<const D: usize>(
    x: &Tensor<D>,
    gamma: Option<&Tensor<1>>,
    beta: &Tensor<1>,
    epsilon: f64,
    rectifier: Option<Rectifier>,
    averages: MovingAverages,
) -> (Tensor<D>, MovingAverages) {
    let options = Options {
        epsilon,
        rectifier,
        in_pieces: loops_stop_early(&x.device()),
    };
    let [x, beta] = [x.clone().into_dispatch(), beta.clone().into_dispatch()];
    let momentum = averages.momentum;
    let [mean, variance] = [averages.mean, averages.variance].map(|a| a.detach().into_dispatch());
    let (y, mean, variance) = match gamma {
        Some(gamma) => <Dispatch as BatchNorm>::towers_batch_norm(
            x,
            gamma.clone().into_dispatch(),
            beta,
            mean,
            variance,
            momentum,
            options,
        ),
        None => <Dispatch as BatchNorm>::towers_offset_batch_norm(
            x, beta, mean, variance, momentum, options,
        ),
    };
    let [mean, variance] = [mean, variance].map(Tensor::from_dispatch);
    let moved = MovingAverages::new(mean, variance, momentum);
    (Tensor::from_dispatch(y), moved)
}

/// The forward pass's results: the output, per channel (`[1, c]`) what the backward pass
/// reads, and the moved averages (`[1, c]`).
pub(super) struct Forward<B: Backend> {
    pub(super) output: FloatTensor<B>,
    pub(super) mean: FloatTensor<B>,
    pub(super) inv_std: FloatTensor<B>,
    pub(super) moved: [FloatTensor<B>; 2],
}

impl<B: Backend> Forward<B> {
    /// The output and the moved averages of the mean and the variance, as `[c]`.
    pub(super) fn results(self) -> (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>) {
        let channels = Shape::new([self.mean.shape().num_elements()]);
        let [mean, variance] = self.moved.map(|s| B::float_reshape(s, channels.clone()));
        (self.output, mean, variance)
    }
}

/// `[1, c]` or `[c]` as `[1, c, 1, ...]` of `rank` dimensions: a per-channel value beside `x`.
pub(super) fn beside<B: Backend>(per_channel: FloatTensor<B>, rank: usize) -> FloatTensor<B> {
    let mut shape = vec![1; rank];
    shape[1] = per_channel.shape().num_elements();
    B::float_reshape(per_channel, Shape::from(shape))
}

/// The mean, then the biased variance from the centred columns (one mean each, [`column_means`],
/// `in_pieces` on a device whose loops stop early), the `averages` (`[c]`) moved towards both
/// by the momentum, then the output in one element-wise expression, its rectifier included
/// where there is one.
///
/// Ordered for Burn's fusion: a reshape between ops splits them into kernels of their own, so
/// each per-channel value is laid out as it is used before the ops that use it start; and the
/// moves come right after the variance's reduction and `1/√(var + ε)`, whose kernel takes them
/// in as it writes (fusion's reduce fuser; the mean's reduction reads `x` as it lies, and the
/// fuser takes ops in on write only after ops on read). Made after the batch norm, the moves
/// took two kernels of `c` values each per layer.
pub(super) fn forward<B: Backend>(
    x: FloatTensor<B>,
    gamma: Option<FloatTensor<B>>,
    beta: FloatTensor<B>,
    (averages, momentum): ([FloatTensor<B>; 2], f64),
    Options {
        epsilon,
        rectifier,
        in_pieces,
    }: Options,
) -> Forward<B> {
    let rank = x.shape().num_dims();
    let row = Shape::new([1, x.shape()[1]]);
    let [average_mean, average_variance] = averages.map(|a| B::float_reshape(a, row.clone()));
    let columns = channel_columns::<B>(x.clone());
    let mean = column_means::<B>(columns.clone(), in_pieces);
    let centred = B::float_sub(columns, mean.clone());
    let variance = column_means::<B>(B::float_mul(centred.clone(), centred), in_pieces);
    let inv_std = B::float_recip(B::float_sqrt(B::float_add_scalar(
        variance.clone(),
        epsilon.into(),
    )));
    let moved_variance = moved::<B>(average_variance, variance, momentum);
    let moved_mean = moved::<B>(average_mean, mean.clone(), momentum);
    let [mean_beside, inv_std_beside, beta_beside] =
        [mean.clone(), inv_std.clone(), beta].map(|t| beside::<B>(t, rank));
    let gamma_beside = gamma.map(|gamma| beside::<B>(gamma, rank));
    let mut scaled = B::float_mul(B::float_sub(x, mean_beside), inv_std_beside);
    if let Some(gamma) = gamma_beside {
        scaled = B::float_mul(scaled, gamma);
    }
    let output = B::float_add(scaled, beta_beside);
    Forward {
        output: match rectifier {
            Some(rectifier) => rectifier.forward::<B>(output),
            None => output,
        },
        mean,
        inv_std,
        moved: [moved_mean, moved_variance],
    }
}
