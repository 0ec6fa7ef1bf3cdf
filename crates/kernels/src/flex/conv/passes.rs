//! A convolution on flex by im2col and gemm, forward and backward: one image's windows at a
//! time as a `[in·kh·kw, places]` matrix ([`Im2Col`]), each thread on its own share of the
//! images with gemm on that thread. Flex's own convolution reaches about half of gemm's rate on
//! these shapes, its input gradient is a transposed convolution (gemm, then a col2im
//! scatter), and its weight gradient a convolution as wide as the kernel has places (a gemm
//! 25 columns wide for 5x5).
//!
//! In [`Arithmetic::Bf16`] the same products take their operands rounded to bf16 and sum in
//! f32 ([`crate::flex::gemm::bf16_gemm`]: on AMX tiles or with AVX-512 BF16 where the CPU has them). Where
//! AMX runs them, a
//! stride-1 convolution skips the windows altogether ([`direct`]: the tiles read the padded
//! image at each tap's offset), forward and, where that pays, for the weight gradient.
//!
//! In f32, stride-1 3x3, 7x1 and 1x7 convolutions with 64 channels or more on both sides and
//! maps of 64 tiles or more, and 5x5 ones with 32 channels or more, go by Winograd's minimal
//! filtering ([`winograd`], [`winograd_7x1`], [`winograd_5x5`]): fewer products (16 for 36, 9
//! for 21, 36 for 100), forward and both gradients (`TOWERS_NO_WINOGRAD=1` turns them off). Not in bf16: its operands would be rounded after
//! the transforms, whose cancellations then lose more than bf16's rounding of the inputs.

use burn::backend::Flex;
use burn::backend::ops::FloatTensorOps;
use burn::tensor::TensorData;
use burn_flex::FlexTensor;
use rayon::prelude::*;
use std::mem::MaybeUninit;
use std::ops::Range;

use crate::flex::conv::bias_relu;
use crate::flex::conv::weight_sum::WeightSum;
use crate::flex::conv::winograd::{self, TransformedWeightSum};
use crate::flex::conv::winograd_5x5;
use crate::flex::conv::winograd_7x1;
use crate::flex::gemm::arithmetic::Arithmetic;
use crate::flex::gemm::bf16_gemm::{PackedLhs, Strided, multiply_bf16};
use crate::flex::gemm::gemm_f32::{View, gemm_f32};
use crate::flex::gemm::transpose::transpose;
use crate::flex::memory::buffers::{contiguous, zeroed};
use crate::flex::memory::dims4;
use crate::flex::memory::pixels::{Pixels, widen_into, widened};

/// A convolution's stride and its zero padding, the same before and after.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ConvGeometry {
    pub stride: [usize; 2],
    pub padding: [usize; 2],
}

/// `conv(x, weight)` for `[n, in, h, w]` and `[out, in, kh, kw]`: per image, the kernel as an
/// `[out, in·kh·kw]` matrix times the windows, written straight into the image's output.
pub(crate) fn forward(
    x: FlexTensor,
    weight: FlexTensor,
    geometry: ConvGeometry,
    arithmetic: Arithmetic,
) -> FlexTensor {
    forward_then(x, weight, geometry, arithmetic, None)
}

/// `relu(conv(x, weight) + bias)`, the bias and ReLU applied to each thread's share of the
/// output right after its convolution ([`crate::flex::conv::bias_relu`]).
pub(crate) fn forward_bias_relu(
    x: FlexTensor,
    weight: FlexTensor,
    bias: FlexTensor,
    geometry: ConvGeometry,
    arithmetic: Arithmetic,
) -> FlexTensor {
    let bias = bias.to_contiguous();
    forward_then(x, weight, geometry, arithmetic, Some(bias.storage()))
}

/// [`forward`], then the bias and ReLU when there is a bias.
fn forward_then(
    x: FlexTensor,
    weight: FlexTensor,
    geometry: ConvGeometry,
    arithmetic: Arithmetic,
    bias: Option<&[f32]>,
) -> FlexTensor {
    let weight = weight.to_contiguous();
    let [out, c, kh, kw] = dims4(&weight);
    let kernel: &[f32] = weight.storage();
    let [n, _, h, w] = dims4(&x);
    let dims = [out, c, kh, kw];
    let product = windowless(kernel, dims, [n, h, w], geometry, arithmetic, false).unwrap_or(
        ImageProduct::Windows {
            kernel: Kernel::new(kernel, [out, c * kh * kw], arithmetic),
            geometry,
        },
    );
    convolve(x, [out, kh, kw], &product, bias)
}

/// Whether a convolution by a `kernel` at `stride` with zero `padding` reads bf16 images as
/// they are, forward and for its weight gradient: where the direct vector kernels run (AVX-512
/// BF16 without AMX), which take them, and the windows too ([`readable`], [`weight_grad`]);
/// not a 1x1 at stride 1 without padding, whose windows are the image itself, read in place by
/// f32 gemm. Elsewhere such images are widened to f32 first, a pass for nothing.
pub(crate) fn reads_bf16_images(
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
) -> bool {
    let copies = kernel == [1, 1] && stride == [1, 1] && padding == [0, 0];
    !direct::available() && vectors::available(true) && !copies
}

/// `x` as `product` reads it with windows `image`: bf16 images ([`Pixels`]) as they are where
/// the direct vector kernels or the windows take them, else (AMX, Winograd, windows that are
/// the image itself, read in place by f32 gemm) widened to f32.
fn readable(x: FlexTensor, product: &ImageProduct, image: &Im2Col) -> FlexTensor {
    match product {
        ImageProduct::Windowless {
            kernel: WindowlessKernel::Vectors(_),
            ..
        } => x,
        ImageProduct::Windows { .. } if !image.is_copy() => x,
        _ => widened(x),
    }
}

