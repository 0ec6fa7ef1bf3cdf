//! The windows as rows on Burn's fusion backend: `cube.rs`'s kernel, deferred
//! (`deferred.rs`).

use burn::backend::tensor::FloatTensor;
use burn_fusion::{Fusion, FusionBackend};

use super::{ConvWindows, Windows};
use crate::deferred::deferred;

impl<B: FusionBackend + ConvWindows> ConvWindows for Fusion<B> {
    fn towers_conv_windows(x: FloatTensor<Self>, windows: Windows) -> FloatTensor<Self> {
        let rows = windows.rows_shape(&x.shape);
        let [kh, kw] = windows.kernel;
        let [sh, sw] = windows.shape.stride;
        let [top, bottom, left, right] = windows.shape.flat_padding();
        let scalars = [kh, kw, sh, sw, top, bottom, left, right];
        deferred::<B, _, 1>([x], rows, "towers_conv_windows", &scalars, move |[x]| {
            B::towers_conv_windows(x, windows)
        })
    }
}
