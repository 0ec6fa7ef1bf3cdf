//! [`SoftmaxCrossEntropy`] under autodiff: the forward pass on the inner backend, recorded with
//! its gradient as one expression (Burn derives no backward pass for an extension).

use burn::backend::TensorMetadata;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::backend::{Autodiff, Backend};
use burn::tensor::{IndexingUpdateOp, Shape};

use super::extension::{SoftmaxCrossEntropy, forward};

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

    /// `(softmax(x) - target) · g / batch`: the softmax less the smoothing's uniform share,
    /// times `g / batch`, in one element-wise pass (one fused kernel on a fused GPU), then the
    /// label's share, `-(1 - smoothing) · g / batch`, added at each row's label by one scatter.
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
        let per_row = 1.0 / batch as f32;
        let loss_grad = B::float_reshape(loss_grad, Shape::new([1, 1]));

        let mut probs = B::float_exp(log_probs);
        if label_smoothing > 0.0 {
            probs = B::float_sub_scalar(probs, (label_smoothing / classes as f32).into());
        }
        // `[1, 1]` times `[batch, classes]`: broadcast by the backend, as Burn's own `mul` has
        // it (the probe counted the pass as one fused kernel, the `[batch, 1]` share as another).
        let grad = B::float_mul(probs, loss_grad.clone());
        let grad = B::float_mul_scalar(grad, per_row.into());

        let at_label = B::float_expand(loss_grad, Shape::new([batch, 1]));
        let at_label = B::float_mul_scalar(at_label, (-(1.0 - label_smoothing) * per_row).into());
        let grad = B::float_scatter(1, grad, label_column, at_label, IndexingUpdateOp::Add);
        grads.register::<B>(parent.id, grad);
    }
}
