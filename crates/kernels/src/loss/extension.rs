//! The backend extension behind [`super::softmax_cross_entropy`], and which devices it routes.

use burn::backend::tensor::{BoolTensor, FloatTensor, IntTensor};
use burn::backend::{Backend, TensorMetadata, get_or_init_device_settings};
use burn::tensor::{Device, Shape, TensorData};

pub(super) use routing::SoftmaxCrossEntropy;

/// The extension, apart: its expansion names `NdArray`, deprecated in Burn 0.22.
mod routing {
    #![allow(deprecated)]
    // Built without a backend feature, the expansion's routing leaves the inputs unused.
    #![cfg_attr(not(any(feature = "flex", feature = "gpu")), allow(unused_variables))]

    use burn::backend::tensor::{FloatTensor, IntTensor};
    use burn::backend::{Backend, backend_extension};

    /// The mean softmax cross-entropy: Burn's ops forward; under autodiff, the backward pass
    /// of `backward.rs`.
    #[backend_extension(Flex: cfg(feature = "flex"), Cube: cfg(feature = "gpu"), Autodiff)]
    pub(crate) trait SoftmaxCrossEntropy: Backend {
        /// `[1]`: see [`crate::softmax_cross_entropy`]; `labels` are `[batch]`.
        fn towers_softmax_cross_entropy(
            logits: FloatTensor<Self>,
            labels: IntTensor<Self>,
            label_smoothing: f32,
        ) -> FloatTensor<Self> {
            super::forward::<Self>(logits, labels, label_smoothing).loss
        }
    }

    #[cfg(feature = "flex")]
    impl SoftmaxCrossEntropy for burn::backend::Flex {}
    #[cfg(feature = "gpu")]
    impl SoftmaxCrossEntropy for burn::backend::Cube {}
}

/// Whether the extension routes `device`'s backend (autodiff over it included): the backends
/// this crate was built for; the rest panic in the extension, so they take Burn's loss.
pub(super) fn routed(device: &Device) -> bool {
    // Named in full, not imported: built without a backend feature, no arm uses it.
    match device.clone().inner().as_dispatch() {
        #[cfg(feature = "flex")]
        burn::backend::DispatchDevice::Flex(_) => true,
        #[cfg(feature = "gpu")]
        burn::backend::DispatchDevice::Cube(_) => true,
        _ => false,
    }
}

/// The loss, and the log-probabilities its backward pass reads.
pub(super) struct Forward<B: Backend> {
    pub(super) loss: FloatTensor<B>,
    pub(super) log_probs: FloatTensor<B>,
    /// The labels as `[batch, 1]`: the indices the forward pass gathers, and those the backward
    /// pass compares with the classes.
    pub(super) label_column: IntTensor<B>,
}

/// The loss by the ops Burn's `CrossEntropyLoss` takes, in the same order, but for the
/// smoothed targets' one-hot share, picked by a mask ([`smoothed_products`]), and the mean over
/// the batch ([`mean_of_column`]): the same value to float rounding.
pub(super) fn forward<B: Backend>(
    logits: FloatTensor<B>,
    labels: IntTensor<B>,
    label_smoothing: f32,
) -> Forward<B> {
    let [batch, _] = logits.shape().dims();
    let log_probs = B::log_softmax(logits, 1);
    let label_column = B::int_reshape(labels, Shape::new([batch, 1]));
    let per_example = if label_smoothing == 0.0 {
        B::float_gather(1, log_probs.clone(), label_column.clone())
    } else {
        let products = smoothed_products::<B>(&log_probs, label_column.clone(), label_smoothing);
        B::float_sum_dim(products, 1)
    };
    Forward {
        loss: B::float_neg(mean_of_column::<B>(per_example)),
        log_probs,
        label_column,
    }
}

/// Each log-probability times its target, `(1 - smoothing) · one_hot + smoothing / classes`,
/// each target the same f32 value as Burn's. The one-hot share is picked by a mask, which fuses
/// with the products, where Burn scatters ones into zeros, a kernel of its own.
fn smoothed_products<B: Backend>(
    log_probs: &FloatTensor<B>,
    label_column: IntTensor<B>,
    smoothing: f32,
) -> FloatTensor<B> {
    let classes = log_probs.shape()[1];
    let uniform = smoothing / classes as f32;
    let at_label = (1.0 - smoothing) + uniform;
    B::float_mask_where(
        B::float_mul_scalar(log_probs.clone(), uniform.into()),
        label_places::<B>(label_column, classes),
        B::float_mul_scalar(log_probs.clone(), at_label.into()),
    )
}

/// The mean of a `[batch, 1]` column, shape `[1]`, as a sum along it divided by `batch`: one
/// reduction along a short dimension, where a whole tensor's mean on Burn's CubeCL backends is
/// a reduction in two stages, a kernel launch more (the CIFAR-10 trainer's step on lavapipe 77
/// launches against 78); the division joins the loss's next element-wise kernel under fusion.
fn mean_of_column<B: Backend>(column: FloatTensor<B>) -> FloatTensor<B> {
    let [batch, _] = column.shape().dims();
    let sum = B::float_reshape(B::float_sum_dim(column, 0), Shape::new([1]));
    B::float_div_scalar(sum, (batch as f32).into())
}

/// `[batch, classes]`, true where a column's index is its row's label: the labels' column and
/// the classes' indices, each expanded (a view) and compared. Under fusion the comparison joins
/// the element-wise kernel around it, where a scatter of the labels runs alone.
pub(super) fn label_places<B: Backend>(
    label_column: IntTensor<B>,
    classes: usize,
) -> BoolTensor<B> {
    let [batch, _] = label_column.shape().dims();
    let device = label_column.device();
    // Uploaded rather than `int_arange`, which Burn's CubeCL backends compute in three kernels.
    let indices = TensorData::new((0..classes as i64).collect(), [1, classes]);
    let indices = B::int_from_data(indices.convert_dtype(label_column.dtype()), &device);
    let places = Shape::new([batch, classes]);
    B::int_equal(
        B::int_expand(label_column, places.clone()),
        B::int_expand(indices, places),
        get_or_init_device_settings::<B>(&device).bool_dtype,
    )
}

#[cfg(all(test, feature = "flex"))]
mod tests {
    use super::*;

    #[test]
    fn routes_flex_with_and_without_autodiff() {
        assert!(routed(&Device::flex()));
        assert!(routed(&Device::flex().autodiff()));
    }
}
