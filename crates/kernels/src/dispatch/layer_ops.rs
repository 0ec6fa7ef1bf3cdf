//! The models' max pooling, convolution and dense layers, ReLU6 (and, through `towers_models::Lrn`, LRN):
//! on f32 flex tensors by burn-towers' own kernels ([`crate::flex`], feature `flex`),
//! everywhere else by Burn's modules. Same outputs and gradients either way, to float rounding
//! (tests below and in `layers/lrn.rs`). Convolutions and dense layers compute their products in this
//! thread's [`Precision`] (see [`crate::with_precision`]).

use burn::module::Param;
use burn::nn::conv::{Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d};
use burn::nn::pool::{
    AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AvgPool1d, AvgPool2d, MaxPool1d,
    MaxPool2d,
};
use burn::nn::{Dropout, GroupNorm, InstanceNorm, Linear, PRelu, RmsNorm};
use burn::tensor::activation::relu;
use burn::tensor::module;
use burn::tensor::ops::ConvOptions;
use burn::tensor::{AsIndex, DType, Tensor};

#[cfg(feature = "gpu")]
use crate::conv_gradient::{ConvShape, conv2d_by_product};
use crate::cubecl_device::on_cubecl;
use crate::dispatch::channel_bias::{add_channel_bias, bias_laid_out};
#[cfg(feature = "flex")]
use crate::dispatch::flex_route::{self, RowNorm};
use crate::padding::{conv_padding, row_padding};
use crate::precision::{Precision, current_precision};

/// `$flex` (a `flex_route` call: `Some` where the flex kernels take the op) with the feature
/// `flex`, `$burns` (Burn's op) without it or where the kernels give `None`.
macro_rules! flex_or {
    ($flex:expr, $burns:expr) => {{
        #[cfg(feature = "flex")]
        let routed = $flex;
        #[cfg(not(feature = "flex"))]
        let routed = None;
        match routed {
            Some(y) => y,
            None => $burns,
        }
    }};
}

/// `pool.forward(x)`.
pub fn max_pool2d(pool: &MaxPool2d, x: Tensor<4>) -> Tensor<4> {
    flex_or!(flex_route::max_pool2d(pool, &x), pool.forward(x))
}

/// `pool.forward(x)`.
pub fn avg_pool2d(pool: &AvgPool2d, x: Tensor<4>) -> Tensor<4> {
    flex_or!(flex_route::avg_pool2d(pool, &x), pool.forward(x))
}

/// `pool.forward(x)`.
pub fn adaptive_avg_pool2d(pool: &AdaptiveAvgPool2d, x: Tensor<4>) -> Tensor<4> {
    flex_or!(flex_route::adaptive_avg_pool2d(pool, &x), pool.forward(x))
}

/// `pool.forward(x)`: on flex as [`adaptive_avg_pool2d`] of each depth's image, then of the
/// depths; elsewhere Burn's.
pub fn adaptive_avg_pool3d(pool: &AdaptiveAvgPool3d, x: Tensor<5>) -> Tensor<5> {
    flex_or!(flex_route::adaptive_avg_pool3d(pool, &x), pool.forward(x))
}

/// `pool.forward(x)`: on flex as [`max_pool2d`] of a one-row image, elsewhere Burn's.
pub fn max_pool1d(pool: &MaxPool1d, x: Tensor<3>) -> Tensor<3> {
    flex_or!(flex_route::max_pool1d(pool, &x), pool.forward(x))
}

/// `pool.forward(x)`: on flex as [`avg_pool2d`] of a one-row image, elsewhere Burn's.
pub fn avg_pool1d(pool: &AvgPool1d, x: Tensor<3>) -> Tensor<3> {
    flex_or!(flex_route::avg_pool1d(pool, &x), pool.forward(x))
}

/// `pool.forward(x)`: on flex as [`adaptive_avg_pool2d`] of a one-row image, elsewhere Burn's.
pub fn adaptive_avg_pool1d(pool: &AdaptiveAvgPool1d, x: Tensor<3>) -> Tensor<3> {
    flex_or!(flex_route::adaptive_avg_pool1d(pool, &x), pool.forward(x))
}

/// `conv.forward(x)`, its products in this thread's [`Precision`]. `x` is f32, or bf16 as
/// `towers_models::OffsetBatchNorm::forward_relu_into` hands it to a convolution.
pub fn conv2d(conv: &Conv2d, x: Tensor<4>) -> Tensor<4> {
    let precision = current_precision();
    #[cfg(feature = "flex")]
    if x.dtype() == DType::BF16
        && let Some(y) = flex_route::conv2d(conv, &x, precision)
    {
        return y;
    }
    // Every other path reads f32.
    let x = widened(x);
    if let Some(y) = whole_input_conv2d(conv, &x) {
        return y;
    }
    #[cfg(feature = "flex")]
    if let Some(y) = flex_route::conv2d(conv, &x, precision) {
        return y;
    }
    flex_or!(
        flex_route::depthwise_conv2d(conv, &x),
        burn_conv2d(conv, x, precision.dtype())
    )
}

/// `conv.forward(x)` as [`conv2d`] of a one-row image by `[1, k]` kernels: on flex the
/// kernels take it (2.2-3.1x Burn's 1D convolution there, forward and backward:
/// bench/README.md, "Drop-in layers"), elsewhere Burn's 2D convolution. Its products in this
/// thread's [`Precision`].
pub fn conv1d(conv: &Conv1d, x: Tensor<3>) -> Tensor<3> {
    let row = Conv2d {
        weight: as_row(&conv.weight),
        bias: conv.bias.clone(),
        stride: [1, conv.stride],
        kernel_size: [1, conv.kernel_size],
        dilation: [1, conv.dilation],
        groups: conv.groups,
        padding: row_padding(&conv.padding),
    };
    conv2d(&row, x.unsqueeze_dim::<4>(2)).squeeze_dim::<3>(2)
}

/// A 1D layer's `[a, b, k]` kernels as a one-row 2D layer's `[a, b, 1, k]`: a view of the same
/// values (`Param::initialized` marks nothing as a new leaf, so gradients reach the 1D layer's
/// weight through the reshape).
fn as_row(weight: &Param<Tensor<3>>) -> Param<Tensor<4>> {
    Param::initialized(weight.id, weight.val().unsqueeze_dim::<4>(2))
}

/// `conv.forward(x)`, its products in this thread's [`Precision`] on the flex kernels (f32
/// or bf16; Burn's op, in f32, elsewhere).
pub fn conv_transpose2d(conv: &ConvTranspose2d, x: Tensor<4>) -> Tensor<4> {
    flex_or!(
        flex_route::conv_transpose2d(conv, &x, current_precision()),
        conv.forward(x)
    )
}

/// `conv.forward(x)` as [`conv_transpose2d`] of a one-row image by `[1, k]` kernels: on flex
/// the kernels take it, elsewhere Burn's 2D transposed convolution. Its products in this
/// thread's [`Precision`].
pub fn conv_transpose1d(conv: &ConvTranspose1d, x: Tensor<3>) -> Tensor<3> {
    let row = ConvTranspose2d {
        weight: as_row(&conv.weight),
        bias: conv.bias.clone(),
        stride: [1, conv.stride],
        kernel_size: [1, conv.kernel_size],
        dilation: [1, conv.dilation],
        groups: conv.groups,
        padding: [0, conv.padding],
        padding_out: [0, conv.padding_out],
        channels: conv.channels,
    };
    conv_transpose2d(&row, x.unsqueeze_dim::<4>(2)).squeeze_dim::<3>(2)
}

/// Whether `conv` reads an input of `dims` rounded to bf16 as it is, in this thread's
/// precision (see `towers_models::OffsetBatchNorm::forward_relu_into`); never off flex.
pub fn reads_rounded(conv: &Conv2d, dims: [usize; 4]) -> bool {
    #[cfg(feature = "flex")]
    return flex_route::reads_rounded(conv, dims);
    #[cfg(not(feature = "flex"))]
    return {
        let _ = (conv, dims);
        false
    };
}

/// `relu(conv.forward(x))`, its products in this thread's [`Precision`]; on the flex kernels
/// the bias and ReLU are applied in the convolution's own pass.
pub fn conv2d_relu(conv: &Conv2d, x: Tensor<4>) -> Tensor<4> {
    flex_or!(
        flex_route::conv2d_relu(conv, &x, current_precision()),
        relu(conv2d(conv, x))
    )
}

