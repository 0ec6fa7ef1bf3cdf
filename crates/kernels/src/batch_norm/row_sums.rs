//! [`row_sums`], [`row_means`]: the batch norm's per-channel sums and means, taken in short
//! pieces (see `short_sums.rs` for why): on lavapipe, a batch norm over `[32, 64, 56, 56]`
//! (ResNet-50's first stage at batch 32) in one reduction per channel came out wrong by more
//! than its own size, Burn's `BatchNorm` and ours alike. The pieces cost one more small
//! reduction per long sum.

use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, TensorMetadata};
use burn::tensor::Shape;

use crate::short_sums::{LONGEST_PIECE, longest_piece};

/// The most values summed in one reduction of whole rows. The fewest seen dropped were past
/// 262,128 (65,532 workgroups of 4 values); half of that leaves a margin.
const MOST_IN_ONE_PASS: usize = 1 << 17;

/// The sums along dimension 1 of `rows` (`[c, l]`), shape `[c, 1]`: in one reduction, or,
/// where [`piece_length`] cuts the rows, each piece summed, then the piece sums the same way.
pub(super) fn row_sums<B: Backend>(rows: FloatTensor<B>) -> FloatTensor<B> {
    let [channels, len] = rows.shape().dims();
    let Some(piece) = piece_length(channels, len) else {
        return B::float_sum_dim(rows, 1);
    };
    let pieces = B::float_reshape(rows, Shape::new([channels * len / piece, piece]));
    let piece_sums = B::float_sum_dim(pieces, 1);
    let piece_sums = B::float_reshape(piece_sums, Shape::new([channels, len / piece]));
    row_sums::<B>(piece_sums)
}

/// The means along dimension 1 of `rows` (`[c, l]`), shape `[c, 1]`: Burn's `mean_dim` where
/// the rows are summed in one reduction (the same rounding as Burn's batch norm), else
/// [`row_sums`] over the length.
pub(super) fn row_means<B: Backend>(rows: FloatTensor<B>) -> FloatTensor<B> {
    let [channels, len] = rows.shape().dims();
    match piece_length(channels, len) {
        Some(_) => B::float_div_scalar(row_sums::<B>(rows), (len as f32).into()),
        None => B::float_mean_dim(rows, 1),
    }
}

/// The length of the pieces `channels` rows of `len` values are summed in: past
/// [`MOST_IN_ONE_PASS`] values in all, for rows longer than [`LONGEST_PIECE`], the longest
/// length up to it that divides `len`. `None` (one reduction) for shorter rows, fewer values,
/// or a length no piece of 2 or more divides (a prime).
fn piece_length(channels: usize, len: usize) -> Option<usize> {
    if channels * len <= MOST_IN_ONE_PASS || len <= LONGEST_PIECE {
        return None;
    }
    Some(longest_piece(len)).filter(|piece| *piece > 1)
}