/// The product without windows for a convolution of this geometry, where this CPU has one:
/// stride 1, on AMX tiles in bf16, else on AVX-512 vectors (not for a 1x1 kernel without
/// padding, whose windows are the image itself). `flipped`: the kernel of the input gradient
/// of a convolution by `kernel` (`[out, c, kh, kw]`), as [`input_grad`] takes it. `images`:
/// the `[n, h, w]` of the batch it will convolve.
fn windowless(
    kernel: &[f32],
    dims: [usize; 4],
    [n, h, w]: [usize; 3],
    geometry: ConvGeometry,
    arithmetic: Arithmetic,
    flipped: bool,
) -> Option<ImageProduct<'static>> {
    let [_, _, kh, kw] = dims;
    let bf16 = arithmetic == Arithmetic::Bf16;
    let padding = geometry.padding;
    let product = |kernel| ImageProduct::Windowless { kernel, padding };
    if geometry.stride != [1, 1] {
        return None;
    }
    let [out, c, _, _] = dims;
    let out_size =
        [[h, 0], [w, 1]].map(|[side, d]| (side + 2 * padding[d]).saturating_sub(dims[2 + d] - 1));
    if !bf16 && winograd::pays_off([c, out], [kh, kw], geometry.stride, out_size) {
        let kernel = match flipped {
            false => winograd::TransformedKernel::new(kernel, [out, c]),
            true => winograd::TransformedKernel::flipped_transposed(kernel, [out, c]),
        };
        return Some(product(WindowlessKernel::Winograd(kernel)));
    }
    let share = images_per_thread(n);
    if !bf16 && winograd_5x5::pays_off([c, out], [kh, kw], geometry.stride, share) {
        let kernel = match flipped {
            false => winograd_5x5::TransformedKernel::new(kernel, [out, c]),
            true => winograd_5x5::TransformedKernel::flipped_transposed(kernel, [out, c]),
        };
        return Some(product(WindowlessKernel::Winograd5x5(kernel)));
    }
    if !bf16 && winograd_7x1::pays_off([c, out], [kh, kw], geometry.stride, padding, out_size) {
        let kernel = match flipped {
            false => winograd_7x1::TransformedKernel::new(kernel, dims),
            true => winograd_7x1::TransformedKernel::flipped_transposed(kernel, dims),
        };
        return Some(product(WindowlessKernel::Winograd7x1(kernel)));
    }
    if bf16 && direct::available() {
        let kernel = match flipped {
            false => direct::PackedKernel::new(kernel, dims),
            true => direct::PackedKernel::flipped_transposed(kernel, dims),
        };
        return Some(product(WindowlessKernel::Direct(kernel)));
    }
    if [kh, kw] == [1, 1] && padding == [0, 0] || !vectors::available(bf16) {
        return None;
    }
    let kernel = match flipped {
        false => vectors::PackedKernel::new(kernel, dims, bf16, ([h, w], padding)),
        true => vectors::PackedKernel::flipped_transposed(kernel, dims, bf16, ([h, w], padding)),
    };
    Some(product(WindowlessKernel::Vectors(kernel?)))
}

/// How each image's convolution is computed.
enum ImageProduct<'a> {
    /// The kernel times the image's windows (im2col), image by image.
    Windows {
        kernel: Kernel<'a>,
        geometry: ConvGeometry,
    },
    /// Without windows (stride 1), several images per call.
    Windowless {
        kernel: WindowlessKernel,
        padding: [usize; 2],
    },
}

/// A stride-1 convolution's kernel, laid out for the product that takes it without windows.
enum WindowlessKernel {
    /// On AMX tiles (bf16).
    Direct(direct::PackedKernel),
    /// By Winograd's F(2×2, 3×3) (3x3, f32).
    Winograd(winograd::TransformedKernel),
    /// By Winograd's F(2×2, 5×5) (5x5, f32).
    Winograd5x5(winograd_5x5::TransformedKernel),
    /// By Winograd's F(3, 7) (7x1 or 1x7, f32).
    Winograd7x1(winograd_7x1::TransformedKernel),
    /// On AVX-512 vectors.
    Vectors(vectors::PackedKernel),
}

impl WindowlessKernel {
    /// `y = conv(x, kernel)` for `images` (`[n, c, h, w]`) padded by `padding`, on the calling
    /// thread; returns `y`, written. The kernels that take `&mut [f32]` get it zeroed, in one
    /// pass over the thread's share.
    fn forward<'y>(
        &self,
        y: &'y mut [MaybeUninit<f32>],
        x: Pixels,
        images: [usize; 4],
        padding: [usize; 2],
    ) -> &'y mut [f32] {
        if let Self::Vectors(kernel) = self {
            return vectors::forward(y, x, images, kernel, padding);
        }
        let (x, y) = (x.f32(), zeroed(y));
        match self {
            Self::Direct(kernel) => direct::forward(y, x, images, kernel, padding),
            Self::Winograd(kernel) => winograd::forward(y, x, images, kernel, padding),
            Self::Winograd5x5(kernel) => winograd_5x5::forward(y, x, images, kernel, padding),
            Self::Winograd7x1(kernel) => winograd_7x1::forward(y, x, images, kernel, padding),
            Self::Vectors(_) => unreachable!("taken above"),
        }
        y
    }
}

/// Images each of rayon's threads takes of a batch of `n`: the share by which the convolutions
/// split their work, and which the kernels that work on whole groups of images (Winograd's
/// F(2x2, 5x5)) are chosen by.
fn images_per_thread(n: usize) -> usize {
    n.div_ceil(rayon::current_num_threads()).max(1)
}