/// `max_pool2d(pool, conv2d_relu(conv, x))`. On Burn's CubeCL devices the pool is taken before
/// the bias and the ReLU: both never decrease a value, so a window's largest output is the
/// output at its largest input, the same value, while the bias, the ReLU and their gradients
/// touch only the pooled places (a quarter of them for a 3x3 pool of stride 2) and, on a fused
/// GPU, join the element-wise ops after the pool in one kernel (the CIFAR-10 step on lavapipe:
/// 72 launches against 74, unfused 139 either way; bench/HISTORY.md, "The pool before the
/// bias").
/// Burn's max pool pads with `-inf`, never a value, so padded windows agree too. Gradients can
/// differ only where a window's two largest inputs round to the same sum with the bias: the
/// pool then routes the gradient to the larger input rather than the first.
pub fn conv2d_relu_max_pool2d(conv: &Conv2d, pool: &MaxPool2d, x: Tensor<4>) -> Tensor<4> {
    // Elsewhere each op is no launch of its own, and flex's kernels take the bias and ReLU in
    // the convolution's pass.
    if !on_cubecl(&x.device()) {
        return max_pool2d(pool, conv2d_relu(conv, x));
    }
    let x = widened(x);
    if let Some(y) = whole_input_conv2d(conv, &x) {
        return max_pool2d(pool, relu(y));
    }
    let product = burn_conv2d_product(conv, x, current_precision().dtype());
    relu(plus_bias(conv, max_pool2d(pool, product)))
}

/// `x` in f32: a bf16 input widened, exactly.
fn widened(x: Tensor<4>) -> Tensor<4> {
    match x.dtype() {
        DType::BF16 => x.cast(DType::F32),
        _ => x,
    }
}

/// `min(max(x, 0), 6)`, Burn's `relu6`, in one pass forward and backward on flex.
pub fn relu6<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    flex_or!(flex_route::relu6(&x), burn::tensor::activation::relu6(x))
}

/// `x · sigmoid(x)`, Burn's `silu` (Keras's swish), in one pass forward and backward on flex.
pub fn silu<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    flex_or!(flex_route::silu(&x), burn::tensor::activation::silu(x))
}

/// `1 / (1 + e^-x)`, Burn's `sigmoid`, in one vectorized pass forward and backward on flex
/// (Burn's: scalar calls on one thread).
pub fn sigmoid<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    flex_or!(
        flex_route::sigmoid(&x),
        burn::tensor::activation::sigmoid(x)
    )
}

/// `tanh(x)`, Burn's `tanh`, in one vectorized pass forward and backward on flex (Burn's:
/// scalar calls on one thread).
pub fn tanh<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    flex_or!(flex_route::tanh(&x), burn::tensor::activation::tanh(x))
}

/// `layer.forward(x)`, Burn's PReLU (`x` where `x ≥ 0`, a learned slope per channel, or one,
/// below), in one pass forward and one backward that also sums the slopes' gradient on flex
/// (Burn's: a comparison, a product and a masked select, each way).
pub fn prelu<const D: usize>(layer: &PRelu, x: Tensor<D>) -> Tensor<D> {
    flex_or!(flex_route::prelu(layer, &x), layer.forward(x))
}

/// `x · tanh(softplus(x))`, Burn's `mish`, in one vectorized pass forward and backward on
/// flex (Burn's: a thresholded softplus, a tanh of scalar calls and a product, each way).
pub fn mish<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    flex_or!(flex_route::mish(&x), burn::tensor::activation::mish(x))
}

/// `x` where `x ≥ 0`, `negative_slope · x` below, Burn's `leaky_relu`, in one pass forward and
/// backward on flex (Burn's: a comparison and a masked product, each way).
pub fn leaky_relu<const D: usize>(x: Tensor<D>, negative_slope: f64) -> Tensor<D> {
    flex_or!(
        flex_route::leaky_relu(&x, negative_slope),
        burn::tensor::activation::leaky_relu(x, negative_slope)
    )
}

/// `dropout.forward(x)`: in training, on an autodiff device, each value kept with probability
/// `1 - prob` and scaled by `1 / (1 - prob)`. On flex in one pass each way (Burn's draws a
/// Bernoulli tensor on one thread and multiplies twice each way), the mask a hash of a seed
/// from the device's generator and each value's index, drawn again backward rather than kept;
/// elsewhere Burn's. The masks differ from Burn's draws; `Device::seed` repeats them as it
/// repeats Burn's.
pub fn dropout<const D: usize>(dropout: &Dropout, x: Tensor<D>) -> Tensor<D> {
    flex_or!(flex_route::dropout(dropout, &x), dropout.forward(x))
}

/// `norm.forward(x)`, Burn's group norm, in two passes forward and two backward on flex for
/// an affine one (Burn's composes a dozen ops).
pub fn group_norm<const D: usize>(norm: &GroupNorm, x: Tensor<D>) -> Tensor<D> {
    flex_or!(flex_route::group_norm(norm, &x), norm.forward(x))
}

/// `norm.forward(x)`, Burn's instance norm (a group norm of a channel a group): an affine one
/// on the group norm's kernel on flex (Burn's composes a dozen ops).
pub fn instance_norm<const D: usize>(norm: &InstanceNorm, x: Tensor<D>) -> Tensor<D> {
    flex_or!(flex_route::instance_norm(norm, &x), norm.forward(x))
}

/// Burn's `LayerNorm::forward`: `x` normalized over its last dimension, scaled by `gamma` and
/// offset by `beta`, in two passes forward and two backward on flex (Burn's backward composes a
/// dozen ops); elsewhere Burn's op, an f16 `x` widened to f32 for it as Burn's layer does.
pub fn layer_norm<const D: usize>(
    x: Tensor<D>,
    gamma: Tensor<1>,
    beta: Option<Tensor<1>>,
    epsilon: f64,
) -> Tensor<D> {
    #[cfg(feature = "flex")]
    if let Some(y) = flex_route::layer_norm(&x, &gamma, beta.as_ref(), epsilon, RowNorm::Layer) {
        return y;
    }
    match x.dtype() {
        DType::F16 => {
            let beta = beta.map(|b| b.cast(DType::F32));
            let y = module::layer_norm(x.cast(DType::F32), gamma.cast(DType::F32), beta, epsilon);
            y.cast(DType::F16)
        }
        _ => module::layer_norm(x, gamma, beta, epsilon),
    }
}

/// `norm.forward(x)`, Burn's RMS norm (LLaMA's): `x` over the root mean square of its last
/// dimension, scaled by `gamma`, in two passes forward and two backward on flex (the layer
/// norm's, uncentered; Burn's composes half a dozen ops each way).
pub fn rms_norm<const D: usize>(norm: &RmsNorm, x: Tensor<D>) -> Tensor<D> {
    #[cfg(feature = "flex")]
    if let Some(y) = flex_route::layer_norm(&x, &norm.gamma.val(), None, norm.epsilon, RowNorm::Rms)
    {
        return y;
    }
    norm.forward(x)
}

/// `x · Φ(x)`, Burn's `gelu` (`Φ` the standard normal's distribution function), in one
/// vectorized pass forward and backward on flex (Burn's calls a scalar `erf` on one thread).
pub fn gelu<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    flex_or!(
        flex_route::gelu(&x, false),
        burn::tensor::activation::gelu(x)
    )
}

/// Burn's `softmax` along `dim` (negative counts from the end), forward in three passes over a
/// row and backward in two on flex (Burn's autodiff composes five ops each way).
pub fn softmax<const D: usize>(x: Tensor<D>, dim: impl AsIndex) -> Tensor<D> {
    flex_or!(
        flex_route::softmax(&x, dim.expect_dim_index(D), false),
        burn::tensor::activation::softmax(x, dim)
    )
}

/// Burn's `quiet_softmax` along `dim`, `e^x / (1 + Σ e^x)`, as [`softmax`] is on flex.
pub fn quiet_softmax<const D: usize>(x: Tensor<D>, dim: impl AsIndex) -> Tensor<D> {
    flex_or!(
        flex_route::softmax(&x, dim.expect_dim_index(D), true),
        burn::tensor::activation::quiet_softmax(x, dim)
    )
}

