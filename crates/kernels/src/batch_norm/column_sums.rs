//! [`column_sums`], [`column_means`]: the batch norm's per-channel sums and means over the
//! values laid out as columns `[l, c]` (see `cubecl_device.rs`, `channel_columns`), on a device
//! whose loops stop early taken in short pieces (see `short_sums.rs` for why): on lavapipe, a
//! batch norm over `[32, 64, 56, 56]` (ResNet-50's first stage at batch 32) in one reduction
//! per channel came out wrong by more than its own size, Burn's `BatchNorm` and ours alike. The
//! pieces cost one more small reduction per long sum.

use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, TensorMetadata};
use burn::tensor::Shape;

use crate::short_sums::{LONGEST_WHOLE_SUM, longest_piece};

/// The sums along dimension 0 of `columns` (`[l, c]`), shape `[1, c]`: in one reduction, or,
/// `in_pieces` where [`piece_length`] cuts the columns, each piece summed, then the piece sums
/// the same way.
pub(super) fn column_sums<B: Backend>(columns: FloatTensor<B>, in_pieces: bool) -> FloatTensor<B> {
    let [len, channels] = columns.shape().dims();
    let Some(piece) = piece_length(len, in_pieces) else {
        return B::float_sum_dim(columns, 0);
    };
    let pieces = B::float_reshape(columns, Shape::new([len / piece, piece, channels]));
    let piece_sums = B::float_sum_dim(pieces, 1);
    let piece_sums = B::float_reshape(piece_sums, Shape::new([len / piece, channels]));
    column_sums::<B>(piece_sums, in_pieces)
}

/// The means along dimension 0 of `columns` (`[l, c]`), shape `[1, c]`: Burn's `mean_dim`
/// where the columns are summed in one reduction, else [`column_sums`] over the length.
pub(super) fn column_means<B: Backend>(columns: FloatTensor<B>, in_pieces: bool) -> FloatTensor<B> {
    let [len, _] = columns.shape().dims();
    match piece_length(len, in_pieces) {
        Some(_) => B::float_div_scalar(column_sums::<B>(columns, true), (len as f32).into()),
        None => B::float_mean_dim(columns, 0),
    }
}

/// The length of the pieces columns of `len` values are summed in, `in_pieces`: for columns
/// longer than [`LONGEST_WHOLE_SUM`], the longest length up to 1,024 that divides `len`. `None`
/// (one reduction) otherwise, for shorter columns, or a length no piece of 2 or more divides (a
/// prime).
fn piece_length(len: usize, in_pieces: bool) -> Option<usize> {
    if !in_pieces || len <= LONGEST_WHOLE_SUM {
        return None;
    }
    Some(longest_piece(len)).filter(|piece| *piece > 1)
}