/// The convolution of `x` by a `[out, _, kh, kw]` kernel computed as `product` says, each
/// thread on its share of the images, then the bias and ReLU when there is a bias.
fn convolve(
    x: FlexTensor,
    [out, kh, kw]: [usize; 3],
    product: &ImageProduct,
    bias: Option<&[f32]>,
) -> FlexTensor {
    let [n, c, h, w] = dims4(&x);
    let geometry = match product {
        ImageProduct::Windows { geometry, .. } => *geometry,
        ImageProduct::Windowless { padding, .. } => ConvGeometry {
            stride: [1, 1],
            padding: *padding,
        },
    };
    let image = Im2Col::new([c, h, w], [kh, kw], geometry);
    let x = contiguous(readable(x, product, &image));
    let [out_h, out_w] = image.out;
    let (taps, places) = (c * kh * kw, out_h * out_w);
    let len = n * out * places;
    let mut y = Vec::with_capacity(len);
    let per_thread = images_per_thread(n);
    y.spare_capacity_mut()[..len]
        .par_chunks_mut((out * places * per_thread).max(1))
        .zip(Pixels::of(&x).par_chunks(c * h * w * per_thread))
        .for_each(|(y, x)| match product {
            ImageProduct::Windows { kernel, .. } => {
                // Image by image, each output zeroed just before its product writes it and its
                // bias and ReLU applied right after, in cache: zeroing the whole output first
                // sent it to memory and back.
                let mut columns = vec![0f32; if image.is_copy() { 0 } else { taps * places }];
                for (i, y) in y.chunks_exact_mut(out * places).enumerate() {
                    let x = x.slice(i * c * h * w..(i + 1) * c * h * w);
                    let y = zeroed(y);
                    let windows = image.windows(x, 0..out_h, &mut columns);
                    kernel.times(y, windows, places);
                    if let Some(bias) = bias {
                        bias_relu::apply(y, bias, places);
                    }
                }
            }
            ImageProduct::Windowless { kernel, padding } => {
                let images = [x.len() / (c * h * w), c, h, w];
                let y = kernel.forward(y, x, images, *padding);
                if let Some(bias) = bias {
                    bias_relu::apply(y, bias, places);
                }
            }
        });
    // SAFETY: the capacity is at least `len`, and every chunk of it was written above.
    unsafe { y.set_len(len) };
    FlexTensor::from_data(TensorData::new(y, [n, out, out_h, out_w]))
}

/// The gradient of `x` (of dimensions `x_dims`) in `y = conv(x, weight)`, given `grad =
/// ∂L/∂y`: also the transposed convolution of `grad` by `weight`. At stride 1 it is the
/// convolution of `grad` by the kernel flipped in both directions with inputs and outputs
/// swapped, padded by `k - 1 - p` ([`forward`]); at other strides each window's share, added
/// back where the window read it ([`strided_input_grad`]).
pub(crate) fn input_grad(
    x_dims: [usize; 4],
    weight: FlexTensor,
    grad: FlexTensor,
    geometry: ConvGeometry,
    arithmetic: Arithmetic,
) -> FlexTensor {
    let [_, _, kh, kw] = dims4(&weight);
    let [ph, pw] = geometry.padding;
    if geometry.stride != [1, 1] || ph >= kh || pw >= kw {
        return strided_input_grad(x_dims, weight, grad, geometry, arithmetic);
    }
    let flipped = ConvGeometry {
        stride: [1, 1],
        padding: [kh - 1 - ph, kw - 1 - pw],
    };
    let (weight, dims) = (weight.to_contiguous(), dims4(&weight));
    let [_, c, _, _] = dims;
    let [n, _, h, w] = dims4(&grad);
    let kernel = weight.storage();
    if let Some(product) = windowless(kernel, dims, [n, h, w], flipped, arithmetic, true) {
        return convolve(grad, [c, kh, kw], &product, None);
    }
    if [kh, kw] == [1, 1] {
        // A 1x1 kernel flipped is itself: the transposed `[c, out]` matrix, transposed here in
        // AVX-512 blocks (flex's copy of the swapped view ran on the calling thread, ~7 ms of
        // Inception's step while the other core waited).
        let out = dims[0];
        let transposed = transposed_kernel(kernel, [out, c]);
        let weight = FlexTensor::from_data(TensorData::new(transposed, [c, out, 1, 1]));
        return forward(grad, weight, flipped, arithmetic);
    }
    let weight = Flex::float_flip(Flex::float_swap_dims(weight, 0, 1), &[2, 3]);
    forward(grad, weight, flipped, arithmetic)
}

/// The transposed convolution of `x` (`[n, in, h, w]`) by `weight` (`[in, out, kh, kw]`, as
/// Burn and PyTorch lay it) to `[n, out, out_h, out_w]`: the gradient that a convolution by
/// `weight` of an input that size hands back for output gradient `x` ([`input_grad`]). `out`
/// leaves room for the output padding, the rows and columns past the last window's reach.
pub(crate) fn transposed(
    x: FlexTensor,
    weight: FlexTensor,
    geometry: ConvGeometry,
    [out_h, out_w]: [usize; 2],
    arithmetic: Arithmetic,
) -> FlexTensor {
    let ([n, _, _, _], [_, out, _, _]) = (dims4(&x), dims4(&weight));
    input_grad([n, out, out_h, out_w], weight, x, geometry, arithmetic)
}

