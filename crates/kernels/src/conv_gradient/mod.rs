//! [`conv2d_by_product`]: a convolution on Burn's CubeCL devices whose weight gradient is one
//! matrix product, the input's windows laid out as rows times the output's gradient (im2col, as
//! Caffe and TF's first GPU kernels had it).
//!
//! Why: Burn's weight gradient on those devices (burn-cubecl's `conv2d_weight_backward`) is
//! autotuned among kernels that tune more inside themselves (an im2col product, a transposed
//! convolution, a convolution with the batch as channels), each candidate compiled and timed on
//! a cold start. On an H200 (2026-12-04) the CIFAR-10 trainer's two convolutions' backward
//! passes and what they tuned inside took 164 of its first step's 340 s of tuning
//! (bench/HISTORY.md, "On an NVIDIA H200, 2026-12-04: cold tuning took the lease"). Here each
//! convolution's weight gradient tunes one product, and its input gradient is a forward
//! convolution at stride 1 (of the output gradient spread out by the stride; under SAME at
//! stride 1 with as many channels out as in, of the forward's very shape, so tuned already).
//! A 1x1 convolution at stride 1 without padding takes its input gradient as one product (no
//! turned kernel to copy); only where the forward padded a side by as much as the kernel is it
//! Burn's (`conv2d_x_backward`).
//!
//! - `extension.rs`: the backend extension (Burn's convolution forward), and the routing check.
//! - `backward.rs`: its autodiff implementation and backward pass.
//! - `windows/`: the input's windows as rows, the weight gradient's operand (one kernel of ours
//!   on Burn's CubeCL devices).
//! - `spread/`: the output gradient spread out by the stride, the input gradient's operand (one
//!   kernel of ours there too).

mod backward;
mod extension;
mod spread;
mod windows;

use burn::backend::Dispatch;
use burn::tensor::Tensor;
use burn::tensor::ops::ConvOptions;

use crate::cubecl_device::on_cubecl;
use extension::ConvByProduct;

/// Stride and zero padding (`((top, bottom), (left, right))`, as `conv_padding` gives it) of a
/// convolution without groups or dilation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ConvShape {
    pub(crate) stride: [usize; 2],
    pub(crate) padding: ((usize, usize), (usize, usize)),
}

impl ConvShape {
    /// From the extension's arguments: `padding` as `[top, bottom, left, right]`.
    fn from_flat(stride: [usize; 2], padding: [usize; 4]) -> Self {
        let [top, bottom, left, right] = padding;
        Self {
            stride,
            padding: ((top, bottom), (left, right)),
        }
    }

    /// The padding as `[top, bottom, left, right]`.
    fn flat_padding(self) -> [usize; 4] {
        let ((top, bottom), (left, right)) = self.padding;
        [top, bottom, left, right]
    }

    fn options(self) -> ConvOptions<2> {
        ConvOptions::new_with_padding(self.stride, self.padding.into(), [1, 1], 1)
    }
}

/// `conv2d(x, weight)` without bias, groups or dilation (`x` `[n, c, h, w]`, `weight`
/// `[out, c, kh, kw]`, f32), by Burn's convolution forward and, under autodiff, the gradients
/// of `backward.rs` (see the module's doc). `None` on devices the
/// extension does not route (any but Burn's CubeCL devices).
pub(crate) fn conv2d_by_product(
    x: &Tensor<4>,
    weight: &Tensor<4>,
    shape: ConvShape,
) -> Option<Tensor<4>> {
    if !on_cubecl(&x.device()) {
        return None;
    }
    Some(Tensor::from_dispatch(
        <Dispatch as ConvByProduct>::towers_conv2d_by_product(
            x.clone().into_dispatch(),
            weight.clone().into_dispatch(),
            shape.stride,
            shape.flat_padding(),
        ),
    ))
}