/// GELU's tanh approximation, Burn's `gelu_approximate`, in one pass forward and backward on
/// flex (Burn's is five ops each way).
pub fn gelu_approximate<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    flex_or!(
        flex_route::gelu(&x, true),
        burn::tensor::activation::gelu_approximate(x)
    )
}

/// `x · relu6(x + 3) / 6`, Burn's `hard_swish` (torchvision's `Hardswish`), in one pass
/// forward and backward on flex.
pub fn hard_swish<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    flex_or!(
        flex_route::hard_swish(&x),
        burn::tensor::activation::hard_swish(x)
    )
}

/// `relu6(x + 3) / 6`, Burn's `hard_sigmoid(x, 1/6, 1/2)` (torchvision's `Hardsigmoid`), in
/// one pass forward and backward on flex.
pub fn hard_sigmoid<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    flex_or!(
        flex_route::hard_sigmoid(&x),
        burn::tensor::activation::hard_sigmoid(x, 1.0 / 6.0, 0.5)
    )
}

/// `linear.forward(x)`, its product in this thread's [`Precision`]: in a low one, `x` and the
/// weight cast down, the product cast back to f32, the bias added in f32.
pub fn linear<const D: usize>(linear: &Linear, x: Tensor<D>) -> Tensor<D> {
    let y = product(x, linear.weight.val());
    match &linear.bias {
        Some(bias) => add_channel_bias(y, bias.val(), D - 1),
        None => y,
    }
}

/// `relu(linear(linear, x))`. The bias is laid out (a view) before the product rather than
/// after it, so that on a fused GPU the product, the bias and the ReLU run as one kernel:
/// burn-fusion's matmul fuser takes the element-wise ops that follow a product until another
/// op comes between them, as the bias's reshape did (the CIFAR-10 step on lavapipe: 70 launches
/// against 72; bench/HISTORY.md, "The pool before the bias"). [`linear`] keeps the bias after
/// the product: for logits, whose addition of the bias does best in the softmax's reduction
/// kernel (that step took 76 launches with it in the product's).
pub fn linear_relu<const D: usize>(linear: &Linear, x: Tensor<D>) -> Tensor<D> {
    let mut dims = x.dims();
    dims[D - 1] = linear.weight.dims()[1];
    let bias = (linear.bias.as_ref()).map(|bias| bias_laid_out(bias.val(), dims, D - 1));
    let y = product(x, linear.weight.val());
    relu(match bias {
        Some(bias) => y + bias,
        None => y,
    })
}

/// `x · weight` over `x`'s last dimension, in this thread's [`Precision`].
pub(super) fn product<const D: usize>(x: Tensor<D>, weight: Tensor<2>) -> Tensor<D> {
    let dtype = match current_precision() {
        Precision::F32 => return f32_product(x, weight),
        low => low.dtype(),
    };
    flex_or!(
        flex_route::dense_product(&x, &weight, dtype),
        module::linear(x.cast(dtype), weight.cast(dtype), None).cast(DType::F32)
    )
}

/// `x · weight` in f32. On flex by the dense product's kernel, `x`'s leading dimensions folded
/// into its rows first: Burn keeps a batch whose rows fill its GPU tiles batched (burn-std's
/// `MatmulTransformPolicy`), and on flex that is one `gemm` call per batch, each packing the
/// weight again (a transformer's 768→3072 layer on `[8, 256, 768]`, forward and backward, took
/// 180.7 ms so and the same products as three `gemm` calls 153.6: bench/HISTORY.md, "The dense
/// layer's products, measured apart"); and flex's product copies its output once more.
fn f32_product<const D: usize>(x: Tensor<D>, weight: Tensor<2>) -> Tensor<D> {
    flex_or!(
        flex_route::dense_product(&x, &weight, DType::F32),
        module::linear(x, weight, None)
    )
}

/// A convolution whose kernel covers its whole input, unpadded (one output place: Inception
/// v3's auxiliary head, a 5x5 kernel on 5x5 maps), as the dense layer it is: the images
/// flattened times the kernel flattened, one product for the batch. The convolution kernels
/// would lay out a kernel of millions of values to compute one place per image (13 ms forward
/// and 20 backward per 32 images there, against about 2 for the product). `None` for any
/// other convolution.
fn whole_input_conv2d(conv: &Conv2d, x: &Tensor<4>) -> Option<Tensor<4>> {
    let [n, c, h, w] = x.dims();
    let (rows, cols) = conv_padding(&conv.padding, [h, w], conv.kernel_size, conv.stride);
    let unpadded = rows == (0, 0) && cols == (0, 0);
    let plain = conv.groups == 1 && conv.dilation == [1, 1];
    if conv.kernel_size != [h, w] || !unpadded || !plain || n * c * h * w == 0 {
        return None;
    }
    let out = conv.weight.dims()[0];
    let weight = conv.weight.val().reshape([out, c * h * w]).transpose();
    let y = product(x.clone().reshape([n, c * h * w]), weight);
    let y = match &conv.bias {
        Some(bias) => y + bias.val().unsqueeze(),
        None => y,
    };
    Some(y.reshape([n, out, 1, 1]))
}

/// `conv.forward(x)` by Burn's convolution, its products in `dtype` (`x` and the kernel cast
/// to it, the result back to f32), the bias added in f32 by [`add_channel_bias`], whose
/// gradient stays right on wgpu where Burn's own is not (see `channel_bias.rs`). In f32 on
/// Burn's CubeCL devices, without groups or dilation, its weight gradient is one product
/// (`conv_gradient`).
fn burn_conv2d(conv: &Conv2d, x: Tensor<4>, dtype: DType) -> Tensor<4> {
    plus_bias(conv, burn_conv2d_product(conv, x, dtype))
}

/// `y` (`[n, out, h, w]`) with `conv`'s bias added by [`add_channel_bias`], where it has one.
fn plus_bias(conv: &Conv2d, y: Tensor<4>) -> Tensor<4> {
    match &conv.bias {
        Some(bias) => add_channel_bias(y, bias.val(), 1),
        None => y,
    }
}

/// [`burn_conv2d`] without the bias.
fn burn_conv2d_product(conv: &Conv2d, x: Tensor<4>, dtype: DType) -> Tensor<4> {
    let [_, _, h, w] = x.dims();
    let padding = conv_padding(&conv.padding, [h, w], conv.kernel_size, conv.stride);
    let weight = conv.weight.val();
    #[cfg(feature = "gpu")]
    let by_product = (dtype == DType::F32 && conv.groups == 1 && conv.dilation == [1, 1])
        .then(|| {
            let shape = ConvShape {
                stride: conv.stride,
                padding,
            };
            conv2d_by_product(&x, &weight, shape)
        })
        .flatten();
    #[cfg(not(feature = "gpu"))]
    let by_product = None;
    let options =
        ConvOptions::new_with_padding(conv.stride, padding.into(), conv.dilation, conv.groups);
    match (by_product, dtype) {
        (Some(y), _) => y,
        (None, DType::F32) => module::conv2d(x, weight, None, options),
        (None, low) => {
            module::conv2d(x.cast(low), weight.cast(low), None, options).cast(DType::F32)
        }
    }
}

#[cfg(all(test, feature = "flex"))]
mod tests {
    use super::*;
    use burn::nn::PaddingConfig2d;
    use burn::nn::conv::Conv2dConfig;
    use burn::nn::pool::{AvgPool2dConfig, MaxPool2dConfig};
    use burn::tensor::{Device, Distribution};
    use towers_testing::compare::rel_diff;