/// [`input_grad`] for any geometry, by windows: per image, the kernel transposed (`[taps ×
/// out]`) times the output gradient (`[out × places]`) gives each window's share of the
/// gradient (`[taps × places]`), which is added back where the window read the image
/// ([`Im2Col::add_back`]), each thread on its share of the images. Burn's formulation (a
/// transposed convolution) computes the same, but only in f32: in bf16 its products went to
/// f32 on rounded operands, no faster than f32 (Mixed_6a's 3x3/2: 50.7 ms per step).
fn strided_input_grad(
    [n, c, h, w]: [usize; 4],
    weight: FlexTensor,
    grad: FlexTensor,
    geometry: ConvGeometry,
    arithmetic: Arithmetic,
) -> FlexTensor {
    let (weight, grad) = (weight.to_contiguous(), contiguous(grad));
    let [out, _, kh, kw] = dims4(&weight);
    let image = Im2Col::new([c, h, w], [kh, kw], geometry);
    let (taps, places) = (c * kh * kw, image.out[0] * image.out[1]);
    let kernel = transposed_kernel(weight.storage(), [out, taps]);
    let kernel = Kernel::new(&kernel, [taps, out], arithmetic);
    let g: &[f32] = grad.storage();
    let (len, per_image) = (n * c * h * w, c * h * w);
    let mut dx = Vec::with_capacity(len);
    let per_thread = images_per_thread(n);
    dx.spare_capacity_mut()[..len]
        .par_chunks_mut((per_image * per_thread).max(1))
        .enumerate()
        .for_each(|(t, dx)| {
            let mut shares = vec![0f32; taps * places];
            // Each image's gradient zeroed just before its shares are added into it, in cache.
            for (i, dx) in dx.chunks_exact_mut(per_image.max(1)).enumerate() {
                let dx = zeroed(dx);
                if places > 0 {
                    let g = &g[(t * per_thread + i) * out * places..][..out * places];
                    kernel.times(&mut shares, g, places);
                    image.add_back(&shares, dx);
                }
            }
        });
    // SAFETY: the capacity is at least `len`, and every image of it was written above.
    unsafe { dx.set_len(len) };
    FlexTensor::from_data(TensorData::new(dx, [n, c, h, w]))
}

/// The gradient of `weight` (`[out, in, kh, kw]`) in `y = conv(x, weight)`: in f32 by one of
/// Winograd's transforms where one pays off, else per image the output gradient as an `[out,
/// places]` matrix times the image's windows as a `[places, in·kh·kw]` one (or, in bf16 at
/// stride 1, by the direct kernels without windows), summed over the batch. Each thread takes a
/// (slice of the output channels, share of the images) ([`Split`]) and sums into its own
/// [`WeightSum`]; the sums of a slice are merged pairwise at the end.
pub(crate) fn weight_grad(
    x: FlexTensor,
    grad: FlexTensor,
    kernel: [usize; 2],
    geometry: ConvGeometry,
    arithmetic: Arithmetic,
) -> FlexTensor {
    let (x, grad) = (contiguous(x), contiguous(grad));
    let [n, c, h, w] = dims4(&x);
    let out = dims4(&grad)[1];
    let direct = arithmetic == Arithmetic::Bf16
        && geometry.stride == [1, 1]
        && direct::weight_grad_available()
        && direct::weight_grad_pays_off(c, kernel, [h, w], geometry.padding);
    // The direct kernels and the windows read bf16 images ([`Pixels`]); Winograd's transforms
    // (f32) and windows that are the image itself (read in place) get them widened.
    let image = Im2Col::new([c, h, w], kernel, geometry);
    let x = match direct || arithmetic == Arithmetic::Bf16 && !image.is_copy() {
        true => x,
        false => widened(x),
    };
    let problem = WeightGrad {
        x: Pixels::of(&x),
        grad: grad.storage(),
        images: [n, c, h, w],
        out,
        kernel,
        image,
        geometry,
        arithmetic,
        direct,
    };
    let total = match arithmetic {
        Arithmetic::F32 => problem.by_winograd(),
        Arithmetic::Bf16 => None,
    };
    let total = total.unwrap_or_else(|| problem.summed());
    FlexTensor::from_data(TensorData::new(total, [out, c, kernel[0], kernel[1]]))
}

/// One weight gradient to compute: the inputs `x` (`images`; bf16 only for the direct kernels
/// and the windows), the output gradient `grad` (`[n, out, ..]`), and the convolution's
/// geometry.
struct WeightGrad<'a> {
    x: Pixels<'a>,
    grad: &'a [f32],
    images: [usize; 4],
    out: usize,
    kernel: [usize; 2],
    image: Im2Col,
    geometry: ConvGeometry,
    arithmetic: Arithmetic,
    /// Whether the direct bf16 kernels (without windows) take this gradient.
    direct: bool,
}

