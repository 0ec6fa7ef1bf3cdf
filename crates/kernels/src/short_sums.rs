//! [`longest_piece`]: how long sums are cut into short ones, because on wgpu Burn 0.22.1's
//! reductions along a long dimension leave values out, with no error. The counts point at what
//! falls past 65,535 workgroups; the cause was not traced, and rows of 65,535 values already
//! fail. On lavapipe, `ones([64, 100_000]).mean_dim(1)` had 32 of its 64 rows wrong; sums
//! along dimensions of up to 4,096 values came out right at every size tried, up to 25.7 M
//! values in one launch (bench/HISTORY.md, "Reductions that drop values on wgpu"). Whether
//! CUDA needs the pieces was not checked. The batch norm's per-channel sums
//! (`batch_norm/row_sums.rs`) and the layers' biases (`dispatch/channel_bias.rs`) are cut so.

/// The longest piece a long sum is cut into.
pub(crate) const LONGEST_PIECE: usize = 1024;

/// The longest length up to [`LONGEST_PIECE`] that divides `len`: `len` itself when it is no
/// longer, 1 when only 1 does (a prime past it).
pub(crate) fn longest_piece(len: usize) -> usize {
    (1..=LONGEST_PIECE.min(len))
        .rev()
        .find(|piece| len.is_multiple_of(*piece))
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lengths_are_cut_into_the_longest_pieces_that_divide_them() {
        assert_eq!(longest_piece(307_200), 1024);
        assert_eq!(longest_piece(100_352), 1024);
        assert_eq!(longest_piece(1000), 1000);
        assert_eq!(longest_piece(2 * 1031), 2);
        assert_eq!(longest_piece(1031), 1);
        assert_eq!(longest_piece(1), 1);
    }
}
