//! What the unit tests of this crate share.

use burn::tensor::Tensor;

/// Largest absolute difference, relative to the largest magnitude of `want`.
pub(crate) fn rel_diff<const D: usize>(got: Tensor<D>, want: Tensor<D>) -> f32 {
    let scale: f32 = want.clone().abs().max().into_scalar();
    let diff: f32 = (got - want).abs().max().into_scalar();
    diff / scale
}