impl WeightGrad<'_> {
    /// The gradient by the Winograd transform that pays off for this convolution, if one does.
    fn by_winograd(&self) -> Option<Vec<f32>> {
        let [n, c, _, _] = self.images;
        let (out, kernel, stride) = (self.out, self.kernel, self.geometry.stride);
        let (padding, share) = (self.geometry.padding, images_per_thread(n));
        if winograd::pays_off([c, out], kernel, stride, self.image.out) {
            Some(self.transformed(|| winograd::WeightSum::new([out, c])))
        } else if winograd_5x5::pays_off([c, out], kernel, stride, share) {
            Some(self.transformed(|| winograd_5x5::WeightSum::new([out, c])))
        } else if winograd_7x1::pays_off([c, out], kernel, stride, padding, self.image.out) {
            let shape = [out, c, kernel[0], kernel[1]];
            Some(self.transformed(|| winograd_7x1::WeightSum::new(shape)))
        } else {
            None
        }
    }

    /// The gradient in a transformed domain (Winograd's: [`winograd::WeightSum`],
    /// [`winograd_7x1::WeightSum`], ..), a sum from `new` on each thread's share of the images.
    fn transformed<S: TransformedWeightSum>(&self, new: impl Fn() -> S + Sync) -> Vec<f32> {
        let [n, c, h, w] = self.images;
        let share = images_per_thread(n);
        let grad_per_image = self.grad.len() / n.max(1);
        let sum = (self.x.f32())
            .par_chunks((c * h * w * share).max(1))
            .zip(self.grad.par_chunks((grad_per_image * share).max(1)))
            .map(|(x, grad)| {
                let mut sum = new();
                let images = [x.len() / (c * h * w), c, h, w];
                sum.add(x, images, grad, self.geometry.padding);
                sum
            })
            .reduce_with(S::merge);
        sum.unwrap_or_else(&new).into_weights()
    }

    /// The gradient as sums of products, each thread on one (slice of the output channels,
    /// share of the images), the sums of a slice merged pairwise, the slices put end to end.
    fn summed(&self) -> Vec<f32> {
        let [n, c, _, _] = self.images;
        let (out, direct) = (self.out, self.direct);
        let taps = c * self.kernel[0] * self.kernel[1];
        // What each output channel's slice reads of the images: the images themselves (packed
        // to bf16 pairs, or a 1x1 kernel's rows in place), or their windows.
        let reads = match direct || self.image.is_copy() {
            true => self.x.len(),
            false => n * taps * self.image.out[0] * self.image.out[1],
        };
        let split = Split::choose(n, out, [out * taps, reads]);
        let mut slices: Vec<Vec<f32>> = split
            .slices(out)
            .into_par_iter()
            .map(|outs| {
                let sums = split.shares(n).into_par_iter().map(|images| match direct {
                    true => self.direct_sum(images, outs.clone()),
                    false => self.windows_sum(images, outs.clone()),
                });
                // Pairwise on rayon's threads: one after another, 16 threads' sums of Mixed_7's
                // kernels (up to 1.5 M values each) were 15 passes on one core while the rest
                // waited.
                let total = sums.reduce_with(WeightSum::merge);
                total.map_or_else(|| vec![0f32; outs.len() * taps], WeightSum::into_row_major)
            })
            .collect();
        // The slices' rows end to end in one copy (collected through rayon's `flat_map_iter`
        // they were pushed value by value: Mixed_7's backward pass 73 -> 82 ms on 2 threads).
        match slices.len() {
            1 => slices.pop().unwrap_or_default(),
            _ => slices.concat(),
        }
    }

    /// The sum for output channels `outs` over `images`, by the direct bf16 kernels.
    fn direct_sum(&self, images: Range<usize>, outs: Range<usize>) -> WeightSum {
        let [_, c, h, w] = self.images;
        let (out, [kh, kw]) = (self.out, self.kernel);
        let places = self.image.out[0] * self.image.out[1];
        let x = (self.x).slice(images.start * c * h * w..images.end * c * h * w);
        let g = &self.grad[images.start * out * places..][..images.len() * out * places];
        let mut sum = WeightSum::new(outs.len(), c * kh * kw, places, self.arithmetic);
        let values = sum.row_major_mut();
        let batch = [images.len(), c, h, w];
        direct::weight_grad(
            values,
            x,
            batch,
            (g, outs),
            [out, kh, kw],
            self.geometry.padding,
        );
        sum
    }

    /// The sum for output channels `outs` over `images`, image by image, a few output rows'
    /// windows at a time, so that they stay in cache for the product: a whole image's were 25
    /// MB for Inception's second convolution, written then read back. A 1x1 kernel's windows
    /// are the image's rows, read in place, chunked alike.
    fn windows_sum(&self, images: Range<usize>, outs: Range<usize>) -> WeightSum {
        let [_, c, h, w] = self.images;
        let (out, image) = (self.out, &self.image);
        let [out_h, out_w] = image.out;
        let (taps, places) = (c * self.kernel[0] * self.kernel[1], out_h * out_w);
        let rows = (WINDOW_VALUES / (taps * out_w).max(1)).clamp(1, out_h.max(1));
        let mut sum = WeightSum::new(outs.len(), taps, rows * out_w, self.arithmetic);
        let mut columns = vec![
            0f32;
            if image.is_copy() {
                0
            } else {
                taps * rows * out_w
            }
        ];
        for i in images {
            let x = self.x.slice(i * c * h * w..(i + 1) * c * h * w);
            let g = &self.grad[(i * out + outs.start) * places..][..outs.len() * places];
            for first in (0..out_h).step_by(rows) {
                let rows = first..(first + rows).min(out_h);
                let chunk = rows.len() * out_w;
                let filled = (taps * chunk).min(columns.len());
                let windows = match image.is_copy() {
                    true => Strided::row_major(&x.f32()[first * out_w..], places),
                    false => {
                        Strided::row_major(image.windows(x, rows, &mut columns[..filled]), chunk)
                    }
                };
                let g = Strided::row_major(&g[first * out_w..], places);
                sum.add(g, windows, chunk);
            }
        }
        sum
    }
}

/// How a weight gradient's work splits between rayon's threads: the output channels in
/// slices, each summed over the batch in shares of the images, one (slice, share) per thread.
///
/// Every share sums the whole slice once more (its sum zeroed, added into chunk by chunk,
/// merged: about five passes over the values), every slice reads the images once more (packed:
/// read, rounded, interleaved and written, counted as three passes; at one pass, 2 threads of a
/// Zen 5 split Mixed_7b's kernels in two and its backward pass took 84 ms instead of 73). Shares
/// alone, one per thread, suit wide maps and small kernels; on Inception's 8x8 maps with their
/// kernels of up to 1.5 M values, 16 threads each summed all of a kernel over two images and
/// the sums' passes over memory, not the products, were the step (Mixed_7b's backward pass 3.6x
/// its forward on 16 cores of an AMX Xeon, 2026-11-27).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Split {
    /// Output channels per slice.
    per_slice: usize,
    /// Images per share.
    share: usize,
}

impl Split {
    /// The split with the fewest passes over memory, `slices · 3 · reads + shares · 5 · weights`,
    /// for `n` images, `out` output channels and `[weights, reads]` values summed and read per
    /// slice, among those that give every thread one (slice, share).
    fn choose(n: usize, out: usize, [weights, reads]: [usize; 2]) -> Self {
        let threads = rayon::current_num_threads();
        let passes = |slices: usize| slices * 3 * reads + threads / slices * 5 * weights;
        let slices = (1..=threads)
            .filter(|&s| threads.is_multiple_of(s) && out.div_ceil(Self::per_slice(out, s)) == s)
            .min_by_key(|&s| passes(s))
            .unwrap_or(1);
        Self {
            per_slice: Self::per_slice(out, slices),
            share: n.div_ceil(threads / slices).max(1),
        }
    }

