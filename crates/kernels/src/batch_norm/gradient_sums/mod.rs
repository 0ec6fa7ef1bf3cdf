//! [`gradient_sums`]: the batch norm backward pass's two sums per channel, `Σ dy` and
//! `Σ dy · x̂`, from one pass over `dy` and `x` (and, after a rectifier, its output, which masks
//! `dy` as the kernel reads it).
//!
//! As a backend extension, so that Burn's CubeCL devices take both sums in one kernel of ours
//! (`cube.rs`, deferred under fusion by `fusion.rs`): by Burn's ops, `dy · x̂` was written out
//! whole (fusion joins the product to the element-wise ops before it, not to the sum after)
//! and read back by a reduction of its own, `dy` read by another: three passes over a tensor of
//! the input's size more than the sums need (cuDNN's batch norm also takes both in one pass).
//!
//! The kernel sums a piece of [`ROWS_PER_PIECE`] values of a channel per invocation (enough
//! invocations for a GPU over few channels, and a loop far below the 65,535 iterations
//! lavapipe's loops stop at), compensated (Kahan's summation); the pieces' sums are then summed
//! by Burn's reduction (`column_sums.rs`), none where one piece holds every value.
//!
//! - `cube.rs`: the kernel, on `CubeBackend`.
//! - `fusion.rs`: the kernel deferred on Burn's fusion backend.

mod cube;
mod fusion;

use burn::backend::Backend;
use burn::backend::TensorMetadata;
use burn::backend::tensor::FloatTensor;
use burn::tensor::Shape;

use super::column_sums::column_sums;
use super::rectifier::Rectifier;

/// The values of a channel each invocation sums.
const ROWS_PER_PIECE: usize = 256;

/// Per piece of [`ROWS_PER_PIECE`] rows (an image's place each, `n·h·w` in all) and per
/// channel of `dy` and `x` `[n, c, h, w]`, `Σ dy` and `Σ dy · (x - mean) · inv_std` (`mean`,
/// `inv_std` `[1, c]`): `[pieces, 2c]` ([`pieces_shape`]), the first sums in columns `0..c`,
/// the second in `c..2c`. With a rectifier's output (of `x`'s shape), `dy` is the gradient of
/// that output, and each value of it counts as 0 where the rectifier's backward pass cuts it
/// (`Rectifier`).
pub(crate) trait GradientSums: Backend {
    fn towers_batch_norm_gradient_sums(
        dy: FloatTensor<Self>,
        rectified: Option<(Rectifier, FloatTensor<Self>)>,
        x: FloatTensor<Self>,
        mean: FloatTensor<Self>,
        inv_std: FloatTensor<Self>,
    ) -> FloatTensor<Self>;
}

/// `[Σ dy, Σ dy · x̂]` per channel of `x` `[n, c, ...]` (each `[1, c]`), `x̂ = (x - mean) ·
/// inv_std` (`mean`, `inv_std` `[1, c]`), `dy` masked by a following rectifier's output where
/// there is one (as [`GradientSums`]), the pieces' sums in pieces themselves where `in_pieces`
/// (`column_sums.rs`).
pub(super) fn gradient_sums<B: GradientSums>(
    dy: FloatTensor<B>,
    rectified: Option<(Rectifier, FloatTensor<B>)>,
    x: FloatTensor<B>,
    [mean, inv_std]: [FloatTensor<B>; 2],
    in_pieces: bool,
) -> [FloatTensor<B>; 2] {
    let c = x.shape()[1];
    let [dy, x] = [dy, x].map(as_images::<B>);
    let rectified = rectified.map(|(rectifier, output)| (rectifier, as_images::<B>(output)));
    let pieces = B::towers_batch_norm_gradient_sums(dy, rectified, x, mean, inv_std);
    summed::<B>(pieces, c, in_pieces)
}

/// The pieces' sums `[pieces, 2c]` summed (unless there is one piece), as two tensors `[1, c]`.
fn summed<B: Backend>(pieces: FloatTensor<B>, c: usize, in_pieces: bool) -> [FloatTensor<B>; 2] {
    let sums = match pieces.shape()[0] {
        1 => pieces,
        _ => column_sums::<B>(pieces, in_pieces),
    };
    [0..c, c..2 * c].map(|columns| B::float_slice(sums.clone(), &[(0..1).into(), columns.into()]))
}

/// `[pieces, 2c]` for an input `[n, c, h, w]`.
fn pieces_shape(input: &Shape) -> Shape {
    let [n, c, h, w] = input.dims();
    Shape::new([(n * h * w).div_ceil(ROWS_PER_PIECE), 2 * c])
}

/// `x` `[n, c, ...]` as the kernels read it, `[n, c, h, w]`: the dimensions after the channels
/// as one (and a last of 1) where there are not two.
fn as_images<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    let shape = x.shape();
    if shape.num_dims() == 4 {
        return x;
    }
    let [n, c] = [shape[0], shape[1]];
    let places = shape.num_elements() / (n * c).max(1);
    B::float_reshape(x, Shape::new([n, c, places, 1]))
}