    /// Against Burn's pooling, bit for bit: the CIFAR-10 net's pools (ceil mode, the last
    /// window cut short; on AVX-512 by the row-by-row pool), Inception's VALID 3x3/2 on an odd
    /// size, a stride wider than the window, stride 2 on an odd width, with and without
    /// autodiff; and the input gradient of a weighted sum. The inputs take three values, so
    /// windows hold ties.
    #[test]
    fn max_pooling_matches_burns_outputs_and_gradients() {
        let cases = [
            ([3, 3], [2, 2], true, [24, 24]),
            ([3, 3], [2, 2], true, [12, 12]),
            ([3, 3], [2, 2], false, [15, 17]),
            ([2, 2], [3, 3], true, [8, 10]),
            // Stride 2 on an odd width, the last window cut short: the split into even and odd
            // columns with a column left over.
            ([2, 2], [2, 2], true, [9, 11]),
            // Every window whole: on AVX-512, Inception's row-by-row pool (a last block of
            // 16 outputs partly past the row, ceil mode that adds no window).
            ([3, 3], [2, 2], false, [35, 35]),
            ([3, 3], [2, 2], true, [17, 17]),
            ([3, 3], [2, 2], false, [7, 71]),
        ];
        for (kernel, stride, ceil_mode, [h, w]) in cases {
            let pool = MaxPool2dConfig::new(kernel)
                .with_strides(stride)
                .with_ceil_mode(ceil_mode)
                .init();
            let device = Device::flex().autodiff();
            let x = Tensor::<4>::random([3, 5, h, w], Distribution::Default, &device);
            // Few distinct values: ties, which must go to the first maximum, as in Burn.
            let x = (x * 3.0).floor().require_grad();
            assert_pool_matches_burn(&pool, &x);

            let plain = x.inner();
            let got = max_pool2d(&pool, plain.clone());
            got.to_data()
                .assert_eq(&pool.forward(plain).to_data(), true);
        }
    }

    /// Windows of equal -inf values (a ReLU-less net's padding, a masked map) send their
    /// gradient to the first place inside the window, as Burn's pooling does, in windows cut
    /// short by ceil mode too: the scratch past a row, also -inf, never wins the tie.
    #[test]
    fn max_pooling_of_minus_infinity_matches_burn() {
        for (ceil_mode, [h, w]) in [(true, [24, 24]), (true, [12, 38]), (false, [9, 37])] {
            let pool = MaxPool2dConfig::new([3, 3])
                .with_strides([2, 2])
                .with_ceil_mode(ceil_mode)
                .init();
            let device = Device::flex().autodiff();
            let len = 2 * 3 * h * w;
            // Mostly -inf, a finite value in every seventh place.
            let values: Vec<f32> = (0..len)
                .map(|i| {
                    if i % 7 == 3 {
                        (i % 5) as f32
                    } else {
                        f32::NEG_INFINITY
                    }
                })
                .collect();
            let data = burn::tensor::TensorData::new(values, [2, 3, h, w]);
            let x = Tensor::<4>::from_data(data, &device).require_grad();
            assert_pool_matches_burn(&pool, &x);
        }
    }

    /// Padded pools against Burn's, bit for bit, outputs and gradients: ResNet's stem (3x3/2
    /// padded by 1, on AVX-512 by the row-by-row pool of the framed plane), ceil mode with a
    /// last window cut short, a 2x2 padded by 1, a 5x5 by 2, SAME 3x3/1; in planes of few
    /// values (ties) and of mostly -inf (windows whose maximum is the frame's -inf as much as
    /// the plane's).
    #[test]
    fn padded_max_pooling_matches_burn() {
        let cases = [
            ([3, 3], [2, 2], [1, 1], false, [20, 20]),
            ([3, 3], [2, 2], [1, 1], true, [15, 17]),
            ([3, 3], [2, 2], [1, 1], true, [16, 16]),
            ([2, 2], [2, 2], [1, 1], false, [9, 12]),
            ([5, 5], [2, 3], [2, 2], true, [13, 11]),
        ];
        let device = Device::flex().autodiff();
        for (kernel, stride, [ph, pw], ceil_mode, [h, w]) in cases {
            let pool = MaxPool2dConfig::new(kernel)
                .with_strides(stride)
                .with_padding(PaddingConfig2d::Explicit(ph, pw, ph, pw))
                .with_ceil_mode(ceil_mode)
                .init();
            let x = Tensor::<4>::random([3, 5, h, w], Distribution::Default, &device);
            assert_pool_matches_burn(&pool, &(x * 3.0).floor().require_grad());
            assert_pool_matches_burn(&pool, &mostly_minus_infinity([2, 3, h, w], &device));
        }
        let same = MaxPool2dConfig::new([3, 3])
            .with_strides([1, 1])
            .with_padding(PaddingConfig2d::Same)
            .init();
        assert_pool_matches_burn(&same, &mostly_minus_infinity([2, 3, 9, 10], &device));
    }

    /// Padding Burn's pooling treats otherwise stays Burn's: SAME on an even window (one more
    /// after than before), padding over half the window, and ceil mode where Burn drops a
    /// last window that starts in the padding (2x2/2 padded by 1 on 9 rows: 5 windows, not 6).
    #[test]
    fn max_pools_padded_unlike_the_kernels_stay_burns() {
        let uneven = MaxPool2dConfig::new([2, 2])
            .with_strides([1, 1])
            .with_padding(PaddingConfig2d::Same);
        let wide = MaxPool2dConfig::new([3, 3]).with_padding(PaddingConfig2d::Explicit(2, 2, 2, 2));
        let dropped = MaxPool2dConfig::new([2, 2])
            .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
            .with_ceil_mode(true);
        let x = Tensor::<4>::zeros([1, 2, 9, 8], &Device::flex());
        assert_eq!(dropped.init().forward(x.clone()).dims()[2], 5);
        for pool in [uneven, wide, dropped] {
            assert!(flex_route::max_pool2d(&pool.init(), &x).is_none());
        }
    }

    /// A tracked `[n, c, h, w]` of -inf but for a finite value in every seventh place.
    fn mostly_minus_infinity(dims: [usize; 4], device: &Device) -> Tensor<4> {
        let values: Vec<f32> = (0..dims.iter().product::<usize>())
            .map(|i| match i % 7 {
                3 => (i % 5) as f32,
                _ => f32::NEG_INFINITY,
            })
            .collect();
        let data = burn::tensor::TensorData::new(values, dims);
        Tensor::<4>::from_data(data, device).require_grad()
    }

    /// Our pooling of `x` (tracked) against Burn's, bit for bit: the outputs, and the input
    /// gradients of a random weighting of them.
    fn assert_pool_matches_burn(pool: &MaxPool2d, x: &Tensor<4>) {
        let got = flex_route::max_pool2d(pool, x).expect("on the flex kernels");
        let want = pool.forward(x.clone());
        got.to_data().assert_eq(&want.to_data(), true);
        let probe = Tensor::random(want.dims(), Distribution::Default, &x.device());
        let g_got = (got * probe.clone()).sum().backward();
        let g_want = (want * probe).sum().backward();
        let (x_got, x_want) = (x.grad(&g_got).unwrap(), x.grad(&g_want).unwrap());
        x_got.to_data().assert_eq(&x_want.to_data(), true);
    }

    /// A NaN in a window makes that window's output NaN, as in Burn's pooling, and leaves the
    /// other outputs alone.
    #[test]
    fn max_pooling_propagates_nan_like_burn() {
        // Ceil mode with a partial last window, and whole windows.
        for (ceil_mode, [h, w]) in [(true, [8, 8]), (false, [9, 37])] {
            nan_propagates_like_burn(ceil_mode, [h, w]);
        }
    }

    fn nan_propagates_like_burn(ceil_mode: bool, [h, w]: [usize; 2]) {
        let pool = MaxPool2dConfig::new([3, 3])
            .with_strides([2, 2])
            .with_ceil_mode(ceil_mode)
            .init();
        let device = Device::flex();
        let mut values: Vec<f32> = (0..2 * 3 * h * w).map(|i| (i % 13) as f32).collect();
        for at in [0, 27, 63, 100, 200, 383] {
            values[at] = f32::NAN;
        }
        let x =
            Tensor::<4>::from_data(burn::tensor::TensorData::new(values, [2, 3, h, w]), &device);
        let nan_mask = |t: Tensor<4>| -> Vec<bool> {
            let v: Vec<f32> = t.into_data().try_to_vec().unwrap();
            v.iter().map(|v| v.is_nan()).collect()
        };
        let got = flex_route::max_pool2d(&pool, &x).expect("on the flex kernels");
        let want = pool.forward(x);
        assert_eq!(nan_mask(got.clone()), nan_mask(want.clone()));
        assert!(nan_mask(got.clone()).iter().any(|&n| n));
        let finite = |t: Tensor<4>| -> Vec<f32> {
            let v: Vec<f32> = t.into_data().try_to_vec().unwrap();
            v.into_iter().filter(|v| !v.is_nan()).collect()
        };
        assert_eq!(finite(got), finite(want));
    }

