//! [`joined_sum_of_squares`]: `Σ x²` over many tensors, in a few kernels on a GPU, and
//! [`joins_square_sums`]: where that pays.

use burn::tensor::{Device, Tensor};

use crate::cubecl_device::on_cubecl;
use crate::short_sums::long_sum;

/// The most tensors joined into one: Burn's fusion joins a `cat` into one kernel while that
/// kernel's buffers fit the device's limit (31 on lavapipe and on Metal, 1,024 on CUDA), and
/// past it runs the `cat` as one copy per tensor (bench/HISTORY.md, "The update laid end to
/// end").
const JOINED: usize = 24;

/// The fewest tensors worth joining: a join costs a kernel or two of its own (lavapipe ran the
/// `cat` of the CIFAR-10 net's two decayed weights as copies: its step took 94 launches against
/// 91 with the two summed apart), a sum per tensor two or three.
const FEWEST_JOINED: usize = 3;

/// Whether [`joined_sum_of_squares`] pays for `count` tensors on `device`: on Burn's CubeCL
/// devices (wgpu, CUDA, ROCm, ...), where each op is a kernel launch, for at least three
/// (`FEWEST_JOINED`). Elsewhere (flex, ndarray: memory-bound CPUs) joining would only copy
/// every value once more.
pub fn joins_square_sums(device: &Device, count: usize) -> bool {
    on_cubecl(device) && count >= FEWEST_JOINED
}

/// `Σ x²` over every value of `tensors` (flattened), shape `[1]`; `None` when there are none.
/// The tensors are joined 24 at a time (`JOINED`) and each join squared and summed whole (by
/// [`long_sum`], cut short where a device's loops stop early): a few kernels for a whole model
/// on a GPU, where a sum per tensor takes two or three (the value of Inception v3's L2 penalty
/// on lavapipe, 2026-11-30: 12 launches against 346). A last join of fewer than three is
/// summed one tensor at a time.
pub fn joined_sum_of_squares(tensors: Vec<Tensor<1>>) -> Option<Tensor<1>> {
    (tensors.chunks(JOINED))
        .flat_map(|chunk| match chunk.len() >= FEWEST_JOINED {
            true => vec![long_sum(Tensor::cat(chunk.to_vec(), 0).square())],
            false => apart(chunk),
        })
        .reduce(|a, b| a + b)
}

/// Each tensor's `Σ x²`, by [`long_sum`].
fn apart(tensors: &[Tensor<1>]) -> Vec<Tensor<1>> {
    tensors
        .iter()
        .map(|t| long_sum(t.clone().square()))
        .collect()
}
