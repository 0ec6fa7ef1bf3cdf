//! Convolutions on flex, forward and both gradients: `passes` picks the kernel for each pass
//! (im2col and gemm where nothing more special applies), `weight_sum` sums a weight gradient
//! per thread, `bias_relu` fuses the bias and ReLU, `depthwise` convolves one filter per channel,
//! `depth_windows` lays a 3D convolution's depth windows out as 2D images, `vector_conv` (AVX-512) and `bf16_conv` (AMX
//! tiles) convolve without windows, and `winograd*` compute F(2×2, 3×3), F(3, 7) and
//! F(2×2, 5×5) in f32.

#[cfg(target_arch = "x86_64")]
pub(crate) mod bf16_conv;
pub(crate) mod bias_relu;
pub(crate) mod depth_windows;
pub(crate) mod depthwise;
pub(crate) mod passes;
#[cfg(target_arch = "x86_64")]
pub(crate) mod vector_conv;
pub(crate) mod weight_sum;
pub(crate) mod winograd;
pub(crate) mod winograd_5x5;
pub(crate) mod winograd_7x1;