    /// Against Burn's convolution: outputs and the gradients of input, weight and bias for the
    /// CIFAR-10 net's conv2 (5x5 SAME, the input gradient as a flipped convolution), a 1x7
    /// SAME, a 3x3 VALID and a 1x1 (stride 1; the 1x1's windows are the image itself), and a
    /// 3x3/2 VALID (the input gradient by windows added back), strided windows in padding, a
    /// 1x1 padded as wide as itself, a 5x5 over 64 channels (the weight gradient's windows in
    /// two passes), two on narrow images, two by Winograd's F(2x2, 3x3), two by its F(3, 7)
    /// and two by its F(2x2, 5x5), with batches that do not split evenly across threads.
    #[test]
    fn convolution_matches_burns_outputs_and_gradients() {
        let winograd_5x5 = 30 * rayon::current_num_threads();
        let cases = [
            (4, 6, [5, 5], [1, 1], PaddingConfig2d::Same, [12, 12], 5),
            (3, 4, [1, 7], [1, 1], PaddingConfig2d::Same, [9, 11], 3),
            (3, 2, [3, 3], [1, 1], PaddingConfig2d::Valid, [8, 7], 1),
            (5, 3, [1, 1], [1, 1], PaddingConfig2d::Valid, [6, 5], 3),
            (2, 3, [3, 3], [2, 2], PaddingConfig2d::Valid, [11, 9], 4),
            // Uneven padding, its extra row and column added as zeros first: TF's SAME at
            // stride 2 on an even side (one after, none before) and a 2x2 SAME at stride 1.
            (3, 8, [3, 3], [2, 2], PaddingConfig2d::Same, [16, 14], 3),
            (4, 5, [2, 2], [1, 1], PaddingConfig2d::Same, [9, 11], 2),
            // Strided windows with padding: columns past both edges read as zeros.
            (
                3,
                4,
                [3, 3],
                [2, 2],
                PaddingConfig2d::Explicit(1, 1, 1, 1),
                [10, 9],
                2,
            ),
            (
                2,
                3,
                [5, 5],
                [3, 3],
                PaddingConfig2d::Explicit(2, 2, 2, 2),
                [11, 13],
                2,
            ),
            // Padding as wide as the kernel: the input gradient by windows added back, at
            // stride 1.
            (
                2,
                3,
                [1, 1],
                [1, 1],
                PaddingConfig2d::Explicit(1, 1, 1, 1),
                [5, 4],
                2,
            ),
            // Windows too many for one pass: the weight gradient takes them 16 rows at a time
            // (24 rows of 20 places, 1,600 taps: 768 Ki values against 512 Ki).
            (64, 8, [5, 5], [1, 1], PaddingConfig2d::Same, [24, 20], 2),
            // Narrow images, outputs in whole vectors: on AVX-512, vectorized along the
            // outputs (64 + 16 of them in the second).
            (16, 32, [1, 7], [1, 1], PaddingConfig2d::Same, [9, 11], 2),
            (8, 80, [3, 3], [1, 1], PaddingConfig2d::Same, [5, 6], 3),
            // 3x3 at stride 1 with channels and tiles enough for Winograd's F(2x2, 3x3),
            // forward and both gradients: SAME with an odd count of output rows, VALID with
            // output rows of odd length.
            (64, 64, [3, 3], [1, 1], PaddingConfig2d::Same, [17, 16], 3),
            (72, 64, [3, 3], [1, 1], PaddingConfig2d::Valid, [18, 19], 2),
            // 1x7 and 7x1 at stride 1 by Winograd's F(3, 7), on Inception's 17x17 maps and on
            // a 17x15 one (a last tile of two outputs, planes not square).
            (64, 64, [1, 7], [1, 1], PaddingConfig2d::Same, [17, 17], 3),
            (64, 80, [7, 1], [1, 1], PaddingConfig2d::Same, [17, 15], 2),
            // 5x5 at stride 1 by Winograd's F(2x2, 5x5), 16 images to the vector: a batch that
            // leaves each thread a whole group and one of 14 (the CIFAR-10 net's conv2 on fewer
            // channels), VALID with output rows of odd length, and a batch too small to fill
            // the groups (the direct kernels).
            (
                40,
                48,
                [5, 5],
                [1, 1],
                PaddingConfig2d::Same,
                [12, 12],
                winograd_5x5,
            ),
            (
                48,
                32,
                [5, 5],
                [1, 1],
                PaddingConfig2d::Valid,
                [13, 11],
                winograd_5x5,
            ),
            (48, 32, [5, 5], [1, 1], PaddingConfig2d::Valid, [13, 11], 3),
            // On AVX-512, the direct kernels' outputs stored straight from the grid: depth in
            // two chunks (the second adds to what the first stored), a last block of 4 output
            // channels, blocks of places across row ends and past the last row.
            (80, 20, [5, 5], [1, 1], PaddingConfig2d::Same, [9, 13], 2),
        ];
        for (c_in, c_out, kernel, stride, padding, [h, w], n) in cases {
            let device = Device::flex().autodiff();
            let conv = Conv2dConfig::new([c_in, c_out], kernel)
                .with_stride(stride)
                .with_padding(padding.clone())
                .init(&device);
            let x =
                Tensor::<4>::random([n, c_in, h, w], Distribution::Default, &device).require_grad();
            let got = flex_route::conv2d(&conv, &x, Precision::F32).expect("on the flex kernels");
            let case = format!("{kernel:?} {padding:?}");
            let diffs = differences_from_burns(&conv, &x, got, &case);
            assert!(diffs.iter().all(|&d| d < 1e-5), "{case}: {diffs:?}");
        }
    }

    /// A route's output `got` for `x` through `conv` (with a bias) against Burn's
    /// `conv.forward(x)`, the same shape: the relative differences of the outputs, and of the
    /// gradients of the input, the kernel and the bias under a random weighting of them.
    fn differences_from_burns(
        conv: &Conv2d,
        x: &Tensor<4>,
        got: Tensor<4>,
        case: &str,
    ) -> [f32; 4] {
        let want = conv.forward(x.clone());
        assert_eq!(got.dims(), want.dims(), "{case}");
        let probe = Tensor::random(want.dims(), Distribution::Default, &x.device());
        let g_got = (got.clone() * probe.clone()).sum().backward();
        let g_want = (want.clone() * probe).sum().backward();
        let weight = conv.weight.val();
        let bias = conv.bias.as_ref().unwrap().val();
        [
            rel_diff(got, want),
            rel_diff(x.grad(&g_got).unwrap(), x.grad(&g_want).unwrap()),
            rel_diff(weight.grad(&g_got).unwrap(), weight.grad(&g_want).unwrap()),
            rel_diff(bias.grad(&g_got).unwrap(), bias.grad(&g_want).unwrap()),
        ]
    }

    /// `x` with each value within 1e-3 of a bend moved 2e-3 above it. At a bend the derivative is
    /// undefined and the two sides differ: ours is PyTorch's (`flex::activation`'s tests), Burn's
    /// clamp passes the gradient at its ends, and its hard sigmoid's `x · (1/6) + 1/2` rounds to
    /// 0 or 1 a few ulps inside ±3. One such value of 21 021 failed CI once (stop 90).
    fn off_the_bends<const D: usize>(x: Tensor<D>, bends: &[f32]) -> Tensor<D> {
        bends.iter().fold(x, |x, &bend| {
            let near = x.clone().sub_scalar(bend).abs().lower_elem(1e-3);
            x.clone().mask_where(near, x.add_scalar(2e-3))
        })
    }

    /// ReLU6 against Burn's, bit for bit: outputs and the input gradient of a random weighting,
    /// on values across both edges (inside, below 0, above 6) but off the bends themselves,
    /// with and without autodiff.
    #[test]
    fn relu6_matches_burns_output_and_gradient() {
        let device = Device::flex().autodiff();
        let x = Tensor::<3>::random([3, 7, 1001], Distribution::Uniform(-3.0, 9.0), &device);
        let x = off_the_bends(x, &[0.0, 6.0]).require_grad();
        let got = flex_route::relu6(&x).expect("on the flex kernels");
        let want = burn::tensor::activation::relu6(x.clone());
        got.to_data().assert_eq(&want.to_data(), true);
        let probe = Tensor::random(want.dims(), Distribution::Default, &device);
        let g_got = (got * probe.clone()).sum().backward();
        let g_want = (want * probe).sum().backward();
        let (x_got, x_want) = (x.grad(&g_got).unwrap(), x.grad(&g_want).unwrap());
        x_got.to_data().assert_eq(&x_want.to_data(), true);
        let plain = x.inner();
        relu6(plain.clone())
            .to_data()
            .assert_eq(&burn::tensor::activation::relu6(plain).to_data(), true);
    }

