//! [`SoftmaxCrossEntropy`] under autodiff: the forward pass on the inner backend, recorded with
//! its gradient as one expression (Burn derives no backward pass for an extension).

use burn::backend::TensorMetadata;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::backend::{Autodiff, Backend};
use burn::tensor::Shape;

use super::extension::{SoftmaxCrossEntropy, forward, label_places};

impl<B: Backend, C: CheckpointStrategy> SoftmaxCrossEntropy for Autodiff<B, C> {
    fn towers_softmax_cross_entropy(
        logits: FloatTensor<Self>,
        labels: IntTensor<Self>,
        label_smoothing: f32,
    ) -> FloatTensor<Self> {
        match CrossEntropyBackward
            .prepare::<C>([logits.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let out = forward::<B>(logits.into_primitive(), labels, label_smoothing);
                let saved = Saved {
                    log_probs: out.log_probs,
                    label_column: out.label_column,
                    label_smoothing,
                };
                prep.finish(saved, out.loss)
            }
            OpsKind::UnTracked(prep) => {
                prep.finish(forward::<B>(logits.into_primitive(), labels, label_smoothing).loss)
            }
        }
    }
}

/// What the backward pass reads: the forward pass's log-probabilities and labels.
#[derive(Clone, Debug)]
struct Saved<B: Backend> {
    log_probs: FloatTensor<B>,
    label_column: IntTensor<B>,
    label_smoothing: f32,
}

#[derive(Debug)]
struct CrossEntropyBackward;

impl<B: Backend> Backward<B, 1> for CrossEntropyBackward {
    type State = Saved<B>;

    /// `(softmax(x) - target) · g / batch` as one element-wise expression (one fused kernel on
    /// a fused GPU): the softmax less the smoothing's uniform share, and at each row's label
    /// less `1 - smoothing` more, found by comparing the label with its column's index.
    fn backward(self, ops: Ops<Saved<B>, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let loss_grad = grads.consume::<B>(&ops.node);
        let Some(parent) = &ops.parents[0] else {
            return;
        };
        let Saved {
            log_probs,
            label_column,
            label_smoothing,
        } = ops.state;
        let [batch, classes] = log_probs.shape().dims();

        // Compared first, so that the comparison and the arithmetic register as one block.
        let is_label = label_places::<B>(label_column, classes);
        let mut probs = B::float_exp(log_probs);
        if label_smoothing > 0.0 {
            probs = B::float_sub_scalar(probs, (label_smoothing / classes as f32).into());
        }
        let at_label = B::float_sub_scalar(probs.clone(), (1.0 - label_smoothing).into());
        let less_target = B::float_mask_where(probs, is_label, at_label);
        // `[1, 1]` times `[batch, classes]`: broadcast by the backend, as Burn's own `mul` has it.
        let loss_grad = B::float_reshape(loss_grad, Shape::new([1, 1]));
        let grad = B::float_mul(less_target, loss_grad);
        let grad = B::float_mul_scalar(grad, (1.0 / batch as f32).into());
        grads.register::<B>(parent.id, grad);
    }
}
