//! burn-towers' own kernels on flex tensors and plain slices, by family: `memory` (buffers
//! zeroed and copied on rayon's threads, images in f32 or bf16), `exp` (a vectorized `e^x`),
//! `activation` (ReLU6, SiLU, GELU and the hard ones), `prelu`, `dropout`, `interpolate`,
//! `rotary` (RoPE), `softmax`, `gemm` (f32 and bf16 products, transposition), `attention`
//! (scaled dot-product attention on those products and the softmax's rows), `recurrent`
//! (LSTM's and GRU's recurrences), `conv`, `norm` (batch norm, LRN), `pool`,
//! `optimizer_update`. Each family uses
//! only those before it in that list (`tests/layers.rs`). Burn reaches them through the backend
//! extension above them ([`crate::extension::FlexKernels`]), with hand-written backward passes.
//!
//! Measured on the CIFAR-10 net's training step against TensorFlow's oneDNN (bench/HISTORY.md, "The
//! CIFAR-10 training step"): flex's max pooling loops per output with a per-element range
//! check, 6x TF's time; flex's convolution reaches about half of gemm's rate, differentiates
//! its input as a transposed convolution (gemm, then a col2im scatter) and its weight as a
//! convolution with 25 output positions (a gemm 25 columns wide), together 3.4x TF's backward.
//! These kernels compute:
//! - max pooling (`pool::max_pool`) plane by plane in vectorized passes, keeping each output's
//!   argmax for the backward pass;
//! - a convolution (`conv::passes`) as one gemm per image of the kernel and the image's windows, on
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
//! - dropout (`dropout`) in one pass each way, its mask a hash of the call's seed and each
//!   value's index, drawn again backward rather than kept;
//! - bilinear resizing (`interpolate`) plane by plane, a blend of two rows then of two columns,
//!   backward the same transposed;
//! - rotary position encoding (`rotary`) in one pass each way, where Burn's layer composes a
//!   product by a sign matrix, a broadcast product and a sum;
//! - softmax over a row (`softmax`) in three passes forward and two backward, where Burn's
//!   autodiff composes five ops each way;
//! - scaled dot-product attention (`attention`) a head per task and a block of queries at a
//!   time, its weights never in memory whole, made again backward from each query's maximum
//!   and sum, where Burn's autodiff writes them and composes products, a mask fill and softmax;
//! - an LSTM's or a GRU's recurrence over a whole sequence (`recurrent`), each step one product
//!   and one pass over the gates, batch rows on rayon's threads, where Burn's autodiff records
//!   each step's six or eight dense layers and dozen ops;
//! - TF's RMSProp and Adam's updates of a parameter in one pass on rayon's threads
//!   (`optimizer_update`), where Burn's elementwise ops take a dozen on one.
//!
//! Their output buffers are zeroed, and their strided inputs copied, on rayon's threads
//! (`buffers`): on the calling thread alone, the other cores waited.
//!
//! Only flex tensors come here: [`crate::dispatch`] routes every other backend to Burn's own
//! modules, and layouts these kernels do not cover (unevenly padded or dilated pools, dilated,
//! grouped or asymmetrically padded convolutions) to Burn's flex kernels.

pub(crate) mod activation;
pub(crate) mod attention;
pub(crate) mod conv;
pub(crate) mod dropout;
pub(crate) mod exp;
pub(crate) mod gemm;
pub(crate) mod interpolate;
pub(crate) mod memory;
pub(crate) mod norm;
pub(crate) mod optimizer_update;
pub(crate) mod pool;
pub(crate) mod prelu;
pub(crate) mod recurrent;
pub(crate) mod rotary;
pub(crate) mod softmax;