    /// SiLU, hard swish and hard sigmoid against Burn's, outputs and the input gradient of a
    /// random weighting within 1e-6 (SiLU's exponentials differ by an ulp or two), on values
    /// across both tails and either side of the hard ones' bends at ±3, with and without
    /// autodiff.
    #[test]
    fn activations_match_burns_outputs_and_gradients() {
        type Pair = (fn(Tensor<3>) -> Tensor<3>, fn(Tensor<3>) -> Tensor<3>);
        let activations: [(&str, Pair); 3] = [
            ("silu", (silu, burn::tensor::activation::silu)),
            (
                "hard swish",
                (hard_swish, burn::tensor::activation::hard_swish),
            ),
            (
                "hard sigmoid",
                (hard_sigmoid, |x| {
                    burn::tensor::activation::hard_sigmoid(x, 1.0 / 6.0, 0.5)
                }),
            ),
        ];
        let device = Device::flex().autodiff();
        for (name, (ours, burns)) in activations {
            for range in [(-30.0, 30.0), (-4.0, 4.0)] {
                let x = Tensor::<3>::random(
                    [3, 7, 1001],
                    Distribution::Uniform(range.0, range.1),
                    &device,
                );
                let x = off_the_bends(x, &[-3.0, 3.0]).require_grad();
                let (got, want) = (ours(x.clone()), burns(x.clone()));
                let probe = Tensor::random(want.dims(), Distribution::Default, &device);
                let g_got = (got.clone() * probe.clone()).sum().backward();
                let g_want = (want.clone() * probe).sum().backward();
                let (x_got, x_want) = (x.grad(&g_got).unwrap(), x.grad(&g_want).unwrap());
                let outputs = rel_diff(got.inner(), want.inner());
                assert!(outputs < 1e-6, "{name} {range:?}: outputs {outputs}");
                let gradients = rel_diff(x_got, x_want);
                assert!(gradients < 1e-6, "{name} {range:?}: gradients {gradients}");
                let plain = x.inner();
                let plain_diff = rel_diff(ours(plain.clone()), burns(plain));
                assert!(plain_diff < 1e-6, "{name} {range:?}: {plain_diff}");
            }
        }
    }

    /// Each activation runs on the flex kernels, not Burn's ops.
    #[test]
    fn activations_take_the_flex_kernels() {
        let x = Tensor::<2>::zeros([2, 3], &Device::flex());
        assert!(flex_route::silu(&x).is_some());
        assert!(flex_route::hard_swish(&x).is_some());
        assert!(flex_route::hard_sigmoid(&x).is_some());
    }

    /// Depthwise convolutions (one filter per channel) against Burn's grouped ones, outputs and
    /// the three gradients: TF's SAME at stride 2 on an even side (one more padding after than
    /// before: Keras's MobileNetV2) and on an odd one, torchvision's symmetric padding at
    /// stride 2, SAME at stride 1, a 5x5, VALID on planes not square, a stride wider than
    /// the kernel, padding after wider than the input, with batches that do not split evenly
    /// across threads.
    #[test]
    fn depthwise_convolution_matches_burns_outputs_and_gradients() {
        let cases = [
            (6, [3, 3], [2, 2], PaddingConfig2d::Same, [16, 16], 3),
            (5, [3, 3], [2, 2], PaddingConfig2d::Same, [15, 15], 2),
            (
                4,
                [3, 3],
                [2, 2],
                PaddingConfig2d::Explicit(1, 1, 1, 1),
                [16, 14],
                3,
            ),
            (7, [3, 3], [1, 1], PaddingConfig2d::Same, [14, 14], 3),
            (3, [5, 5], [1, 1], PaddingConfig2d::Same, [9, 11], 2),
            (4, [3, 3], [1, 1], PaddingConfig2d::Valid, [9, 13], 3),
            (2, [2, 2], [3, 3], PaddingConfig2d::Valid, [10, 11], 2),
            // Padding after wider than the input: kernel rows and columns that read only it.
            (
                3,
                [3, 3],
                [1, 1],
                PaddingConfig2d::Explicit(0, 0, 4, 4),
                [2, 1],
                2,
            ),
            (
                3,
                [5, 5],
                [2, 2],
                PaddingConfig2d::Explicit(0, 0, 4, 4),
                [2, 1],
                2,
            ),
        ];
        for (c, kernel, stride, padding, [h, w], n) in cases {
            let device = Device::flex().autodiff();
            let conv = Conv2dConfig::new([c, c], kernel)
                .with_groups(c)
                .with_stride(stride)
                .with_padding(padding.clone())
                .init(&device);
            let x =
                Tensor::<4>::random([n, c, h, w], Distribution::Default, &device).require_grad();
            let got = flex_route::depthwise_conv2d(&conv, &x).expect("on the flex kernels");
            let case = format!("{kernel:?} {stride:?} {padding:?}");
            let diffs = differences_from_burns(&conv, &x, got, &case);
            assert!(diffs.iter().all(|&d| d < 1e-5), "{case}: {diffs:?}");
        }
    }

    /// The weight gradient split between threads by output channels as well as images (large
    /// kernels on small maps: Inception's Mixed_7 blocks) equals the one thread's sum over the
    /// whole batch, up to the order of the sums: a 3x3 and a 1x1 on 8x8 maps, with slices of
    /// output channels that end short of a block of 32, in f32 and in bf16, on 4 threads.
    #[test]
    fn weight_gradients_split_between_threads_equal_one_threads() {
        let device = Device::flex().autodiff();
        let cases = [(96, 128, [3, 3], 6), (256, 96, [1, 1], 5)];
        for (c_in, c_out, kernel, n) in cases {
            let conv = Conv2dConfig::new([c_in, c_out], kernel)
                .with_padding(PaddingConfig2d::Same)
                .init(&device);
            let x =
                Tensor::<4>::random([n, c_in, 8, 8], Distribution::Default, &device).require_grad();
            let probe = Tensor::random([n, c_out, 8, 8], Distribution::Default, &device);
            for precision in [Precision::F32, Precision::Bf16] {
                let grads_on = |threads: usize| {
                    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build();
                    pool.unwrap().install(|| {
                        let y = flex_route::conv2d(&conv, &x, precision).expect("covered");
                        let grads = (y * probe.clone()).sum().backward();
                        let weight = conv.weight.val().grad(&grads).unwrap();
                        (weight, x.grad(&grads).unwrap())
                    })
                };
                let (one, four) = (grads_on(1), grads_on(4));
                let case = format!("{c_in}->{c_out} {kernel:?} {precision}");
                assert!(rel_diff(four.0, one.0) < 1e-5, "weight gradient, {case}");
                assert!(rel_diff(four.1, one.1) < 1e-5, "input gradient, {case}");
            }
        }
    }

    /// A convolution whose kernel covers its whole unpadded input (one output place) goes to
    /// the dense product: Burn's convolution's outputs and gradients (input, weight, bias), at
    /// strides 1 and 2, in f32 and, rounded, in bf16; a padded one does not.
    #[test]
    fn whole_input_convolution_is_a_dense_layer() {
        let cases = [(16, 40, [5, 5], [1, 1], 3), (3, 7, [3, 2], [2, 2], 2)];
        let device = Device::flex().autodiff();
        for (c_in, c_out, kernel, stride, n) in cases {
            let conv = Conv2dConfig::new([c_in, c_out], kernel)
                .with_stride(stride)
                .init(&device);
            let [h, w] = kernel;
            let x =
                Tensor::<4>::random([n, c_in, h, w], Distribution::Default, &device).require_grad();
            let got = whole_input_conv2d(&conv, &x).expect("a whole-input convolution");
            let want = conv.forward(x.clone());
            assert_eq!(got.dims(), [n, c_out, 1, 1]);
            let probe = Tensor::random(want.dims(), Distribution::Default, &device);
            let g_got = (got.clone() * probe.clone()).sum().backward();
            let g_want = (want.clone() * probe).sum().backward();
            let (weight, bias) = (conv.weight.val(), conv.bias.as_ref().unwrap().val());
            let diffs = [
                rel_diff(got, want.clone()),
                rel_diff(x.grad(&g_got).unwrap(), x.grad(&g_want).unwrap()),
                rel_diff(weight.grad(&g_got).unwrap(), weight.grad(&g_want).unwrap()),
                rel_diff(bias.grad(&g_got).unwrap(), bias.grad(&g_want).unwrap()),
            ];
            assert!(diffs.iter().all(|&d| d < 1e-5), "{kernel:?}: {diffs:?}");
            let low =
                crate::precision::with_precision(Precision::Bf16, || conv2d(&conv, x.clone()));
            let rounding = rel_diff(low, want);
            assert!(
                rounding > 1e-5 && rounding < 1e-2,
                "{kernel:?} bf16: {rounding}"
            );
        }
        let padded = Conv2dConfig::new([2, 3], [3, 3])
            .with_padding(PaddingConfig2d::Same)
            .init(&device);
        let x = Tensor::<4>::random([1, 2, 3, 3], Distribution::Default, &device);
        assert!(whole_input_conv2d(&padded, &x).is_none());
    }