    /// Output channels per slice for `slices` of them: a multiple of 16 (the products' blocks
    /// of output channels are 16 or 32 wide).
    fn per_slice(out: usize, slices: usize) -> usize {
        out.div_ceil(slices).next_multiple_of(16).min(out).max(1)
    }

    /// The output channels of each slice.
    fn slices(self, out: usize) -> Vec<Range<usize>> {
        let per = self.per_slice;
        (0..out.max(1))
            .step_by(per)
            .map(|o| o..(o + per).min(out))
            .collect()
    }

    /// The images of each share.
    fn shares(self, n: usize) -> Vec<Range<usize>> {
        let per = self.share;
        (0..n).step_by(per).map(|i| i..(i + per).min(n)).collect()
    }
}

/// Window values the weight gradient builds at a time (2 MiB): few enough to stay in cache for
/// the product, many enough that the products are deep and the running sum (`out × taps`,
/// read and written once per chunk) is seldom passed over. At 512 KiB CIFAR-10's conv2 (12x12
/// maps: chunks of 72 places) took 12.0 ms per step for its weight gradient, at 2 MiB 9.7, and
/// Inception's 5x5s 17.9 -> 14.2 ms; measured on a 2-core Zen 5 (1 MiB L2 per core).
const WINDOW_VALUES: usize = 512 * 1024;

/// [`crate::flex::conv::bf16_conv`], the direct convolution on AMX tiles, where it is compiled (x86-64).
#[cfg(target_arch = "x86_64")]
mod direct {
    pub(crate) use crate::flex::conv::bf16_conv::{
        PackedKernel, forward, weight_grad, weight_grad_pays_off,
    };

    /// Whether AMX runs here.
    pub(crate) fn available() -> bool {
        crate::flex::gemm::bf16_gemm::amx_available()
    }

    /// Whether the direct weight gradient runs here: on AMX tiles or AVX-512 BF16.
    pub(crate) fn weight_grad_available() -> bool {
        crate::flex::conv::bf16_conv::WeightGradEngine::get().is_some()
    }
}

/// [`crate::flex::conv::vector_conv`], the direct convolution on AVX-512 vectors, where it is compiled
/// (x86-64).
#[cfg(target_arch = "x86_64")]
mod vectors {
    pub(crate) use crate::flex::conv::vector_conv::{PackedKernel, available, forward};
}

/// Elsewhere: never available.
#[cfg(not(target_arch = "x86_64"))]
mod vectors {
    pub(crate) enum PackedKernel {}

    /// The images' `[h, w]` and padding.
    type Image = ([usize; 2], [usize; 2]);

    impl PackedKernel {
        pub(crate) fn new(_: &[f32], _: [usize; 4], _: bool, _: Image) -> Option<Self> {
            None
        }

        pub(crate) fn flipped_transposed(
            _: &[f32],
            _: [usize; 4],
            _: bool,
            _: Image,
        ) -> Option<Self> {
            None
        }
    }

    pub(crate) fn available(_: bool) -> bool {
        false
    }

    pub(crate) fn forward<'y>(
        _: &'y mut [std::mem::MaybeUninit<f32>],
        _: super::Pixels,
        _: [usize; 4],
        k: &PackedKernel,
        _: [usize; 2],
    ) -> &'y mut [f32] {
        match *k {}
    }
}

/// Elsewhere: never available.
#[cfg(not(target_arch = "x86_64"))]
mod direct {
    pub(crate) enum PackedKernel {}

    impl PackedKernel {
        pub(crate) fn new(_: &[f32], _: [usize; 4]) -> Self {
            unreachable!("no direct convolution off x86-64")
        }

        pub(crate) fn flipped_transposed(_: &[f32], _: [usize; 4]) -> Self {
            unreachable!("no direct convolution off x86-64")
        }
    }

    pub(crate) fn available() -> bool {
        false
    }

    pub(crate) fn weight_grad_available() -> bool {
        false
    }

    pub(crate) fn weight_grad_pays_off(
        _: usize,
        _: [usize; 2],
        _: [usize; 2],
        _: [usize; 2],
    ) -> bool {
        false
    }

    pub(crate) fn forward<'y>(
        _: &'y mut [std::mem::MaybeUninit<f32>],
        _: &[f32],
        _: [usize; 4],
        k: &PackedKernel,
        _: [usize; 2],
    ) -> &'y mut [f32] {
        match *k {}
    }

    pub(crate) fn weight_grad(
        _: &mut [f32],
        _: super::Pixels,
        _: [usize; 4],
        _: (&[f32], std::ops::Range<usize>),
        _: [usize; 3],
        _: [usize; 2],
    ) {
        unreachable!("no direct convolution off x86-64")
    }
}

/// A convolution's kernel as the left operand of every image's product: an `[out, taps]`
/// matrix, packed once for bf16.
enum Kernel<'a> {
    F32 {
        data: &'a [f32],
        out: usize,
        taps: usize,
    },
    Bf16(PackedLhs),
}

impl<'a> Kernel<'a> {
    fn new(data: &'a [f32], [out, taps]: [usize; 2], arithmetic: Arithmetic) -> Self {
        match arithmetic {
            Arithmetic::F32 => Kernel::F32 { data, out, taps },
            Arithmetic::Bf16 => {
                Kernel::Bf16(PackedLhs::new(out, taps, Strided::row_major(data, taps)))
            }
        }
    }

    /// `y = kernel · windows`, the windows a `[taps, places]` matrix.
    fn times(&self, y: &mut [f32], windows: &[f32], places: usize) {
        match self {
            Kernel::F32 { data, out, taps } => {
                let lhs = Strided::row_major(data, *taps);
                multiply_f32(y, lhs, windows, [*out, *taps, places])
            }
            Kernel::Bf16(kernel) => multiply_bf16(
                y,
                kernel,
                Strided::row_major(windows, places),
                places,
                false,
            ),
        }
    }
}

