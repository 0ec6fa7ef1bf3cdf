//! The ops the layers call: each routed to burn-towers' kernels on f32 (or bf16) flex tensors
//! in the layouts they cover ([`flex_route`], through [`crate::extension::FlexKernels`]), and to
//! Burn's own ops everywhere else, with the same outputs and gradients to float rounding.
//!
//! - `layer_ops.rs`: [`max_pool2d`], [`avg_pool2d`], [`adaptive_avg_pool2d`], [`max_pool1d`],
//!   [`avg_pool1d`], [`adaptive_avg_pool1d`], [`adaptive_avg_pool3d`], [`conv2d`], [`conv2d_relu`],
//!   [`conv2d_relu_max_pool2d`], [`conv1d`], [`conv_transpose1d`], [`conv_transpose2d`],
//!   [`linear`], [`linear_relu`], [`dropout`], [`relu6`], [`silu`], [`sigmoid`], [`tanh`],
//!   [`leaky_relu`], [`prelu`], [`mish`], [`gelu`], [`gelu_approximate`], [`group_norm`],
//!   [`instance_norm`], [`layer_norm`], [`rms_norm`], [`hard_swish`], [`hard_sigmoid`],
//!   [`softmax`], [`quiet_softmax`], given Burn's own layer modules, their products in this
//!   thread's [`Precision`](crate::Precision).
//! - `lstm.rs`, `gru.rs`: [`lstm`], [`bi_lstm`], [`gru`], [`bi_gru`]: recurrent layers whose
//!   recurrence is one op on flex (`gates.rs`: their gates' layers joined).
//! - `channel_bias.rs`: a bias added so that its gradient is summed in short reductions (on
//!   wgpu, long ones drop values).
//! - `flex_route.rs`: which calls the flex kernels take; the fused ops only they compute
//!   (batch norm with ReLU and max pooling, LRN) return `None` elsewhere.
//! - `image_conv.rs`: [`conv_images`], a first convolution as one batched matrix product.
//! - `conv3d.rs`: [`conv3d`], Burn's 3D convolution, on flex as one 2D convolution of the
//!   input's depth windows side by side.
//! - `interpolate.rs`: [`interpolate`], Burn's resizing, bilinear on flex by our kernel.
//! - `attention.rs`: [`attention`], Burn's scaled dot-product attention, on flex by one kernel
//!   each way that never holds the weights whole.
//! - `rotary_encoding.rs`: [`rotary_encoding`], Burn's rotary position encoding, on flex by one
//!   kernel each way.
//! - `optimizer_update.rs`: [`fused_sgd`], [`fused_rmsprop`], [`fused_adam`]: an optimizer's
//!   update in one pass on flex.
//! - `square_sums.rs`: [`joined_sum_of_squares`] over many tensors on GPUs (an L2 penalty's
//!   value in a few kernels).
//! - `bf16_kernel.rs`: [`bf16_kernel`], what computes bf16 products on this CPU.

mod attention;
mod bf16_kernel;
mod channel_bias;
mod conv3d;
#[cfg(feature = "flex")]
pub mod flex_route;
#[cfg(feature = "flex")]
mod gates;
mod gru;
mod image_conv;
mod interpolate;
mod layer_ops;
mod lstm;
mod optimizer_update;
mod rotary_encoding;
mod square_sums;

pub use attention::attention;
pub(crate) use attention::{WeightsDropout, heads_context};
pub use bf16_kernel::{bf16_kernel, bf16_on_amx};
pub use conv3d::conv3d;
pub use gru::{bi_gru, gru};
pub use image_conv::conv_images;
pub use interpolate::interpolate;
pub use layer_ops::{
    adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d, avg_pool1d, avg_pool2d,
    conv_transpose1d, conv_transpose2d, conv1d, conv2d, conv2d_relu, conv2d_relu_max_pool2d,
    dropout, gelu, gelu_approximate, group_norm, hard_sigmoid, hard_swish, instance_norm,
    layer_norm, leaky_relu, linear, linear_relu, max_pool1d, max_pool2d, mish, prelu,
    quiet_softmax, reads_rounded, relu6, rms_norm, sigmoid, silu, softmax, tanh,
};
pub use lstm::{bi_lstm, lstm};
pub use optimizer_update::{
    AdamStep, MomentumStep, RmsPropStep, SgdStep, SgdTensors, fused_adam, fused_rmsprop, fused_sgd,
};
pub use rotary_encoding::rotary_encoding;
pub use square_sums::{joined_sum_of_squares, joins_square_sums};
