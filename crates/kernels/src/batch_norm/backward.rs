//! [`BatchNorm`] under autodiff: the forward pass on the inner backend, recorded with a
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

use super::extension::{BatchNorm, beside, channel_rows, forward};

/// The results, the statistics as untracked tensors.
type Results<B, C> = (
    FloatTensor<Autodiff<B, C>>,
    FloatTensor<Autodiff<B, C>>,
    FloatTensor<Autodiff<B, C>>,
);

impl<B: Backend, C: CheckpointStrategy> BatchNorm for Autodiff<B, C> {
    fn towers_batch_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
    ) -> Results<B, C> {
        let prep = ScaledBackward
            .prepare::<C>([x.node(), gamma.node(), beta.node()])
            .compute_bound()
            .stateful();
        let gamma_inner = gamma.into_primitive();
        let out = forward::<B>(
            x.primitive().clone(),
            Some(gamma_inner.clone()),
            beta.into_primitive(),
            epsilon,
        );
        let (mean, inv_std) = (out.mean.clone(), out.inv_std.clone());
        let (output, batch_mean, batch_variance) = out.results();
        let y = match prep {
            OpsKind::Tracked(mut prep) => {
                let x_state = prep.checkpoint(&x);
                prep.finish((x_state, gamma_inner, mean, inv_std), output)
            }
            OpsKind::UnTracked(prep) => prep.finish(output),
        };
        untracked_statistics::<B, C>(y, batch_mean, batch_variance)
    }

    fn towers_offset_batch_norm(
        x: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
    ) -> Results<B, C> {
        let prep = OffsetBackward
            .prepare::<C>([x.node(), beta.node()])
            .compute_bound()
            .stateful();
        let out = forward::<B>(x.primitive().clone(), None, beta.into_primitive(), epsilon);
        let (mean, inv_std) = (out.mean.clone(), out.inv_std.clone());
        let (output, batch_mean, batch_variance) = out.results();
        let y = match prep {
            OpsKind::Tracked(mut prep) => {
                let x_state = prep.checkpoint(&x);
                prep.finish((x_state, mean, inv_std), output)
            }
            OpsKind::UnTracked(prep) => prep.finish(output),
        };
        untracked_statistics::<B, C>(y, batch_mean, batch_variance)
    }
}

fn untracked_statistics<B: Backend, C: CheckpointStrategy>(
    y: FloatTensor<Autodiff<B, C>>,
    mean: FloatTensor<B>,
    variance: FloatTensor<B>,
) -> Results<B, C> {
    let untracked = FloatTensor::<Autodiff<B, C>>::new;
    (y, untracked(mean), untracked(variance))
}

/// The backward pass with a scale. State: the input, `γ`, and per channel (`[c, 1]`) the mean
/// and `1/√(var + ε)` the forward pass normalized with.
#[derive(Debug)]
struct ScaledBackward;

impl<B: Backend> Backward<B, 3> for ScaledBackward {
    type State = (NodeId, FloatTensor<B>, FloatTensor<B>, FloatTensor<B>);

    fn backward(
        self,
        ops: Ops<Self::State, 3>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let [x_node, gamma_node, beta_node] = ops.parents;
        let dy = grads.consume::<B>(&ops.node);
        let (x_state, gamma, mean, inv_std) = ops.state;
        let x = checkpointer.retrieve_node_output(x_state);
        let wanted = [x_node.is_some(), gamma_node.is_some()];
        let found = gradients::<B>(x, Some(gamma), mean, inv_std, dy, wanted);
        for (node, gradient) in [x_node, gamma_node, beta_node].into_iter().zip(found) {
            if let (Some(node), Some(gradient)) = (node, gradient) {
                grads.register::<B>(node.id, gradient);
            }
        }
    }
}

/// The backward pass without a scale. State: the input, and per channel (`[c, 1]`) the mean
/// and `1/√(var + ε)` the forward pass normalized with.
#[derive(Debug)]
struct OffsetBackward;

impl<B: Backend> Backward<B, 2> for OffsetBackward {
    type State = (NodeId, FloatTensor<B>, FloatTensor<B>);

    fn backward(
        self,
        ops: Ops<Self::State, 2>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let [x_node, beta_node] = ops.parents;
        let dy = grads.consume::<B>(&ops.node);
        let (x_state, mean, inv_std) = ops.state;
        let x = checkpointer.retrieve_node_output(x_state);
        let wanted = [x_node.is_some(), false];
        let [dx, _, dbeta] = gradients::<B>(x, None, mean, inv_std, dy, wanted);
        for (node, gradient) in [(x_node, dx), (beta_node, dbeta)] {
            if let (Some(node), Some(gradient)) = (node, gradient) {
                grads.register::<B>(node.id, gradient);
            }
        }
    }
}

/// `[dx, dγ, dβ]` (`dx` and `dγ` where `wanted`), with `x̂ = (x - mean) · inv_std` and `m`
/// values per channel:
///
/// ```text
/// dβ = Σ dy        dγ = Σ dy · x̂        dx = γ · inv_std · (dy - (dβ + x̂ · dγ) / m)
/// ```
///
/// (`γ` = 1 without a scale; the mean's and the variance's dependence on `x` included): the two
/// sums are the pass's two reductions, `dx` one element-wise expression.
fn gradients<B: Backend>(
    x: FloatTensor<B>,
    gamma: Option<FloatTensor<B>>,
    mean: FloatTensor<B>,
    inv_std: FloatTensor<B>,
    dy: FloatTensor<B>,
    [want_dx, want_dgamma]: [bool; 2],
) -> [Option<FloatTensor<B>>; 3] {
    let rank = x.shape().num_dims();
    let channels = Shape::new([mean.shape().num_elements()]);
    let per_channel = (x.shape().num_elements() / mean.shape().num_elements()) as f32;
    // On a fused GPU every reshape ends a run of fused ops: the rows and the per-channel
    // values beside `x` are laid out before each element-wise expression starts.
    let [x_rows, dy_rows] = [&x, &dy].map(|t| channel_rows::<B>(t.clone()));
    let dy_sum = B::float_sum_dim(dy_rows.clone(), 1);
    let normalized_rows = B::float_mul(B::float_sub(x_rows, mean.clone()), inv_std.clone());
    let dy_normalized_sum = B::float_sum_dim(B::float_mul(dy_rows, normalized_rows), 1);
    let dx = want_dx.then(|| {
        let [mean, inv_std, dy_sum, dy_normalized_sum] =
            [mean, inv_std, dy_sum.clone(), dy_normalized_sum.clone()]
                .map(|t| beside::<B>(t, rank));
        let gamma = gamma.map(|gamma| beside::<B>(gamma, rank));
        let normalized = B::float_mul(B::float_sub(x, mean), inv_std.clone());
        // `(dβ + x̂ · dγ) / m`, scaled in the expression rather than per channel first: an op
        // on `[c, 1]` alone would be a kernel of its own.
        let share = B::float_add(dy_sum, B::float_mul(normalized, dy_normalized_sum));
        let share = B::float_mul_scalar(share, (1.0 / per_channel).into());
        let dx = B::float_mul(B::float_sub(dy, share), inv_std);
        match gamma {
            Some(gamma) => B::float_mul(dx, gamma),
            None => dx,
        }
    });
    let dgamma = want_dgamma.then(|| B::float_reshape(dy_normalized_sum, channels.clone()));
    [dx, dgamma, Some(B::float_reshape(dy_sum, channels))]
}