/// A convolution's kernel (`[out, taps]`, row-major) transposed to `[taps, out]`, in AVX-512
/// blocks ([`transpose`]).
fn transposed_kernel(kernel: &[f32], [out, taps]: [usize; 2]) -> Vec<f32> {
    let mut transposed = vec![0f32; taps * out];
    transpose(
        &mut transposed,
        &Strided::row_major(kernel, taps),
        [out, taps],
    );
    transposed
}

/// `dst[m × n] = lhs · rhs` for `lhs[m × k]` (unit column stride) and row-major `rhs`, by
/// gemm on the calling thread.
fn multiply_f32(dst: &mut [f32], lhs: Strided, rhs: &[f32], [m, k, n]: [usize; 3]) {
    assert_eq!(lhs.col_stride, 1, "lhs rows are not contiguous");
    let lhs_len = if m == 0 {
        0
    } else {
        (m - 1) * lhs.row_stride + k
    };
    assert!(dst.len() == m * n && lhs.data.len() >= lhs_len && rhs.len() == k * n);
    // SAFETY: the asserted lengths cover every index the strides reach: `dst` is m×n row-major
    // (column stride 1, row stride n), `lhs` m rows of k from `row_stride` apart, `rhs` k×n
    // row-major.
    unsafe {
        gemm_f32(
            [m, n, k],
            View::rows(dst.as_mut_ptr(), n),
            false,
            View::rows(lhs.data.as_ptr(), lhs.row_stride),
            View::rows(rhs.as_ptr(), n),
        );
    }
}

/// One image's windows as a `[in·kh·kw, out_h·out_w]` matrix: row `(channel, ky, kx)` holds,
/// for each output place, the input value under that kernel tap (zero in the padding).
struct Im2Col {
    image: [usize; 3],
    kernel: [usize; 2],
    geometry: ConvGeometry,
    out: [usize; 2],
}

impl Im2Col {
    /// The windows of a `[c, h, w]` image under a `kernel`, and the output size they give.
    fn new(image: [usize; 3], kernel: [usize; 2], geometry: ConvGeometry) -> Self {
        let side = |size: usize, k: usize, s: usize, p: usize| (size + 2 * p - k) / s + 1;
        let [_, h, w] = image;
        let ([sh, sw], [ph, pw]) = (geometry.stride, geometry.padding);
        let out = [side(h, kernel[0], sh, ph), side(w, kernel[1], sw, pw)];
        Self {
            image,
            kernel,
            geometry,
            out,
        }
    }

    /// Whether the windows are the image itself (a 1x1 kernel at stride 1, no padding), read
    /// in place rather than copied.
    fn is_copy(&self) -> bool {
        self.kernel == [1, 1] && self.geometry.stride == [1, 1] && self.geometry.padding == [0, 0]
    }

    /// The windows of output rows `rows` of `image` (`[taps, rows · out_w]`): the image itself
    /// when [`is_copy`](Self::is_copy) (all rows), else `columns` filled.
    /// (f32 values; from a bf16 image, widened).
    fn windows<'a>(
        &self,
        image: Pixels<'a>,
        rows: Range<usize>,
        columns: &'a mut [f32],
    ) -> &'a [f32] {
        if self.is_copy() {
            assert_eq!(rows, 0..self.out[0], "a copy's windows are the whole image");
            return image.f32();
        }
        self.fill(image, rows, columns);
        columns
    }

    fn fill(&self, image: Pixels, rows: Range<usize>, columns: &mut [f32]) {
        if self.geometry.stride == [1, 1] {
            return self.fill_padded(image, rows, columns);
        }
        let [c, h, w] = self.image;
        let [kh, kw] = self.kernel;
        let out_w = self.out[1];
        // Per kernel column, which outputs of a row read inside the input row: the same for
        // every row, so worked out once (it divides by the stride).
        let inside: Vec<Inside> = (0..kw).map(|kx| self.inside(kx)).collect();
        let mut taps = columns.chunks_exact_mut(rows.len() * out_w);
        let mut wide = Vec::new();
        for ch in 0..c {
            let plane = image.slice(ch * h * w..(ch + 1) * h * w).to_f32(&mut wide);
            for ky in 0..kh {
                for inside in &inside {
                    let tap = taps.next().expect("one row per kernel tap");
                    for (oy, dst) in rows.clone().zip(tap.chunks_exact_mut(out_w)) {
                        match self.input_row(oy, ky) {
                            Some(y) => inside.fill_row(&plane[y * w..(y + 1) * w], dst),
                            None => dst.fill(0.0),
                        }
                    }
                }
            }
        }
    }

    /// [`fill`](Self::fill) at stride 1: the input rows these output rows read, copied plane by
    /// plane into zero-padded rows, then every window row is one run of them, with no padding
    /// to work out per row (a window row is often only a dozen values).
    fn fill_padded(&self, image: Pixels, rows: Range<usize>, columns: &mut [f32]) {
        let [c, h, w] = self.image;
        let ([kh, kw], [ph, pw]) = (self.kernel, self.geometry.padding);
        let (out_w, wp) = (self.out[1], w + 2 * pw);
        // Padded rows `rows.start .. rows.end + kh - 1`. Zeros once: each plane rewrites only
        // the rows and columns inside the image.
        let mut padded = vec![0f32; (rows.len() + kh - 1) * wp];
        // (padded row, image row) for the padded rows inside the image.
        let image_rows: Vec<(usize, usize)> = (0..rows.len() + kh - 1)
            .filter_map(|r| Some((r, (rows.start + r).checked_sub(ph).filter(|&y| y < h)?)))
            .collect();
        let mut taps = columns.chunks_exact_mut(rows.len() * out_w);
        for ch in 0..c {
            for &(r, y) in &image_rows {
                let row = image.slice((ch * h + y) * w..(ch * h + y + 1) * w);
                let dst = &mut padded[r * wp + pw..][..w];
                match row {
                    Pixels::F32(row) => dst.copy_from_slice(row),
                    Pixels::Bf16(row) => widen_into(dst, row),
                }
            }
            for ky in 0..kh {
                for kx in 0..kw {
                    let tap = taps.next().expect("one row per kernel tap");
                    for (r, dst) in tap.chunks_exact_mut(out_w).enumerate() {
                        let src = &padded[(r + ky) * wp + kx..][..out_w];
                        dst.iter_mut().zip(src).for_each(|(d, s)| *d = *s);
                    }
                }
            }
        }
    }

    /// The inverse of [`windows`](Self::windows) for the whole image: each window value of
    /// `columns` (`[taps, out_h · out_w]`) added to the image place it was read from (`image`
    /// `[c, h, w]`); values read from the padding are dropped.
    fn add_back(&self, columns: &[f32], image: &mut [f32]) {
        let [c, h, w] = self.image;
        let [kh, kw] = self.kernel;
        let [out_h, out_w] = self.out;
        let inside: Vec<Inside> = (0..kw).map(|kx| self.inside(kx)).collect();
        let mut taps = columns.chunks_exact(out_h * out_w);
        for plane in image.chunks_exact_mut(h * w).take(c) {
            for ky in 0..kh {
                for inside in &inside {
                    let tap = taps.next().expect("one row per kernel tap");
                    for (oy, src) in tap.chunks_exact(out_w).enumerate() {
                        if let Some(y) = self.input_row(oy, ky) {
                            inside.add_row(src, &mut plane[y * w..(y + 1) * w]);
                        }
                    }
                }
            }
        }
    }

    /// The input row under kernel row `ky` at output row `oy`; `None` in the padding.
    fn input_row(&self, oy: usize, ky: usize) -> Option<usize> {
        let y = (oy * self.geometry.stride[0] + ky).checked_sub(self.geometry.padding[0])?;
        (y < self.image[1]).then_some(y)
    }

    /// Output column `ox` of kernel column `kx` reads input column `ox · sw + kx − pw`, zero
    /// where that falls in the padding.
    fn inside(&self, kx: usize) -> Inside {
        let (sw, pw, w, out_w) = (
            self.geometry.stride[1],
            self.geometry.padding[1],
            self.image[2],
            self.out[1],
        );
        let first = pw.saturating_sub(kx).div_ceil(sw).min(out_w);
        let end = (w + pw).saturating_sub(kx).div_ceil(sw).clamp(first, out_w);
        Inside {
            outputs: first..end,
            start: (first * sw + kx).saturating_sub(pw),
            stride: sw,
        }
    }
}

