//! [`conv3d`]: Burn's 3D convolution, on flex as one 2D convolution on the kernels. Burn's flex
//! `conv3d` gathers every output's window value by value: a 3x3x3 convolution of `[2, 32, 16,
//! 32, 32]`, 32 channels to 32, took 105.6 ms forward and backward on 2 cores where PyTorch's
//! took 24.2 (bench/HISTORY.md, "Sigmoid, tanh and leaky ReLU").
//!
//! A 3D window is `kd` 2D windows at consecutive depths: the input's depth slices that output
//! depth `o` reads (`o · stride + k` for each `k < kd`, after the depth padding) laid side by
//! side in the channels make a 2D image of `kd · c` channels, and the kernel's depth taps laid
//! out the same way (`[out, kd · c, kh, kw]`) make one 2D convolution of it. Each output depth
//! is a batch image. A kernel lays the windows out (`flex/conv/depth_windows.rs`: one pass, and
//! one back for the gradient), a tensor op the weight, so autodiff differentiates both and the
//! convolution's own backward pass runs on the kernels too; the windows cost `kd` copies of the
//! input.

use burn::nn::conv::Conv3d;
use burn::tensor::Tensor;

/// `conv.forward(x)`: on flex (without groups or a dilation in depth) as one
/// [`crate::conv2d`] of the input's depth windows side by side, its products in this thread's
/// [`Precision`](crate::Precision); elsewhere Burn's op.
pub fn conv3d(conv: &Conv3d, x: Tensor<5>) -> Tensor<5> {
    #[cfg(feature = "flex")]
    if crate::dispatch::flex_route::on_flex(&x)
        && let Some(y) = by_depth_windows(conv, &x)
    {
        return y;
    }
    conv.forward(x)
}

/// `conv` of `x` as one 2D convolution; `None` where it has groups or a dilation in depth, an
/// uneven SAME padding (Burn's op reports it) or a kernel deeper than the padded input.
#[cfg(feature = "flex")]
fn by_depth_windows(conv: &Conv3d, x: &Tensor<5>) -> Option<Tensor<5>> {
    use burn::module::Param;
    use burn::nn::PaddingConfig2d;
    use burn::nn::conv::Conv2d;

    use crate::dispatch::{conv2d, flex_route};
    use crate::flex::conv::depth_windows::DepthWindows;
    use crate::padding::symmetric_padding_3d;

    let [n, c, d, h, w] = x.dims();
    let padding = symmetric_padding_3d(&conv.padding, [d, h, w], conv.kernel_size, conv.stride)?;
    let ([kd, kh, kw], [sd, sh, sw]) = (conv.kernel_size, conv.stride);
    let padded = d + 2 * padding[0];
    if conv.groups != 1 || conv.dilation[0] != 1 || padded < kd {
        return None;
    }
    let windows = DepthWindows {
        kernel: kd,
        stride: sd,
        padding: padding[0],
    };
    let depths = windows.outputs(d);
    let images = flex_route::depth_windows(x, windows);
    let out = conv.weight.dims()[0];
    let weight = conv
        .weight
        .val()
        .swap_dims(1, 2)
        .reshape([out, kd * c, kh, kw]);
    let plane = Conv2d {
        // The same parameter id: gradients reach the 3D kernel through the reshape.
        weight: Param::initialized(conv.weight.id, weight),
        bias: conv.bias.clone(),
        stride: [sh, sw],
        kernel_size: [kh, kw],
        dilation: [conv.dilation[1], conv.dilation[2]],
        groups: 1,
        padding: PaddingConfig2d::Explicit(padding[1], padding[2], padding[1], padding[2]),
    };
    let y = conv2d(&plane, images);
    let [_, _, oh, ow] = y.dims();
    Some(y.reshape([n, depths, out, oh, ow]).swap_dims(1, 2))
}
