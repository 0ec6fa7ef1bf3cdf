//! The spread on Burn's fusion backend: `cube.rs`'s kernel, deferred
//! (`deferred.rs`).

use burn::backend::tensor::FloatTensor;
use burn_fusion::{Fusion, FusionBackend};

use super::{ConvSpread, spread_shape};
use crate::deferred::deferred;

impl<B: FusionBackend + ConvSpread> ConvSpread for Fusion<B> {
    fn towers_conv_spread(grad: FloatTensor<Self>, stride: [usize; 2]) -> FloatTensor<Self> {
        let spread = spread_shape(&grad.shape, stride);
        deferred::<B, _, 1>(
            [grad],
            spread,
            "towers_conv_spread",
            &stride,
            move |[grad]| B::towers_conv_spread(grad, stride),
        )
    }
}
