//! [`Residual`]: the residual sub-layer both of Burn's transformer layers are made of, and
//! [`norms_in_order`], which of a layer's norms each sub-layer takes.

use burn::nn::Dropout;
use burn::tensor::Tensor;

use crate::dispatch::dropout;
use crate::nn::layer_norm::LayerNorm;

/// How a transformer layer wraps each of its sub-layers (attention, feed-forward network): the
/// branch's output through dropout, added to its input, with a layer norm before the branch
/// (pre-norm) or after the sum (post-norm).
pub(super) struct Residual<'a> {
    /// Dropout on the branch's output.
    pub(super) dropout: &'a Dropout,
    /// Pre-norm rather than post-norm.
    pub(super) norm_first: bool,
}

impl Residual<'_> {
    /// Pre-norm `x + dropout(branch(norm(x)))`, post-norm `norm(x + dropout(branch(x)))`.
    pub(super) fn apply(
        &self,
        x: Tensor<3>,
        norm: &LayerNorm,
        branch: impl FnOnce(Tensor<3>) -> Tensor<3>,
    ) -> Tensor<3> {
        match self.norm_first {
            true => x.clone() + dropout(self.dropout, branch(norm.forward(x))),
            false => norm.forward(x.clone() + dropout(self.dropout, branch(x))),
        }
    }
}

/// The norm of each sub-layer in order, given a layer's norms `norm_1`, `norm_2`, ...: Burn
/// numbers them by the sums they follow in post-norm, so that in pre-norm the first sub-layer
/// takes the last norm and each other one the norm before its own number.
pub(super) fn norms_in_order<const N: usize>(
    mut norms: [&LayerNorm; N],
    norm_first: bool,
) -> [&LayerNorm; N] {
    if norm_first {
        norms.rotate_right(1);
    }
    norms
}
