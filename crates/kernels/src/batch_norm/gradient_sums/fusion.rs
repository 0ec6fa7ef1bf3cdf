//! The gradient sums on Burn's fusion backend: `cube.rs`'s kernel, deferred (`deferred.rs`).

use burn::backend::tensor::FloatTensor;
use burn_fusion::{Fusion, FusionBackend};

use super::{GradientSums, pieces_shape};
use crate::deferred::deferred;

impl<B: FusionBackend + GradientSums> GradientSums for Fusion<B> {
    fn towers_batch_norm_gradient_sums(
        dy: FloatTensor<Self>,
        x: FloatTensor<Self>,
        mean: FloatTensor<Self>,
        inv_std: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        let pieces = pieces_shape(&x.shape);
        let inputs = [dy, x, mean, inv_std];
        let id = "towers_batch_norm_gradient_sums";
        deferred::<B, _, 4>(inputs, pieces, id, &[], |[dy, x, mean, inv_std]| {
            B::towers_batch_norm_gradient_sums(dy, x, mean, inv_std)
        })
    }
}