    /// Against Burn's average pooling, outputs and the input gradient of a weighted sum:
    /// Inception's 3x3 SAME with and without the padding in the divisor, on planes as small as
    /// the window, a 5x5, a one-row window, and no padding; uneven padding is not taken.
    #[test]
    fn average_pooling_matches_burns_outputs_and_gradients() {
        let device = Device::flex().autodiff();
        let cases = [
            ([3, 3], PaddingConfig2d::Same, false, [35, 35]),
            ([3, 3], PaddingConfig2d::Same, true, [17, 17]),
            ([3, 3], PaddingConfig2d::Same, false, [2, 3]),
            ([5, 5], PaddingConfig2d::Explicit(2, 2, 2, 2), false, [8, 9]),
            ([1, 3], PaddingConfig2d::Explicit(0, 1, 0, 1), false, [4, 6]),
            ([3, 3], PaddingConfig2d::Valid, true, [7, 5]),
        ];
        for (kernel, padding, counts_padding, [h, w]) in cases {
            let case = format!("{kernel:?} {padding:?} {counts_padding} {h}x{w}");
            let pool = AvgPool2dConfig::new(kernel)
                .with_strides([1, 1])
                .with_padding(padding)
                .with_count_include_pad(counts_padding)
                .init();
            let x =
                Tensor::<4>::random([2, 3, h, w], Distribution::Default, &device).require_grad();
            let got = flex_route::avg_pool2d(&pool, &x).expect("on the flex kernels");
            let want = pool.forward(x.clone());
            let probe = Tensor::random(want.dims(), Distribution::Default, &device);
            let g_got = (got.clone() * probe.clone()).sum().backward();
            let g_want = (want.clone() * probe).sum().backward();
            let diffs = [
                rel_diff(got, want),
                rel_diff(x.grad(&g_got).unwrap(), x.grad(&g_want).unwrap()),
            ];
            assert!(diffs.iter().all(|&d| d < 1e-6), "{case}: {diffs:?}");
        }
        let uneven = AvgPool2dConfig::new([2, 2])
            .with_strides([1, 1])
            .with_padding(PaddingConfig2d::Same)
            .init();
        let x = Tensor::<4>::random([1, 2, 17, 17], Distribution::Default, &device);
        assert!(flex_route::avg_pool2d(&uneven, &x).is_none());
    }

    /// The convolution with its bias and ReLU in one kernel against the convolution followed
    /// by Burn's bias addition and ReLU: outputs and the gradients of the input, kernel and
    /// bias, in f32 and in bf16; a NaN stays NaN through the ReLU.
    #[test]
    fn fused_bias_and_relu_match_the_separate_ops() {
        let device = Device::flex().autodiff();
        let cases = [
            (3, 64, [5, 5], [1, 1], [24, 24]),
            (64, 64, [5, 5], [1, 1], [12, 12]),
            (5, 7, [3, 3], [2, 2], [9, 11]),
        ];
        for (c_in, c_out, kernel, stride, [h, w]) in cases {
            for precision in [Precision::F32, Precision::Bf16] {
                let case = format!("{c_in}->{c_out} {kernel:?}/{stride:?} {precision}");
                let conv = Conv2dConfig::new([c_in, c_out], kernel)
                    .with_stride(stride)
                    .with_padding(PaddingConfig2d::Same)
                    .init(&device);
                let x = Tensor::<4>::random([3, c_in, h, w], Distribution::Default, &device)
                    .require_grad();
                let fused = flex_route::conv2d_relu(&conv, &x, precision).expect("covered");
                let apart = relu(flex_route::conv2d(&conv, &x, precision).expect("covered"));
                let probe = Tensor::random(fused.dims(), Distribution::Default, &device);
                let g_fused = (fused.clone() * probe.clone()).sum().backward();
                let g_apart = (apart.clone() * probe).sum().backward();
                let grad = |t: &Tensor<4>, g| t.grad(g).unwrap();
                let (weight, bias) = (conv.weight.val(), conv.bias.as_ref().unwrap().val());
                let diffs = [
                    rel_diff(fused, apart),
                    rel_diff(grad(&x, &g_fused), grad(&x, &g_apart)),
                    rel_diff(grad(&weight, &g_fused), grad(&weight, &g_apart)),
                    rel_diff(bias.grad(&g_fused).unwrap(), bias.grad(&g_apart).unwrap()),
                ];
                assert!(diffs.iter().all(|&d| d < 1e-5), "{case}: {diffs:?}");
            }
        }
        let conv = Conv2dConfig::new([2, 3], [1, 1]).init(&device);
        let x = Tensor::<4>::full([1, 2, 2, 2], f32::NAN, &device);
        let y = flex_route::conv2d_relu(&conv, &x, Precision::F32).unwrap();
        let values: Vec<f32> = y.into_data().try_to_vec().unwrap();
        assert!(values.iter().all(|v| v.is_nan()));
    }

    /// What the kernels do not cover goes to Burn: a dilated pool, a dilated convolution, an
    /// asymmetric SAME padding (a 2x2 kernel) of an input already rounded to bf16, a non-flex
    /// element type, a kernel larger than the input, an empty batch.
    #[test]
    fn uncovered_layouts_go_to_burn() {
        let device = Device::flex().autodiff();
        let x = Tensor::<4>::random([2, 3, 8, 8], Distribution::Default, &device);
        let dilated = MaxPool2dConfig::new([3, 3]).with_dilation([2, 2]).init();
        assert!(flex_route::max_pool2d(&dilated, &x).is_none());
        let dilated = Conv2dConfig::new([3, 2], [3, 3])
            .with_dilation([2, 2])
            .init(&device);
        assert!(flex_route::conv2d(&dilated, &x, Precision::F32).is_none());
        let asymmetric = Conv2dConfig::new([3, 2], [2, 2])
            .with_padding(PaddingConfig2d::Same)
            .init(&device);
        let rounded = x.clone().cast(burn::tensor::DType::BF16);
        assert!(flex_route::conv2d(&asymmetric, &rounded, Precision::Bf16).is_none());
        let same = Conv2dConfig::new([3, 2], [3, 3])
            .with_padding(PaddingConfig2d::Same)
            .init(&device);
        assert!(
            flex_route::conv2d(
                &same,
                &x.clone().cast(burn::tensor::DType::F64),
                Precision::F32
            )
            .is_none()
        );
        let too_large = Conv2dConfig::new([3, 2], [9, 9]).init(&device);
        assert!(flex_route::conv2d(&too_large, &x, Precision::F32).is_none());
        let empty = Tensor::<4>::zeros([0, 3, 8, 8], &device);
        assert!(flex_route::conv2d(&same, &empty, Precision::F32).is_none());
        assert!(flex_route::conv2d(&same, &x, Precision::F16).is_none());
    }

    /// `x` rounded to bf16, in f32.
    fn bf16_rounded<const D: usize>(x: Tensor<D>) -> Tensor<D> {
        x.cast(DType::BF16).cast(DType::F32)
    }

