//! [`row_sums`], [`row_means`]: the batch norm's per-channel sums and means, on a device whose
//! loops stop early taken in short pieces (see `short_sums.rs` for why): on lavapipe, a batch
//! norm over `[32, 64, 56, 56]` (ResNet-50's first stage at batch 32) in one reduction per
//! channel came out wrong by more than its own size, Burn's `BatchNorm` and ours alike. The
//! pieces cost one more small reduction per long sum.

use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, TensorMetadata};
use burn::tensor::Shape;

use crate::short_sums::{LONGEST_WHOLE_SUM, longest_piece};

/// The sums along dimension 1 of `rows` (`[c, l]`), shape `[c, 1]`: in one reduction, or,
/// `in_pieces` where [`piece_length`] cuts the rows, each piece summed, then the piece sums the
/// same way.
pub(super) fn row_sums<B: Backend>(rows: FloatTensor<B>, in_pieces: bool) -> FloatTensor<B> {
    let [channels, len] = rows.shape().dims();
    let Some(piece) = piece_length(len, in_pieces) else {
        return B::float_sum_dim(rows, 1);
    };
    let pieces = B::float_reshape(rows, Shape::new([channels * len / piece, piece]));
    let piece_sums = B::float_sum_dim(pieces, 1);
    let piece_sums = B::float_reshape(piece_sums, Shape::new([channels, len / piece]));
    row_sums::<B>(piece_sums, in_pieces)
}

/// The means along dimension 1 of `rows` (`[c, l]`), shape `[c, 1]`: Burn's `mean_dim` where
/// the rows are summed in one reduction (the same rounding as Burn's batch norm), else
/// [`row_sums`] over the length.
pub(super) fn row_means<B: Backend>(rows: FloatTensor<B>, in_pieces: bool) -> FloatTensor<B> {
    let [_, len] = rows.shape().dims();
    match piece_length(len, in_pieces) {
        Some(_) => B::float_div_scalar(row_sums::<B>(rows, true), (len as f32).into()),
        None => B::float_mean_dim(rows, 1),
    }
}

/// The length of the pieces rows of `len` values are summed in, `in_pieces`: for rows longer
/// than [`LONGEST_WHOLE_SUM`], the longest length up to 1,024 that divides `len`. `None` (one
/// reduction) otherwise, for shorter rows, or a length no piece of 2 or more divides (a prime).
fn piece_length(len: usize, in_pieces: bool) -> Option<usize> {
    if !in_pieces || len <= LONGEST_WHOLE_SUM {
        return None;
    }
    Some(longest_piece(len)).filter(|piece| *piece > 1)
}
