//! [`row_sums`]: the batch norm's per-channel sums, taken in short pieces.
//!
//! Why: on wgpu, Burn 0.22.1's reductions along a long dimension leave out whatever falls past
//! 65,535 workgroups, with no error (cubek-reduce spreads the rest over a second dimension that
//! does not reach the result). On lavapipe, `ones([64, 100_000]).mean_dim(1)` had 32 of its 64
//! rows wrong, and a batch norm over `[32, 64, 56, 56]` (ResNet-50's first stage at batch 32)
//! came out wrong by more than its own size, Burn's `BatchNorm` and ours alike. Rows of up to
//! 4,096 values came out right at every size tried, up to 25.7 M values in one launch
//! (bench/HISTORY.md, "Reductions that drop values on wgpu"). On CUDA, whose limit is 2^31-1
//! workgroups, the pieces cost one more small reduction per long sum.

use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, TensorMetadata};
use burn::tensor::Shape;

/// The longest row summed in one reduction.
const LONGEST_ROW: usize = 4096;

/// The longest piece a long row is cut into, a divisor of its length.
const LONGEST_PIECE: usize = 1024;

/// The sums along dimension 1 of `rows` (`[c, l]`), shape `[c, 1]`. A row longer than
/// [`LONGEST_ROW`] is cut into pieces of equal length (the longest that divides it, at most
/// [`LONGEST_PIECE`]), each summed, then the piece sums the same way. A length no piece of 2 or
/// more divides (a prime) is summed in one reduction as before.
pub(super) fn row_sums<B: Backend>(rows: FloatTensor<B>) -> FloatTensor<B> {
    let [channels, len] = rows.shape().dims();
    let piece = (2..=LONGEST_PIECE.min(len))
        .rev()
        .find(|piece| len % piece == 0);
    let piece = match piece {
        Some(piece) if len > LONGEST_ROW => piece,
        _ => return B::float_sum_dim(rows, 1),
    };
    let pieces = B::float_reshape(rows, Shape::new([channels * len / piece, piece]));
    let piece_sums = B::float_sum_dim(pieces, 1);
    row_sums::<B>(B::float_reshape(
        piece_sums,
        Shape::new([channels, len / piece]),
    ))
}