    /// The flex kernel in bf16 against Burn's f32 convolution of the bf16-rounded operands:
    /// the products of two bf16 values are exact in f32, so the two agree to f32 summation
    /// order, outputs and gradients (the output gradient rounded too, as the kernel's backward
    /// does), and differ from the unrounded f32 convolution by bf16's rounding.
    #[test]
    fn bf16_convolution_is_burns_on_rounded_operands() {
        let cases = [
            (64, 64, [5, 5], [1, 1], PaddingConfig2d::Same, [12, 12], 3),
            (3, 64, [5, 5], [1, 1], PaddingConfig2d::Same, [24, 24], 2),
            (5, 17, [3, 3], [2, 2], PaddingConfig2d::Valid, [11, 9], 3),
            (33, 40, [1, 1], [1, 1], PaddingConfig2d::Valid, [7, 5], 2),
            // Two chunks of 64 channel pairs, a last block of 4 output channels, blocks of
            // places across row ends (`vector_conv`'s outputs stored from the grid).
            (160, 20, [3, 3], [1, 1], PaddingConfig2d::Same, [9, 13], 2),
        ];
        for (c_in, c_out, kernel, stride, padding, [h, w], n) in cases {
            let case = format!("{c_in}->{c_out} {kernel:?}/{stride:?} {padding:?}");
            let device = Device::flex().autodiff();
            let conv = Conv2dConfig::new([c_in, c_out], kernel)
                .with_stride(stride)
                .with_padding(padding)
                .init(&device);
            let x =
                Tensor::<4>::random([n, c_in, h, w], Distribution::Default, &device).require_grad();
            let got = flex_route::conv2d(&conv, &x, Precision::Bf16).expect("on the kernels");
            let probe = Tensor::random(got.dims(), Distribution::Default, &device);
            let grads = (got.clone() * probe.clone()).sum().backward();

            let (rows, cols) = conv_padding(&conv.padding, [h, w], kernel, stride);
            let options = ConvOptions::new(stride, [rows.0, cols.0], [1, 1], 1);
            let leaf = |t: Tensor<4>| {
                Tensor::<4>::from_data(bf16_rounded(t).into_data(), &device).require_grad()
            };
            let (xr, wr) = (leaf(x.clone()), leaf(conv.weight.val()));
            let bias = conv.bias.as_ref().unwrap().val().reshape([1, -1, 1, 1]);
            let want = module::conv2d(xr.clone(), wr.clone(), None, options) + bias;
            let want_grads = (want.clone() * bf16_rounded(probe)).sum().backward();
            let diffs = [
                rel_diff(got.clone(), want),
                rel_diff(x.grad(&grads).unwrap(), xr.grad(&want_grads).unwrap()),
                rel_diff(
                    conv.weight.val().grad(&grads).unwrap(),
                    wr.grad(&want_grads).unwrap(),
                ),
            ];
            assert!(diffs.iter().all(|&d| d < 1e-5), "{case}: {diffs:?}");
            let rounding = rel_diff(got, conv.forward(x));
            assert!(rounding > 1e-4 && rounding < 1e-2, "{case}: {rounding}");
        }
    }

    /// A dense layer in bf16 on flex against Burn's f32 product of the bf16-rounded operands:
    /// outputs and both gradients to f32 summation order, on a 3-d input and on shapes that
    /// are no multiple of AMX's tiles.
    #[test]
    fn bf16_dense_layer_is_burns_on_rounded_operands() {
        let device = Device::flex().autodiff();
        for [a, b, k, m] in [[6, 5, 40, 33], [2, 1, 2304, 384], [3, 7, 1, 5]] {
            let dense = burn::nn::LinearConfig::new(k, m).init(&device);
            let x = Tensor::<3>::random([a, b, k], Distribution::Default, &device).require_grad();
            let got =
                crate::precision::with_precision(Precision::Bf16, || linear(&dense, x.clone()));
            let probe = Tensor::random([a, b, m], Distribution::Default, &device);
            let grads = (got.clone() * probe.clone()).sum().backward();

            let xr = bf16_rounded(x.clone()).into_data();
            let xr = Tensor::<3>::from_data(xr, &device).require_grad();
            let wr = bf16_rounded(dense.weight.val()).into_data();
            let wr = Tensor::<2>::from_data(wr, &device).require_grad();
            let bias = dense.bias.as_ref().unwrap().val().unsqueeze::<3>();
            let want = xr.clone().matmul(wr.clone().unsqueeze()) + bias;
            let want_grads = (want.clone() * bf16_rounded(probe)).sum().backward();
            let diffs = [
                rel_diff(got, want),
                rel_diff(x.grad(&grads).unwrap(), xr.grad(&want_grads).unwrap()),
                rel_diff(
                    dense.weight.val().grad(&grads).unwrap(),
                    wr.grad(&want_grads).unwrap(),
                ),
            ];
            assert!(
                diffs.iter().all(|&d| d < 1e-5),
                "{a}x{b}x{k} -> {m}: {diffs:?}"
            );
        }
    }

    /// Burn's convolution with the bias added apart (`burn_conv2d`, every convolution off the
    /// flex kernels) is `Conv2d::forward`, output and gradients, on the paddings Burn splits
    /// unevenly (SAME at stride 2) or is given (explicit, uneven), with and without bias.
    #[test]
    fn burns_convolution_with_the_bias_apart_is_conv2d_forward() {
        let device = Device::flex().autodiff();
        let paddings = [PaddingConfig2d::Same, PaddingConfig2d::Explicit(1, 0, 2, 1)];
        for (padding, bias) in paddings
            .into_iter()
            .flat_map(|p| [(p.clone(), true), (p, false)])
        {
            let conv = Conv2dConfig::new([3, 5], [3, 3])
                .with_stride([2, 2])
                .with_padding(padding.clone())
                .with_bias(bias)
                .init(&device);
            let x =
                Tensor::<4>::random([2, 3, 8, 7], Distribution::Default, &device).require_grad();
            let (want, got) = (
                conv.forward(x.clone()),
                burn_conv2d(&conv, x.clone(), DType::F32),
            );
            let (want_grads, grads) = (want.clone().sum().backward(), got.clone().sum().backward());
            let mut diffs = vec![
                rel_diff(got, want),
                rel_diff(x.grad(&grads).unwrap(), x.grad(&want_grads).unwrap()),
                rel_diff(
                    conv.weight.val().grad(&grads).unwrap(),
                    conv.weight.val().grad(&want_grads).unwrap(),
                ),
            ];
            if let Some(b) = &conv.bias {
                diffs.push(rel_diff(
                    b.val().grad(&grads).unwrap(),
                    b.val().grad(&want_grads).unwrap(),
                ));
            }
            assert!(
                diffs.iter().all(|&d| d < 1e-6),
                "{padding:?}, bias {bias}: {diffs:?}"
            );
        }
    }

    /// Outside the kernels, a low precision casts: Burn's convolution and dense layer in bf16
    /// and f16 stay within those types' rounding of f32, and their gradients reach the f32
    /// weights and input.
    #[test]
    fn cast_products_follow_f32_within_rounding() {
        let device = Device::flex().autodiff();
        let conv = Conv2dConfig::new([6, 8], [3, 3])
            .with_padding(PaddingConfig2d::Same)
            .init(&device);
        let dense = burn::nn::LinearConfig::new(8 * 5 * 5, 7).init(&device);
        let x = Tensor::<4>::random([3, 6, 5, 5], Distribution::Default, &device).require_grad();
        let net = |x: Tensor<4>| linear(&dense, conv2d(&conv, x).flatten::<2>(1, 3));
        let want = net(x.clone());
        let want_grads = want.clone().sum().backward();
        for (precision, tolerance) in [(Precision::Bf16, 2e-2), (Precision::F16, 4e-3)] {
            let got = crate::precision::with_precision(precision, || {
                linear(
                    &dense,
                    burn_conv2d(&conv, x.clone(), precision.dtype()).flatten::<2>(1, 3),
                )
            });
            assert_eq!(got.dtype(), DType::F32);
            let grads = got.clone().sum().backward();
            let diffs = [
                rel_diff(got, want.clone()),
                rel_diff(x.grad(&grads).unwrap(), x.grad(&want_grads).unwrap()),
                rel_diff(
                    conv.weight.val().grad(&grads).unwrap(),
                    conv.weight.val().grad(&want_grads).unwrap(),
                ),
                rel_diff(
                    dense.weight.val().grad(&grads).unwrap(),
                    dense.weight.val().grad(&want_grads).unwrap(),
                ),
            ];
            assert!(
                diffs.iter().all(|&d| d > 0.0 && d < tolerance),
                "{precision}: {diffs:?}"
            );
        }
    }
}
