//! The backend extension behind [`super::batch_norm_train`] and [`super::offset_batch_norm`],
//! their forward pass, and which devices it routes.

use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, Dispatch, TensorMetadata};
use burn::tensor::{Shape, Tensor};

use super::column_sums::column_means;
use crate::cubecl_device::channel_columns;
use crate::short_sums::loops_stop_early;

pub(super) use routing::BatchNorm;

/// The extension, apart: its expansion names `NdArray`, deprecated in Burn 0.22.
mod routing {
    #![allow(deprecated)]

    use burn::backend::tensor::FloatTensor;
    use burn::backend::{Backend, backend_extension};

    /// Batch norm on the batch's statistics: Burn's ops forward; under autodiff, the backward
    /// pass of `backward.rs`. Each returns the output, the batch's mean and its biased variance
    /// (`[c]` each).
    #[backend_extension(Cube, Autodiff)]
    pub(crate) trait BatchNorm: Backend {
        /// See [`crate::batch_norm_train`].
        fn towers_batch_norm(
            x: FloatTensor<Self>,
            gamma: FloatTensor<Self>,
            beta: FloatTensor<Self>,
            epsilon: f64,
            in_pieces: bool,
        ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
            super::forward::<Self>(x, Some(gamma), beta, epsilon, in_pieces).results()
        }

        /// See [`crate::offset_batch_norm`].
        fn towers_offset_batch_norm(
            x: FloatTensor<Self>,
            beta: FloatTensor<Self>,
            epsilon: f64,
            in_pieces: bool,
        ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
            super::forward::<Self>(x, None, beta, epsilon, in_pieces).results()
        }
    }

    impl BatchNorm for burn::backend::Cube {}
}

/// The output and `[mean, variance]` on a CubeCL device, with `gamma` or without a scale.
pub(super) fn batch_norm<const D: usize>(
    x: &Tensor<D>,
    gamma: Option<&Tensor<1>>,
    beta: &Tensor<1>,
    epsilon: f64,
) -> (Tensor<D>, [Tensor<1>; 2]) {
    let in_pieces = loops_stop_early(&x.device());
    let [x, beta] = [x.clone().into_dispatch(), beta.clone().into_dispatch()];
    let (y, mean, variance) = match gamma {
        Some(gamma) => {
            let gamma = gamma.clone().into_dispatch();
            <Dispatch as BatchNorm>::towers_batch_norm(x, gamma, beta, epsilon, in_pieces)
        }
        None => <Dispatch as BatchNorm>::towers_offset_batch_norm(x, beta, epsilon, in_pieces),
    };
    let stats = [mean, variance].map(Tensor::from_dispatch);
    (Tensor::from_dispatch(y), stats)
}

/// The forward pass's results: the output, and per channel (`[1, c]`) what the backward pass
/// reads.
pub(super) struct Forward<B: Backend> {
    pub(super) output: FloatTensor<B>,
    pub(super) mean: FloatTensor<B>,
    pub(super) variance: FloatTensor<B>,
    pub(super) inv_std: FloatTensor<B>,
}

impl<B: Backend> Forward<B> {
    /// The output, the mean and the variance, the statistics as `[c]`.
    pub(super) fn results(self) -> (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>) {
        let channels = Shape::new([self.mean.shape().num_elements()]);
        let [mean, variance] =
            [self.mean, self.variance].map(|s| B::float_reshape(s, channels.clone()));
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
/// `in_pieces` on a device whose loops stop early),
/// then the output in one element-wise expression. The per-channel values are laid beside `x`
/// before that expression starts: on a fused GPU a reshape between its ops would split it into
/// kernels of one op each.
pub(super) fn forward<B: Backend>(
    x: FloatTensor<B>,
    gamma: Option<FloatTensor<B>>,
    beta: FloatTensor<B>,
    epsilon: f64,
    in_pieces: bool,
) -> Forward<B> {
    let rank = x.shape().num_dims();
    let columns = channel_columns::<B>(x.clone());
    let mean = column_means::<B>(columns.clone(), in_pieces);
    let centred = B::float_sub(columns, mean.clone());
    let variance = column_means::<B>(B::float_mul(centred.clone(), centred), in_pieces);
    let inv_std = B::float_recip(B::float_sqrt(B::float_add_scalar(
        variance.clone(),
        epsilon.into(),
    )));
    let [mean_beside, inv_std_beside, beta_beside] =
        [mean.clone(), inv_std.clone(), beta].map(|t| beside::<B>(t, rank));
    let gamma_beside = gamma.map(|gamma| beside::<B>(gamma, rank));
    let mut scaled = B::float_mul(B::float_sub(x, mean_beside), inv_std_beside);
    if let Some(gamma) = gamma_beside {
        scaled = B::float_mul(scaled, gamma);
    }
    Forward {
        output: B::float_add(scaled, beta_beside),
        mean,
        variance,
        inv_std,
    }
}
