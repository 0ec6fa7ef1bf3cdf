//! The backend extension behind [`super::offset_batch_norm`], its forward pass, and which
//! devices it routes.

use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, DispatchDevice, TensorMetadata};
use burn::tensor::{Device, Shape, Tensor};

pub(super) use routing::OffsetBatchNorm;

/// The extension, apart: its expansion names `NdArray`, deprecated in Burn 0.22.
mod routing {
    #![allow(deprecated)]

    use burn::backend::tensor::FloatTensor;
    use burn::backend::{Backend, TensorMetadata, backend_extension};
    use burn::tensor::Shape;

    /// Batch norm with an offset and no scale: Burn's ops forward; under autodiff, the
    /// backward pass of `backward.rs`.
    #[backend_extension(Cube, Autodiff)]
    pub(crate) trait OffsetBatchNorm: Backend {
        /// The output, the batch's mean and its biased variance (`[c]` each): see
        /// [`crate::offset_batch_norm`].
        fn towers_offset_batch_norm(
            x: FloatTensor<Self>,
            beta: FloatTensor<Self>,
            epsilon: f64,
        ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
            let out = super::forward::<Self>(x, beta, epsilon);
            let channels = Shape::new([out.mean.shape()[0]]);
            let variance = Self::float_reshape(out.variance, channels.clone());
            (
                out.output,
                Self::float_reshape(out.mean, channels),
                variance,
            )
        }
    }

    impl OffsetBatchNorm for burn::backend::Cube {}
}

/// Whether the extension routes `device`'s backend (autodiff over it included).
pub(super) fn routed(device: &Device) -> bool {
    matches!(
        device.clone().inner().as_dispatch(),
        DispatchDevice::Cube(_)
    )
}

/// [`super::offset_batch_norm`] on a routed device.
pub(super) fn offset_batch_norm<const D: usize>(
    x: &Tensor<D>,
    beta: &Tensor<1>,
    epsilon: f64,
) -> (Tensor<D>, [Tensor<1>; 2]) {
    let (y, mean, variance) =
        <burn::backend::Dispatch as OffsetBatchNorm>::towers_offset_batch_norm(
            x.clone().into_dispatch(),
            beta.clone().into_dispatch(),
            epsilon,
        );
    let stats = [mean, variance].map(Tensor::from_dispatch);
    (Tensor::from_dispatch(y), stats)
}

/// The forward pass's results: the output, and per channel (`[c, 1]`) what the backward pass
/// reads.
pub(super) struct Forward<B: Backend> {
    pub(super) output: FloatTensor<B>,
    pub(super) mean: FloatTensor<B>,
    pub(super) variance: FloatTensor<B>,
    pub(super) inv_std: FloatTensor<B>,
}

/// `x` as `[c, n · h · w]`: the values of each channel in a row, as Burn's batch norm lays
/// them out to reduce (a copy where `x`'s strides do not allow a view).
pub(super) fn channel_rows<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    let shape = x.shape();
    let channels = shape[1];
    let rows = Shape::new([channels, shape.num_elements() / channels]);
    B::float_reshape(B::float_swap_dims(x, 0, 1), rows)
}

/// `[c, 1]` as `[1, c, 1, ...]` of `rank` dimensions: a per-channel value beside `x`.
pub(super) fn beside<B: Backend>(per_channel: FloatTensor<B>, rank: usize) -> FloatTensor<B> {
    let mut shape = vec![1; rank];
    shape[1] = per_channel.shape().num_elements();
    B::float_reshape(per_channel, Shape::from(shape))
}

/// The mean, then the biased variance from the centred rows (one reduction each), then the
/// output in one element-wise expression. The per-channel values are laid beside `x` before
/// that expression starts: on a fused GPU a reshape between its ops would split it into
/// kernels of one op each.
pub(super) fn forward<B: Backend>(
    x: FloatTensor<B>,
    beta: FloatTensor<B>,
    epsilon: f64,
) -> Forward<B> {
    let rank = x.shape().num_dims();
    let rows = channel_rows::<B>(x.clone());
    let mean = B::float_mean_dim(rows.clone(), 1);
    let centred = B::float_sub(rows, mean.clone());
    let variance = B::float_mean_dim(B::float_mul(centred.clone(), centred), 1);
    let inv_std = B::float_recip(B::float_sqrt(B::float_add_scalar(
        variance.clone(),
        epsilon.into(),
    )));
    let [mean_beside, inv_std_beside, beta_beside] =
        [mean.clone(), inv_std.clone(), beta].map(|t| beside::<B>(t, rank));
    let normalized = B::float_mul(B::float_sub(x, mean_beside), inv_std_beside);
    Forward {
        output: B::float_add(normalized, beta_beside),
        mean,
        variance,
        inv_std,
    }
}
