//! The output gradient spread out by a convolution's stride, the operand of the input
//! gradient's convolution (`backward.rs`): `grad` `[n, c, oh, ow]` with `s - 1` zeros after
//! each value along each spatial dimension, the last value's trailing zeros left off: `[n, c,
//! sh·(oh - 1) + 1, sw·(ow - 1) + 1]`.
//!
//! As a backend extension, so that Burn's CubeCL devices spread it in one kernel of ours
//! (`cube.rs`, deferred under fusion by `fusion.rs`) that writes it channels last in memory,
//! where Burn's convolution reads it: Burn's ops take a fill, an assignment and a slice (they
//! still spread a quantized gradient: [`spread_by_padding`]).
//!
//! - `cube.rs`: the kernel, on `CubeBackend`.
//! - `fusion.rs`: the kernel deferred on Burn's fusion backend.

mod cube;
mod fusion;

use burn::backend::Backend;
use burn::backend::TensorMetadata;
use burn::backend::tensor::FloatTensor;
use burn::tensor::Shape;
use burn::tensor::ops::PadMode;

/// The spread's shape for a gradient of shape `[n, c, oh, ow]` at `stride`.
fn spread_shape(grad: &Shape, [sh, sw]: [usize; 2]) -> Shape {
    let [n, c, oh, ow] = grad.dims();
    Shape::new([n, c, sh * (oh - 1) + 1, sw * (ow - 1) + 1])
}

/// `grad` spread out by `stride` (see the module docs); a stride of 1 is not asked for.
pub(crate) trait ConvSpread: Backend {
    fn towers_conv_spread(grad: FloatTensor<Self>, stride: [usize; 2]) -> FloatTensor<Self>;
}

/// The spread by Burn's ops: each value padded with zeros after it in a `[n, c, oh, 1, ow, 1]`
/// view, merged back, the last trailing zeros sliced off.
pub(crate) fn spread_by_padding<B: Backend>(
    grad: FloatTensor<B>,
    [sh, sw]: [usize; 2],
) -> FloatTensor<B> {
    let [n, c, oh, ow] = grad.shape().dims();
    let grad = B::float_reshape(grad, Shape::new([n, c, oh, 1, ow, 1]));
    let zeros_after = [(0, 0), (0, 0), (0, 0), (0, sh - 1), (0, 0), (0, sw - 1)];
    let spread = B::float_pad(grad, &zeros_after, PadMode::Constant(0.0));
    let spread = B::float_reshape(spread, Shape::new([n, c, oh * sh, ow * sw]));
    let kept = [sh * (oh - 1) + 1, sw * (ow - 1) + 1];
    B::float_slice(
        spread,
        &[
            (0..n).into(),
            (0..c).into(),
            (0..kept[0]).into(),
            (0..kept[1]).into(),
        ],
    )
}
