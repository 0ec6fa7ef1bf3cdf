//! The kernels under the layers: how a pool, convolution, dense layer, batch norm or LRN is
//! computed, and in what precision.
//!
//! - `dispatch.rs`: the layers' ops ([`max_pool2d`], [`conv2d`], [`linear`], ...), routed to
//!   burn-towers' own kernels on f32 flex tensors and to Burn's modules everywhere else.
//! - `flex/` (feature `flex`): those kernels, a Burn backend extension with hand-written
//!   backward passes.
//! - `image_conv.rs`: [`conv_images`], a first convolution as one batched matrix product.
//! - `precision.rs`: [`Precision`], what matrix products compute in, per thread.
//! - `padding.rs`: TF's SAME padding, as `Conv2d` pads.
//! - `optimizer_update.rs`: [`fused_rmsprop`], [`fused_adam`]: an optimizer's update in one
//!   pass on flex.

pub(crate) mod dispatch;
#[cfg(feature = "flex")]
pub(crate) mod flex;
mod image_conv;
mod optimizer_update;
pub(crate) mod padding;
pub(crate) mod precision;

pub use dispatch::{avg_pool2d, conv2d, conv2d_relu, linear, max_pool2d};
pub use image_conv::conv_images;
pub use optimizer_update::{
    AdamStep, MomentumStep, RmsPropStep, SgdStep, SgdTensors, fused_adam, fused_rmsprop, fused_sgd,
};
pub use precision::{
    Bf16Kernel, Precision, bf16_kernel, bf16_on_amx, current_precision, with_precision,
};
