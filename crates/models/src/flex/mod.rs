//! burn-towers' own flex kernels for the two layers where Burn's flex backend is slowest, as a
//! Burn backend extension ([`FlexKernels`]) with hand-written backward passes for autodiff.
//!
//! Measured on the CIFAR-10 net's training step against TensorFlow's oneDNN (README, "The
//! CIFAR-10 training step"): flex's max pooling loops per output with a per-element range
//! check, 6x TF's time; flex differentiates a convolution's input as a transposed convolution
//! (gemm, then a col2im scatter) and its weight as a convolution with 25 output positions (a
//! gemm 25 columns wide), together 3.4x TF's backward. These kernels compute:
//! - max pooling (`max_pool`) plane by plane with the window ranges worked out once per row,
//!   keeping each output's argmax for the backward pass;
//! - a stride-1 convolution's input gradient as a forward convolution of the output gradient
//!   with the flipped, transposed kernel (flex's fast path, im2col tiles and gemm);
//! - the weight gradient (`conv_grads`) as one gemm per image of the output gradient and
//!   the image's windows, accumulated per thread.
//!
//! Only flex tensors come here: [`crate::fast_ops`] routes every other backend to Burn's own
//! modules, and layouts these kernels do not cover (padded pools, dilated, grouped or
//! asymmetrically padded convolutions) to Burn's flex kernels.

mod autodiff;
mod conv_grads;
mod extension;
mod max_pool;

pub(crate) use extension::FlexKernels;