/// The outputs of a row of windows that read inside the input row, for one kernel column:
/// `outputs` read the input from `start` on, every `stride`-th value.
struct Inside {
    outputs: Range<usize>,
    start: usize,
    stride: usize,
}

impl Inside {
    /// One output row of windows from input row `src`: zeros, then the values inside, then
    /// zeros. Loops rather than `fill` and `copy_from_slice`: rows are often a dozen values.
    fn fill_row(&self, src: &[f32], dst: &mut [f32]) {
        let Range { start: first, end } = self.outputs;
        dst[..first].iter_mut().for_each(|d| *d = 0.0);
        if end > first {
            let inside = &mut dst[first..end];
            match self.stride {
                1 => (inside.iter_mut())
                    .zip(&src[self.start..self.start + (end - first)])
                    .for_each(|(d, s)| *d = *s),
                sw => (inside.iter_mut())
                    .zip(src[self.start..].iter().step_by(sw))
                    .for_each(|(d, s)| *d = *s),
            }
        }
        dst[end..].iter_mut().for_each(|d| *d = 0.0);
    }

    /// [`fill_row`](Self::fill_row) the other way: one output row's window values added to
    /// the input row they were read from, those read from the padding dropped.
    fn add_row(&self, src: &[f32], dst: &mut [f32]) {
        let Range { start: first, end } = self.outputs;
        if end > first {
            let inside = &src[first..end];
            (dst[self.start..].iter_mut().step_by(self.stride))
                .zip(inside)
                .for_each(|(d, s)| *d += *s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inception v3's shapes at batch 32 on 16 threads: the stem's and the 35x35 blocks'
    /// kernels split the images alone, Mixed_7's split their output channels too; one thread
    /// or a narrow kernel never splits them.
    #[test]
    fn weight_gradients_split_output_channels_only_for_large_kernels_on_small_maps() {
        let on = |threads: usize, n, out, sizes| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build();
            pool.unwrap().install(|| Split::choose(n, out, sizes))
        };
        // Conv2d_2b: 3x3, 32 -> 64 on 147x147 (its windows read), one share per thread.
        let stem = on(16, 32, 64, [64 * 288, 32 * 288 * 147 * 147]);
        assert_eq!(
            stem,
            Split {
                per_slice: 64,
                share: 2
            }
        );
        // Mixed_7b's 3x3, 448 -> 384 on 8x8, direct (the images read): 8 slices of 48
        // output channels, each in two shares of 16 images, a (slice, share) per thread.
        let mixed_7 = on(16, 32, 384, [384 * 4032, 32 * 448 * 64]);
        let split = Split {
            per_slice: 48,
            share: 16,
        };
        assert_eq!(mixed_7, split);
        assert_eq!(split.slices(384).len() * split.shares(32).len(), 16);
        assert_eq!(on(1, 32, 384, [384 * 4032, 32 * 448 * 64]).per_slice, 384);
        assert_eq!(on(16, 32, 8, [8 * 4032, 32 * 448 * 64]).per_slice, 8);
    }
}
