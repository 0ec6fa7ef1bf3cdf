//! [`BatchNorm`] under autodiff: the forward pass on the inner backend, recorded with a
//! backward pass of its own, its two sums in one pass (Burn derives no backward pass for an
//! extension).

use burn::backend::TensorMetadata;
use burn::backend::autodiff::NodeId;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend};
use burn::tensor::Shape;

use super::extension::{BatchNorm, Options, beside, forward};
use super::gradient_sums::{GradientSums, gradient_sums};
use super::rectifier::Rectifier;

/// The results, the moved averages as untracked tensors.
type Results<B, C> = (
    FloatTensor<Autodiff<B, C>>,
    FloatTensor<Autodiff<B, C>>,
    FloatTensor<Autodiff<B, C>>,
);

impl<B: GradientSums, C: CheckpointStrategy> BatchNorm for Autodiff<B, C> {
    fn towers_batch_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        average_mean: FloatTensor<Self>,
        average_variance: FloatTensor<Self>,
        momentum: f64,
        options: Options,
    ) -> Results<B, C> {
        let prep = ScaledBackward
            .prepare::<C>([x.node(), gamma.node(), beta.node()])
            .compute_bound()
            .stateful();
        let averages = [average_mean, average_variance].map(|a| a.into_primitive());
        let gamma = Some(gamma.into_primitive());
        record(prep, x, gamma, beta, (averages, momentum), options)
    }

    fn towers_offset_batch_norm(
        x: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        average_mean: FloatTensor<Self>,
        average_variance: FloatTensor<Self>,
        momentum: f64,
        options: Options,
    ) -> Results<B, C> {
        let prep = OffsetBackward
            .prepare::<C>([x.node(), beta.node()])
            .compute_bound()
            .stateful();
        let averages = [average_mean, average_variance].map(|a| a.into_primitive());
        record(prep, x, None, beta, (averages, momentum), options)
    }
}

/// What the backward pass reads: the input (checkpointed), `γ` where there is one, the
/// rectifier with its output where there is one (whose backward pass masks the output's
/// gradient by it, as Burn's ReLU keeps its output for), per channel (`[1, c]`) the mean and
/// `1/√(var + ε)` the forward pass normalized with, and whether its sums are taken in pieces
/// (`column_sums.rs`).
#[derive(Clone, Debug)]
struct Saved<B: Backend> {
    x: NodeId,
    gamma: Option<FloatTensor<B>>,
    rectified: Option<(Rectifier, FloatTensor<B>)>,
    mean: FloatTensor<B>,
    inv_std: FloatTensor<B>,
    in_pieces: bool,
}

/// The forward pass on the inner backend, recorded for `prep`'s backward pass where a parent
/// is tracked; the moved averages come back untracked.
fn record<B, C, BO, const N: usize>(
    prep: OpsKind<BO, B, Saved<B>, C, N>,
    x: FloatTensor<Autodiff<B, C>>,
    gamma: Option<FloatTensor<B>>,
    beta: FloatTensor<Autodiff<B, C>>,
    averages: ([FloatTensor<B>; 2], f64),
    options: Options,
) -> Results<B, C>
where
    B: Backend,
    C: CheckpointStrategy,
    BO: Backward<B, N, State = Saved<B>>,
{
    let out = forward::<B>(
        x.primitive().clone(),
        gamma.clone(),
        beta.into_primitive(),
        averages,
        options,
    );
    let (mean, inv_std) = (out.mean.clone(), out.inv_std.clone());
    let (output, moved_mean, moved_variance) = out.results();
    let y = match prep {
        OpsKind::Tracked(mut prep) => {
            let x = prep.checkpoint(&x);
            let saved = Saved {
                x,
                gamma,
                rectified: options.rectifier.map(|r| (r, output.clone())),
                mean,
                inv_std,
                in_pieces: options.in_pieces,
            };
            prep.finish(saved, output)
        }
        OpsKind::UnTracked(prep) => prep.finish(output),
    };
    let untracked = FloatTensor::<Autodiff<B, C>>::new;
    (y, untracked(moved_mean), untracked(moved_variance))
}

