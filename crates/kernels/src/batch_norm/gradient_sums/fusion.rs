//! The gradient sums on Burn's fusion backend: `cube.rs`'s kernel, deferred (`deferred.rs`).

use burn::backend::tensor::FloatTensor;
use burn_fusion::{Fusion, FusionBackend};

use super::{GradientSums, pieces_shape};
use crate::batch_norm::rectifier::Rectifier;
use crate::deferred::deferred;

impl<B: FusionBackend + GradientSums> GradientSums for Fusion<B> {
    fn towers_batch_norm_gradient_sums(
        dy: FloatTensor<Self>,
        rectified: Option<(Rectifier, FloatTensor<Self>)>,
        x: FloatTensor<Self>,
        mean: FloatTensor<Self>,
        inv_std: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        let pieces = pieces_shape(&x.shape);
        let Some((rectifier, output)) = rectified else {
            return deferred::<B, _, 4>(
                [dy, x, mean, inv_std],
                pieces,
                "towers_batch_norm_gradient_sums",
                &[],
                |[dy, x, mean, inv_std]| {
                    B::towers_batch_norm_gradient_sums(dy, None, x, mean, inv_std)
                },
            );
        };
        // The rectifier as an integer argument: a graph fusion caches and replays names the
        // operation by its id and these.
        let capped = usize::from(rectifier.capped());
        deferred::<B, _, 5>(
            [dy, output, x, mean, inv_std],
            pieces,
            "towers_batch_norm_rectified_gradient_sums",
            &[capped],
            move |[dy, output, x, mean, inv_std]| {
                let rectified = Some((rectifier, output));
                B::towers_batch_norm_gradient_sums(dy, rectified, x, mean, inv_std)
            },
        )
    }
}
