//! burn-towers' own flex kernels for the two layers where Burn's flex backend is slowest, as a
//! Burn backend extension ([`FlexKernels`]) with hand-written backward passes for autodiff.
//!
//! Measured on the CIFAR-10 net's training step against TensorFlow's oneDNN (bench/README.md, "The
//! CIFAR-10 training step"): flex's max pooling loops per output with a per-element range
//! check, 6x TF's time; flex's convolution reaches about half of gemm's rate, differentiates
//! its input as a transposed convolution (gemm, then a col2im scatter) and its weight as a
//! convolution with 25 output positions (a gemm 25 columns wide), together 3.4x TF's backward.
//! These kernels compute:
//! - max pooling (`max_pool`) plane by plane in vectorized passes, keeping each output's
//!   argmax for the backward pass;
//! - a convolution (`conv`) as one gemm per image of the kernel and the image's windows, on
//!   each thread's share of the batch;
//! - its input gradient, at stride 1, as the same forward convolution of the output gradient
//!   by the flipped, transposed kernel, at other strides by windows added back (col2im);
//! - its weight gradient as one gemm per image of the output gradient and the windows,
//!   accumulated per thread (`weight_sum`), one operand transposed so that gemm need not
//!   gather it (`transpose`);
//! - in f32, stride-1 3x3 convolutions by Winograd's F(2×2, 3×3) (`winograd`) and 7x1/1x7
//!   ones by its F(3, 7) (`winograd_7x1`), where both channel counts reach 64 and a map has 64
//!   tiles, and 5x5 ones by its F(2×2, 5×5) (`winograd_5x5`, 16 images to the vector) where
//!   both reach 32, forward and both gradients;
//! - in bf16 (`bf16_gemm`: AMX tiles or AVX-512 BF16 where the CPU has them), the convolution's products and
//!   a dense layer's (`matmul`); convolutions read their images in f32 or already rounded to
//!   bf16 (`pixels`: a batch norm's output that only they read);
//! - a convolution's bias and ReLU fused into it (`bias_relu`);
//! - batch normalization on batch statistics (training) or given ones (the moving averages, in
//!   evaluation), then ReLU (`batch_norm`), and then max pooling, pooled first where the
//!   statistics are the batch's (`batch_norm_max_pool`);
//! - average pooling at stride 1 (`avg_pool`) as window sums along rows, then columns;
//! - local response normalization (`lrn`) in vectorized passes per channel plane, with square
//!   roots for the power and a backward pass that reuses the forward's window sums;
//! - TF's RMSProp and Adam's updates of a parameter in one pass on rayon's threads
//!   (`optimizer_update`), where Burn's elementwise ops take a dozen on one.
//!
//! Their output buffers are zeroed, and their strided inputs copied, on rayon's threads
//! (`buffers`): on the calling thread alone, the other cores waited.
//!
//! Only flex tensors come here: [`crate::kernels::dispatch`] routes every other backend to Burn's own
//! modules, and layouts these kernels do not cover (padded pools, dilated, grouped or
//! asymmetrically padded convolutions) to Burn's flex kernels.

mod autodiff;
mod avg_pool;
mod batch_norm;
mod batch_norm_max_pool;
#[cfg(target_arch = "x86_64")]
mod bf16_conv;
mod bf16_gemm;
mod bias_relu;
mod buffers;
mod conv;
mod extension;
mod gemm_f32;
mod lrn;
mod matmul;
mod max_pool;
mod optimizer_update;
mod pixels;
mod transpose;
#[cfg(target_arch = "x86_64")]
mod vector_conv;
mod weight_sum;
mod winograd;
mod winograd_5x5;
mod winograd_7x1;

pub(crate) use bf16_gemm::kernel as bf16_kernel;
pub(crate) use conv::reads_bf16_images;
pub(crate) use extension::FlexKernels;
pub(crate) use optimizer_update::{AdamFactors, MomentumFactors, RmsProp, SgdFactors, Update};

use burn_flex::FlexTensor;

/// Floats the elementwise kernels' reductions (batch norm, the fused bias+ReLU) sum side by
/// side: one AVX-512 register, two AVX2 ones. One sum in order keeps the compiler to one value
/// at a time.
const SUM_LANES: usize = 16;

/// The four dimensions of an `[n, c, h, w]` tensor.
fn dims4(x: &FlexTensor) -> [usize; 4] {
    let shape = x.layout().shape();
    [shape[0], shape[1], shape[2], shape[3]]
}

/// `values` split into its even and odd elements (`even`, `odd`: `values.len() / 2` each, or
/// as many as the shortest of the three allows).
#[inline(always)]
fn deinterleave<T: Copy>(values: &[T], even: &mut [T], odd: &mut [T]) {
    for ((even, odd), pair) in even
        .iter_mut()
        .zip(odd.iter_mut())
        .zip(values.chunks_exact(2))
    {
        *even = pair[0];
        *odd = pair[1];
    }
}