/// The backward pass with a scale: the gradients of the input, `γ` and `β`.
#[derive(Debug)]
struct ScaledBackward;

impl<B: GradientSums> Backward<B, 3> for ScaledBackward {
    type State = Saved<B>;

    fn backward(
        self,
        ops: Ops<Saved<B>, 3>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let [x_node, gamma_node, beta_node] = ops.parents.map(|node| node.map(|node| node.id));
        let wanted = [x_node.is_some(), gamma_node.is_some()];
        let found = gradients::<B>(
            ops.state,
            grads.consume::<B>(&ops.node),
            checkpointer,
            wanted,
        );
        register::<B>(
            grads,
            [x_node, gamma_node, beta_node].into_iter().zip(found),
        );
    }
}

/// The backward pass without a scale: the gradients of the input and `β`.
#[derive(Debug)]
struct OffsetBackward;

impl<B: GradientSums> Backward<B, 2> for OffsetBackward {
    type State = Saved<B>;

    fn backward(
        self,
        ops: Ops<Saved<B>, 2>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let [x_node, beta_node] = ops.parents.map(|node| node.map(|node| node.id));
        let wanted = [x_node.is_some(), false];
        let [dx, _, dbeta] = gradients::<B>(
            ops.state,
            grads.consume::<B>(&ops.node),
            checkpointer,
            wanted,
        );
        register::<B>(grads, [(x_node, dx), (beta_node, dbeta)]);
    }
}

/// Registers each gradient found for a tracked parent (by its node's id).
fn register<B: Backend>(
    grads: &mut Gradients,
    found: impl IntoIterator<Item = (Option<NodeId>, Option<FloatTensor<B>>)>,
) {
    for (node, gradient) in found {
        if let (Some(node), Some(gradient)) = (node, gradient) {
            grads.register::<B>(node, gradient);
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
/// (`γ` = 1 without a scale; the mean's and the variance's dependence on `x` included; after a
/// rectifier, `dy` is its output's gradient masked as [`Rectifier::backward`] masks it): the
/// two sums from one pass over `dy` and `x` (`gradient_sums/`, which masks `dy` as it reads),
/// `dx` one element-wise expression (the mask its first ops). On a fused GPU the rectifier's
/// backward pass was a kernel of its own, writing the masked gradient out whole for both to
/// read back.
fn gradients<B: GradientSums>(
    saved: Saved<B>,
    dy: FloatTensor<B>,
    checkpointer: &mut Checkpointer,
    [want_dx, want_dgamma]: [bool; 2],
) -> [Option<FloatTensor<B>>; 3] {
    let Saved {
        x,
        gamma,
        rectified,
        mean,
        inv_std,
        in_pieces,
    } = saved;
    let x: FloatTensor<B> = checkpointer.retrieve_node_output(x);
    let rank = x.shape().num_dims();
    let channels = Shape::new([mean.shape().num_elements()]);
    let per_channel = (x.shape().num_elements() / mean.shape().num_elements()) as f32;
    let [dy_sum, dy_normalized_sum] = gradient_sums::<B>(
        dy.clone(),
        rectified.clone(),
        x.clone(),
        [mean.clone(), inv_std.clone()],
        in_pieces,
    );
    // On a fused GPU every reshape ends a run of fused ops: the per-channel values beside `x`
    // are laid out before the element-wise expression starts.
    let [mean, inv_std] = [mean, inv_std].map(|t| beside::<B>(t, rank));
    let dx = want_dx.then(|| {
        let [dy_sum, dy_normalized_sum] =
            [dy_sum.clone(), dy_normalized_sum.clone()].map(|t| beside::<B>(t, rank));
        let gamma = gamma.map(|gamma| beside::<B>(gamma, rank));
        let dy = match rectified {
            Some((rectifier, output)) => rectifier.backward::<B>(output, dy),
            None => dy,
        };
        let normalized = B::float_mul(B::float_sub(x, mean), inv_std.clone());
        // `(dβ + x̂ · dγ) / m`, scaled in the expression rather than per channel first: an op
        // on `[1, c]` alone would be a kernel of its own.
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
