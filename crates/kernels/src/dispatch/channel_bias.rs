//! [`add_channel_bias`]: a bias added along one dimension of a layer's output, its gradient
//! summed one short dimension at a time.
//!
//! Why: Burn sums a bias's gradient over all the places it was added to in one reduction: a
//! convolution's as rows of `batch × height × width` (burn-backend 0.22.1,
//! `conv2d_bias_backward`), a broadcast operand's over every broadcast dimension at once
//! (burn-autodiff's `broadcast_shape`). On wgpu, a reduction along a long dimension leaves
//! values out, with no error (see `batch_norm/row_sums.rs`): on
//! lavapipe, the CIFAR-10 net's first convolution at batch 128 (73,728 places per channel) got
//! a bias gradient up to 57% off, a dense layer over `[512, 600, 16]` one wholly wrong.
//! `expand`'s gradient is summed one dimension at a time (burn-autodiff's `ExpandDim`), and
//! reductions along dimensions of up to 4,096 values came out right at every size tried, so
//! the bias is expanded to the output's shape and added to it.

use burn::tensor::Tensor;

/// The longest dimension the expanded bias's gradient is summed along in one reduction; a
/// longer one is cut into pieces of at most this length that divide it.
const LONGEST_SUM: usize = 1024;

/// `y + bias`, `bias`'s values laid along `y`'s dimension `channel_dim` (Burn's broadcast
/// add), whose gradient for `bias` is summed over one dimension of at most [`LONGEST_SUM`]
/// values at a time where the lengths allow it (see the module's docs).
pub(crate) fn add_channel_bias<const D: usize>(
    y: Tensor<D>,
    bias: Tensor<1>,
    channel_dim: usize,
) -> Tensor<D> {
    let dims = y.dims();
    let mut bias_dims = [1; D];
    bias_dims[channel_dim] = dims[channel_dim];
    let bias = bias.reshape(bias_dims);
    let (before, after) = (&dims[..channel_dim], &dims[channel_dim + 1..]);
    if before.iter().chain(after).all(|len| *len <= LONGEST_SUM) {
        return y + bias.expand(dims);
    }
    // A long dimension: the bias expanded over `[outer, channels, inner]` cut in two each,
    // then laid out in `y`'s shape.
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
    y + bias.reshape(dims)
}

/// `len` as `[pieces, piece]`, `piece` the longest length up to [`LONGEST_SUM`] that divides
/// it (1 for a prime past it, whose sum stays one long reduction).
fn cut(len: usize) -> [usize; 2] {
    let piece = (1..=LONGEST_SUM.min(len))
        .rev()
        .find(|piece| len.is_multiple_of(*piece))
        .unwrap_or(1);
    [len / piece, piece]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lengths_are_cut_into_the_longest_pieces_that_divide_them() {
        assert_eq!(cut(307_200), [300, 1024]);
        assert_eq!(cut(100_352), [98, 1024]);
        assert_eq!(cut(1000), [1, 1000]);
        assert_eq!(cut(2 * 1031), [1031, 2]);
        assert_eq!(cut(1), [1, 1]);
    }
}
