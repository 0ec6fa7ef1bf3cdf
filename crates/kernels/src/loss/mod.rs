//! [`softmax_cross_entropy`]: the mean cross-entropy of logits against class labels, as TF's
//! `tf.losses.softmax_cross_entropy` on one-hot labels (with its `label_smoothing`) and Burn's
//! `CrossEntropyLoss` compute it, with a backward pass of its own.
//!
//! Why: Burn's autodiff derives the gradient through log-softmax, gather and mean one op at a
//! time, and on a GPU with fusion that is a dozen small kernels (zeros, a scatter, fills and
//! element-wise ops between two reductions, which fusion leaves unfused): 12 of the CIFAR-10
//! step's 104 launches on wgpu. The gradient is one expression,
//! `(softmax(x) - target) · g / n`: here it is one kernel on a fused GPU, the target's one-hot
//! share found by comparing each label with its column's index (against three with a scatter of
//! that share: the CIFAR-10 trainer's step on lavapipe, 74 launches against 77).
//!
//! - `extension.rs`: the backend extension (its forward pass in Burn's ops, on every backend
//!   it routes), and the routing check.
//! - `backward.rs`: its autodiff implementation and backward pass.

mod backward;
mod extension;

use burn::backend::Dispatch;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::tensor::{Int, Tensor};

use extension::{SoftmaxCrossEntropy, routed};

/// The mean over the batch of `-Σ_k target[i, k] · log_softmax(logits)[i, k]`, shape `[1]`,
/// where `target` is row `i`'s one-hot label spread by `label_smoothing` (TF's): `(1 -
/// label_smoothing) · one_hot(labels[i]) + label_smoothing / classes`.
///
/// `logits` are `[batch, classes]`, `labels` `[batch]` class indices below `classes`. The value
/// is Burn's `CrossEntropyLoss`'s (`with_smoothing` where `label_smoothing > 0`), computed by the
/// same ops but for the batch mean (a sum along the batch, one kernel on a GPU where Burn's mean
/// takes two), so the same to float rounding; the gradient agrees with Burn's to float
/// rounding, in one kernel on a fused GPU (see the module's doc). On devices the extension
/// does not route (ndarray, remote and LibTorch devices, or a GPU without this crate's GPU
/// features) and on an empty batch, it is Burn's `CrossEntropyLoss` itself.
///
/// # Panics
///
/// Where `label_smoothing` is not within `[0, 1]`, or the shapes disagree (as Burn's).
pub fn softmax_cross_entropy(
    logits: Tensor<2>,
    labels: Tensor<1, Int>,
    label_smoothing: f32,
) -> Tensor<1> {
    assert!(
        (0.0..=1.0).contains(&label_smoothing),
        "label smoothing {label_smoothing} is not within [0, 1]"
    );
    let [batch, _] = logits.dims();
    assert_eq!(
        labels.dims(),
        [batch],
        "{batch} rows of logits but {:?} labels",
        labels.dims()
    );
    if batch == 0 || !routed(&logits.device()) {
        let smoothing = (label_smoothing > 0.0).then_some(label_smoothing);
        return CrossEntropyLossConfig::new()
            .with_smoothing(smoothing)
            .init(&logits.device())
            .forward(logits, labels);
    }
    Tensor::from_dispatch(
        <Dispatch as SoftmaxCrossEntropy>::towers_softmax_cross_entropy(
            logits.into_dispatch(),
            labels.into_dispatch(),
            label_smoothing,
        ),
    )
}
