//! The gradient sums on Burn's fusion backend: `cube.rs`'s kernel, deferred (`deferred.rs`).

use burn::backend::tensor::FloatTensor;
use burn_fusion::{Fusion, FusionBackend};

use super::{GradientSums, pieces_shape};
use crate::deferred::deferred;

impl<B: FusionBackend + GradientSums> GradientSums for Fusion<B> {
    fn towers_batch_norm_gradient_sums(
        dy: FloatTensor<Self>,
        relu_output: Option<FloatTensor<Self>>,
        x: FloatTensor<Self>,
        mean: FloatTensor<Self>,
        inv_std: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        let pieces = pieces_shape(&x.shape);
        match relu_output {
            None => deferred::<B, _, 4>(
                [dy, x, mean, inv_std],
                pieces,
                "towers_batch_norm_gradient_sums",
                &[],
                |[dy, x, mean, inv_std]| {
                    B::towers_batch_norm_gradient_sums(dy, None, x, mean, inv_std)
                },
            ),
            Some(output) => deferred::<B, _, 5>(
                [dy, output, x, mean, inv_std],
                pieces,
                "towers_batch_norm_relu_gradient_sums",
                &[],
                |[dy, output, x, mean, inv_std]| {
                    B::towers_batch_norm_gradient_sums(dy, Some(output), x, mean, inv_std)
                },
            ),
        }
    }
}
