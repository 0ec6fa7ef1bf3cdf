//! [`OffsetBatchNorm`] under autodiff: the forward pass on the inner backend, recorded with a
//! backward pass of two reductions (Burn derives no backward pass for an extension).

use burn::backend::TensorMetadata;
use burn::backend::autodiff::NodeId;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend};
use burn::tensor::Shape;

use super::extension::{OffsetBatchNorm, beside, channel_rows, forward};

impl<B: Backend, C: CheckpointStrategy> OffsetBatchNorm for Autodiff<B, C> {
    fn towers_offset_batch_norm(
        x: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        let prep = OffsetBatchNormBackward
            .prepare::<C>([x.node(), beta.node()])
            .compute_bound()
            .stateful();
        let out = forward::<B>(x.primitive().clone(), beta.into_primitive(), epsilon);
        let channels = Shape::new([out.mean.shape().num_elements()]);
        let [mean, variance] =
            [out.mean.clone(), out.variance].map(|s| B::float_reshape(s, channels.clone()));
        let y = match prep {
            OpsKind::Tracked(mut prep) => {
                let x_state = prep.checkpoint(&x);
                prep.finish((x_state, out.mean, out.inv_std), out.output)
            }
            OpsKind::UnTracked(prep) => prep.finish(out.output),
        };
        (
            y,
            FloatTensor::<Self>::new(mean),
            FloatTensor::<Self>::new(variance),
        )
    }
}

/// The backward pass. State: the input, and per channel (`[c, 1]`) the mean and `1/√(var + ε)`
/// the forward pass normalized with.
#[derive(Debug)]
struct OffsetBatchNormBackward;

impl<B: Backend> Backward<B, 2> for OffsetBatchNormBackward {
    type State = (NodeId, FloatTensor<B>, FloatTensor<B>);

    /// With `x̂ = (x - mean) · inv_std` and `m` values per channel:
    ///
    /// ```text
    /// dβ = Σ dy                      dx = inv_std · (dy - dβ / m - x̂ · Σ(dy · x̂) / m)
    /// ```
    ///
    /// (the mean's and the variance's dependence on `x` included): the two sums are the
    /// pass's two reductions, the rest one element-wise expression.
    fn backward(
        self,
        ops: Ops<Self::State, 2>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let [x_node, beta_node] = ops.parents;
        let dy = grads.consume::<B>(&ops.node);
        let (x_state, mean, inv_std) = ops.state;
        let x: FloatTensor<B> = checkpointer.retrieve_node_output(x_state);
        let rank = x.shape().num_dims();
        let per_channel = (x.shape().num_elements() / mean.shape().num_elements()) as f32;
        // On a fused GPU every reshape ends a run of fused ops: the rows and the per-channel
        // values beside `x` are laid out before each element-wise expression starts.
        let [x_rows, dy_rows] = [&x, &dy].map(|t| channel_rows::<B>(t.clone()));
        let dy_sum = B::float_sum_dim(dy_rows.clone(), 1);
        let normalized_rows = B::float_mul(B::float_sub(x_rows, mean.clone()), inv_std.clone());
        let dy_normalized_sum = B::float_sum_dim(B::float_mul(dy_rows, normalized_rows), 1);
        let dx = x_node.is_some().then(|| {
            let [mean, inv_std, dy_sum, dy_normalized_sum] =
                [mean, inv_std, dy_sum.clone(), dy_normalized_sum].map(|t| beside::<B>(t, rank));
            let normalized = B::float_mul(B::float_sub(x, mean), inv_std.clone());
            // `(dβ + x̂ · Σ(dy · x̂)) / m`, scaled in the expression rather than per channel
            // first: an op on `[c, 1]` alone would be a kernel of its own.
            let share = B::float_add(dy_sum, B::float_mul(normalized, dy_normalized_sum));
            let share = B::float_mul_scalar(share, (1.0 / per_channel).into());
            B::float_mul(B::float_sub(dy, share), inv_std)
        });
        if let Some(node) = beta_node {
            let channels = Shape::new([dy_sum.shape().num_elements()]);
            grads.register::<B>(node.id, B::float_reshape(dy_sum, channels));
        }
        if let (Some(node), Some(dx)) = (x_node, dx) {
            grads.register::<B>(node.id, dx);
        }
    }
}
