//! [`loops_stop_early`], [`long_sum`] and [`longest_piece`]: which devices end a kernel's loops
//! early, and how long sums are cut into short ones there.
//!
//! Mesa's llvmpipe, the software driver behind lavapipe (the Vulkan device CI runs wgpu on),
//! ends a shader's loops after 65,535 iterations in all, with no error (gallivm's
//! `LP_MAX_TGSI_LOOP_ITERATIONS`, "maximum iterations before loop termination, shared between
//! every loop in a shader"). A reduction that gives one invocation a whole row to sum (CubeCL's
//! `unit` routine, the only one lavapipe's tuning can pick: it has no subgroups for the others)
//! then leaves out all but the first ~65,532 vectors of it. Measured on lavapipe, 2026-11-30: one
//! row of 65,533 values summed the same first ~65,532 as one of 65,537, and one of 262,136
//! values (vectors of 4) the same ~262,128 as one of 600,000; the cube routine, which splits a
//! row between 256 invocations, summed every row right (bench/HISTORY.md, "The long reductions
//! explained"). GPUs have no such limit, so only those devices get the cut sums: the batch
//! norm's per-channel sums (`batch_norm/column_sums.rs`), the layers' biases
//! (`dispatch/channel_bias.rs`), and through [`long_sum`] towers-models' L2 penalty value and
//! towers-multigpu's loss-scaling overflow check.

use std::sync::Mutex;

use burn::tensor::{Device, Tensor};

/// The longest sum taken whole on a device whose loops stop early: each invocation of a
/// reduction loops at most once per value even unvectorized, half the limit.
pub(crate) const LONGEST_WHOLE_SUM: usize = 1 << 15;

/// The longest piece a long sum is cut into.
const LONGEST_PIECE: usize = 1024;

/// Whether `device` ends a kernel's loops after 65,535 iterations (Mesa's llvmpipe, also as
/// lavapipe; see the module docs), so that sums along long dimensions must be cut into short
/// ones there. False for every other device, and for a remote one (which does not say what it
/// runs on). Asked once per device: the first call opens it.
pub fn loops_stop_early(device: &Device) -> bool {
    static KNOWN: Mutex<Vec<(Device, bool)>> = Mutex::new(Vec::new());
    let mut known = KNOWN
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((_, stops)) = known.iter().find(|(d, _)| d == device) {
        return *stops;
    }
    let stops = runs_on_llvmpipe(device);
    known.push((device.clone(), stops));
    stops
}

/// Whether `device` names itself as llvmpipe (`llvmpipe (LLVM 17.0.6, 256 bits)`).
#[cfg(feature = "gpu")]
fn runs_on_llvmpipe(device: &Device) -> bool {
    device
        .identity()
        .is_some_and(|identity| identity.name.starts_with("llvmpipe"))
}

/// Without a GPU backend no device runs shaders.
#[cfg(not(feature = "gpu"))]
fn runs_on_llvmpipe(_device: &Device) -> bool {
    false
}

/// The sum of every value of `x`, shape `[1]`, right on every device: where loops stop early
/// ([`loops_stop_early`]) and `x` is longer than 32,768 values (`LONGEST_WHOLE_SUM`), as rows
/// of at most 1,024 values (`LONGEST_PIECE`; a sum over two dimensions, which Burn takes one
/// at a time or with a sum per workgroup, both short); elsewhere as one sum.
pub fn long_sum(x: Tensor<1>) -> Tensor<1> {
    match loops_stop_early(&x.device()) {
        true => sum_in_rows(x),
        false => x.sum(),
    }
}

/// [`long_sum`]'s cut, on any device: rows of the longest piece that divides the length, or
/// of [`LONGEST_PIECE`] values and the rest; rows too many to sum whole are summed the same way.
fn sum_in_rows(x: Tensor<1>) -> Tensor<1> {
    let [len] = x.dims();
    if len <= LONGEST_WHOLE_SUM {
        return x.sum();
    }
    let piece = longest_piece(len);
    if piece > 1 && len / piece <= LONGEST_WHOLE_SUM {
        return x.reshape([len / piece, piece]).sum();
    }
    let rows = len / LONGEST_PIECE;
    let whole = x.clone().narrow(0, 0, rows * LONGEST_PIECE);
    let row_sums = whole.reshape([rows, LONGEST_PIECE]).sum_dim(1);
    let sum = sum_in_rows(row_sums.reshape([rows]));
    match len % LONGEST_PIECE {
        0 => sum,
        rest => sum + x.narrow(0, rows * LONGEST_PIECE, rest).sum(),
    }
}

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

    /// Every value counted once, whatever the length: whole rows, rows and a rest, and rows
    /// too many to sum whole. Ones and zeros, so that every partial sum is exact in f32.
    #[cfg(feature = "flex")]
    #[test]
    fn sums_in_rows_count_every_value_once() {
        let device = Device::flex();
        let lengths: [usize; 8] = [
            1,
            1023,
            32_768,
            32_769,
            65_536,
            70_001,
            3 << 20,
            (32_769 << 10) + 5,
        ];
        for len in lengths {
            let values: Vec<f32> = (0..len).map(|i| f32::from(u8::from(i % 7 == 0))).collect();
            let x = Tensor::<1>::from_data(burn::tensor::TensorData::new(values, [len]), &device);
            let got: f32 = sum_in_rows(x).into_scalar();
            assert_eq!(got as usize, len.div_ceil(7), "{len} values");
        }
    }

    #[cfg(feature = "flex")]
    #[test]
    fn the_cpu_runs_its_loops_to_the_end() {
        assert!(!loops_stop_early(&Device::flex()));
        assert!(!loops_stop_early(&Device::flex().autodiff()));
    }
}
