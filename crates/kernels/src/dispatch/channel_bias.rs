//! [`add_channel_bias`]: a bias added along one dimension of a layer's output; on a device
//! whose loops stop early, its gradient summed one short dimension at a time.
//!
//! Why: Burn sums a bias's gradient over all the places it was added to in one reduction: a
//! convolution's as rows of `batch × height × width` (burn-backend 0.22.1,
//! `conv2d_bias_backward`), a broadcast operand's over every broadcast dimension at once
//! (burn-autodiff's `broadcast_shape`). On lavapipe such long reductions leave values out
//! (`short_sums.rs`): the CIFAR-10 net's first convolution at batch 128 (73,728 places per
//! channel) got a bias gradient up to 57% off, a dense layer over `[512, 600, 16]` one wholly
//! wrong. `expand`'s gradient is summed one dimension at a time (burn-autodiff's `ExpandDim`),
//! so there the bias is expanded to the output's shape and added to it, where it is added to
//! more than 32,768 places (`LONGEST_WHOLE_SUM`). Elsewhere it is Burn's broadcast add, one
//! reduction (on lavapipe, two launches fewer for each of the CIFAR-10 net's convolutions,
//! whose biases at batch 128 are added to 18,432 places each, the first after its pool).

use burn::tensor::Tensor;

use crate::short_sums::{LONGEST_WHOLE_SUM, longest_piece, loops_stop_early};

/// `y + bias`, `bias`'s values laid along `y`'s dimension `channel_dim` (Burn's broadcast
/// add). On a device whose [loops stop early](loops_stop_early), where `bias` is added to more
/// than [`LONGEST_WHOLE_SUM`] places, its gradient is summed over one dimension of at most that
/// many values at a time, where the lengths allow it (see the module's docs).
pub(crate) fn add_channel_bias<const D: usize>(
    y: Tensor<D>,
    bias: Tensor<1>,
    channel_dim: usize,
) -> Tensor<D> {
    let dims = y.dims();
    y + bias_laid_out(bias, dims, channel_dim)
}

/// `bias` as a tensor of `dims`, its values laid along dimension `channel_dim`, to be added to
/// a layer's output of that shape ([`add_channel_bias`]): a view (reshaped, and expanded where
/// loops stop early), so no kernel of its own.
pub(crate) fn bias_laid_out<const D: usize>(
    bias: Tensor<1>,
    dims: [usize; D],
    channel_dim: usize,
) -> Tensor<D> {
    let mut bias_dims = [1; D];
    bias_dims[channel_dim] = dims[channel_dim];
    let bias = bias.reshape(bias_dims);
    if !loops_stop_early(&bias.device()) {
        return bias;
    }
    let (before, after) = (&dims[..channel_dim], &dims[channel_dim + 1..]);
    let mut others = before.iter().chain(after);
    if others.clone().product::<usize>() <= LONGEST_WHOLE_SUM {
        // Short enough to sum whole: Burn's one reduction.
        return bias;
    }
    if others.all(|len| *len <= LONGEST_WHOLE_SUM) {
        return bias.expand(dims);
    }
    // A long dimension: the bias expanded over `[outer, channels, inner]` cut in two each,
    // then laid out in `dims`.
    let [outer, inner] = [before, after].map(|lens| lens.iter().product::<usize>());
    let ([outer_pieces, outer_piece], [inner_pieces, inner_piece]) = (cut(outer), cut(inner));
    let pieces = [
        outer_pieces,
        outer_piece,
        dims[channel_dim],
        inner_pieces,
        inner_piece,
    ];
    let bias = bias.reshape([1, 1, dims[channel_dim], 1, 1]).expand(pieces);
    bias.reshape(dims)
}

/// `len` as `[pieces, piece]`, `piece` its [`longest_piece`].
fn cut(len: usize) -> [usize; 2] {
    let piece = longest_piece(len);
    [len / piece, piece]
}
