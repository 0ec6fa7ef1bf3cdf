//! burn-towers' kernels: the ops under the layers (convolution, pooling, dense layers, batch,
//! group and layer norms, activations, softmax, LRN, optimizer updates), computed by hand-written CPU kernels on Burn's flex backend
//! (AVX-512, AVX-512 BF16, AMX tiles, Winograd) wherever they apply and by Burn's own ops on
//! every other backend and layout, with the same outputs and gradients to float rounding; and
//! the precision their products compute in ([`Precision`], per thread). Also the cross-entropy
//! loss with a backward pass of its own on flex and GPUs ([`softmax_cross_entropy`]).
//!
//! The folders, bottom up (each module uses only those before it: `tests/layers.rs`):
//! - `precision.rs`, `padding.rs`, `cubecl_device.rs`, `short_sums.rs`: the vocabulary (what
//!   products compute in; TF's SAME padding; which devices are CubeCL's; which end loops early,
//!   and how long sums are cut short there).
//! - `flex/` (feature `flex`): the kernels by family, on flex tensors and slices.
//! - `extension/` (feature `flex`): the Burn backend extension that reaches them, forward and
//!   (under autodiff) backward.
//! - `deferred.rs` (a GPU backend): our CubeCL kernels queued on Burn's fusion backend.
//! - `conv_gradient/` (a GPU backend): the convolution's backward pass on Burn's CubeCL
//!   devices.
//! - `dispatch/`: the public ops, each routed to the extension or to Burn.
//! - `loss/`: [`softmax_cross_entropy`], with a backward pass of its own on every backend.
//! - `batch_norm/`: [`batch_norm_train`] and [`offset_batch_norm`] (no scale), batch norm with
//!   a backward pass of its own on Burn's CubeCL devices, and their `_moving` forms, which move
//!   a layer's [`MovingAverages`] in the same kernels (`_relu_`/`_relu6_` ones with the
//!   rectifier after them).
//! - `lrn/`: [`lrn_by_band`], the LRN with a backward pass of its own on those devices.
//! - `nn/`: drop-in layers with Burn's names, `Config`s and records ([`nn::conv::Conv2d`],
//!   [`nn::pool::MaxPool2d`], [`nn::Linear`], ...), on those ops.

mod batch_norm;
#[cfg(feature = "gpu")]
mod conv_gradient;
mod cubecl_device;
#[cfg(feature = "gpu")]
mod deferred;
mod dispatch;
#[cfg(feature = "flex")]
mod extension;
#[cfg(feature = "flex")]
mod flex;
mod loss;
mod lrn;
pub mod nn;
mod padding;
mod precision;
mod short_sums;
#[cfg(test)]
mod test_util;

pub use batch_norm::{
    MovingAverages, batch_norm_relu_train_moving, batch_norm_relu6_train_moving, batch_norm_train,
    batch_norm_train_moving, offset_batch_norm, offset_batch_norm_moving,
    offset_batch_norm_relu_moving,
};
pub use cubecl_device::on_cubecl;
#[cfg(feature = "flex")]
pub use dispatch::flex_route;
pub use dispatch::{
    AdamStep, MomentumStep, RmsPropStep, SgdStep, SgdTensors, adaptive_avg_pool1d,
    adaptive_avg_pool2d, adaptive_avg_pool3d, attention, avg_pool1d, avg_pool2d, bf16_kernel,
    bf16_on_amx, bi_gru, bi_lstm, conv_images, conv_transpose1d, conv_transpose2d, conv1d, conv2d,
    conv2d_relu, conv2d_relu_max_pool2d, conv3d, dropout, fused_adam, fused_rmsprop, fused_sgd,
    gelu, gelu_approximate, group_norm, gru, hard_sigmoid, hard_swish, instance_norm, interpolate,
    joined_sum_of_squares, joins_square_sums, layer_norm, leaky_relu, linear, linear_relu, lstm,
    max_pool1d, max_pool2d, mish, prelu, quiet_softmax, reads_rounded, relu6, rms_norm,
    rotary_encoding, sigmoid, silu, softmax, tanh,
};
pub use loss::softmax_cross_entropy;
pub use lrn::{lrn_band, lrn_by_band};
pub use padding::same_padding;
pub use precision::{Bf16Kernel, Precision, current_precision, with_precision};
pub use short_sums::{long_sum, loops_stop_early};
