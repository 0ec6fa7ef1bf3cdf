//! [`conv_images`]: a network's first convolution, whose input (the images) needs no gradient,
//! as one batched matrix product.
//!
//! Burn computes a convolution's weight gradient as a second convolution whose kernel is the
//! output gradient; on flex that costs twice the forward pass. Written as a product of the
//! kernel and the image windows, the forward pass and the weight gradient are both plain
//! matrix products, which flex hands to gemm whole (`bench_step` measures both). The windows
//! are not differentiated, so this pays only where the input needs no gradient. On flex the
//! project's own convolution is faster still (it skips an input gradient no one needs: Inception
//! v3's first convolution 65–76 -> 17–22 ms forward for 32 images on a 2-core AMD EPYC Zen 5)
//! and takes the call.

use burn::nn::conv::Conv2d;
use burn::tensor::Tensor;
use burn::tensor::ops::PadMode;

use crate::dispatch::conv2d;
use crate::padding::conv_padding;
use crate::precision::{Precision, current_precision};

/// `conv.forward(images)` for an input that needs no gradient, as `kernel · windows`: the
/// padded images' windows become the columns of a `[in·kh·kw, out_h·out_w]` matrix per image
/// (zero-copy `unfold` views, then one copy), multiplied by the kernel as a `[out, in·kh·kw]`
/// matrix. Same outputs and gradients for the weight and bias as `conv.forward`, to float
/// rounding. Grouped or dilated convolutions go to `conv.forward`; in a low [`Precision`],
/// [`crate::conv2d`] (on flex the windows are then its kernel's, in bf16).
pub fn conv_images(conv: &Conv2d, images: Tensor<4>) -> Tensor<4> {
    if current_precision() != Precision::F32 {
        return conv2d(conv, images);
    }
    // Flex's own kernels skip the input gradient of an input that needs none.
    #[cfg(feature = "flex")]
    if let Some(y) = crate::dispatch::flex_route::conv2d(conv, &images, Precision::F32) {
        return y;
    }
    if conv.groups != 1 || conv.dilation != [1, 1] {
        return conv.forward(images);
    }
    let [n, c, h, w] = images.dims();
    let ([kh, kw], [sh, sw]) = (conv.kernel_size, conv.stride);
    let (rows, cols) = conv_padding(&conv.padding, [h, w], conv.kernel_size, conv.stride);
    let windows = images
        .pad([(0, 0), (0, 0), rows, cols], PadMode::Constant(0.0))
        .unfold::<5, _>(2, kh, sh)
        .unfold::<6, _>(3, kw, sw);
    let [_, _, out_h, out_w, _, _] = windows.dims();
    let columns = windows
        .permute([0, 1, 4, 5, 2, 3])
        .reshape([n, c * kh * kw, out_h * out_w]);
    let weight = conv.weight.val();
    let out = weight.dims()[0];
    let y = weight.reshape([1, out, c * kh * kw]).matmul(columns);
    let y = match &conv.bias {
        Some(bias) => y + bias.val().reshape([1, out, 1]),
        None => y,
    };
    y.reshape([n, out, out_h, out_w])
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::nn::PaddingConfig2d;
    use burn::nn::conv::Conv2dConfig;
    use burn::tensor::{Device, Distribution};
    use towers_testing::compare::rel_diff;

    /// Against Burn's convolution: outputs and the weight and bias gradients of a weighted
    /// sum, for the CIFAR-10 net's conv1 (5x5 SAME), Inception's first conv (3x3/2 VALID), a
    /// SAME stride 2 with padding after only, and explicit padding.
    #[test]
    fn matches_burns_convolution_and_its_gradients() {
        let device = Device::flex().autodiff();
        let cases = [
            (3, 8, [5, 5], [1, 1], PaddingConfig2d::Same, [24, 24]),
            (3, 4, [3, 3], [2, 2], PaddingConfig2d::Valid, [17, 15]),
            (2, 5, [3, 3], [2, 2], PaddingConfig2d::Same, [10, 9]),
            (
                2,
                3,
                [3, 2],
                [1, 2],
                PaddingConfig2d::Explicit(1, 0, 2, 1),
                [7, 8],
            ),
        ];
        for (c_in, c_out, kernel, stride, padding, [h, w]) in cases {
            let conv = Conv2dConfig::new([c_in, c_out], kernel)
                .with_stride(stride)
                .with_padding(padding.clone())
                .init(&device);
            let images = Tensor::<4>::random([3, c_in, h, w], Distribution::Default, &device);
            let want = conv.forward(images.clone());
            let got = conv_images(&conv, images);
            assert_eq!(got.dims(), want.dims(), "{padding:?}");
            let probe = Tensor::random(want.dims(), Distribution::Default, &device);
            let (g_got, g_want) = (
                (got.clone() * probe.clone()).sum().backward(),
                (want.clone() * probe).sum().backward(),
            );
            assert!(rel_diff(got, want) < 1e-5, "{padding:?}");
            let weight = conv.weight.val();
            let bias = conv.bias.as_ref().unwrap().val();
            let grad = |t: &Tensor<4>, g| t.grad(g).unwrap();
            assert!(
                rel_diff(grad(&weight, &g_got), grad(&weight, &g_want)) < 1e-5,
                "{padding:?}"
            );
            assert!(
                rel_diff(bias.grad(&g_got).unwrap(), bias.grad(&g_want).unwrap()) < 1e-5,
                "{padding:?}"
            );
        }
    }
}
