//! Which calls the flex kernels take: f32 tensors on flex (with or without autodiff), in the layouts the kernels cover. Each returns `None` where they do not apply.

use burn::backend::{Dispatch, DispatchDevice};
use burn::module::Param;
use burn::nn::conv::{Conv2d, ConvTranspose2d};
use burn::nn::pool::{
    AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AvgPool1d, AvgPool2d, MaxPool1d,
    MaxPool2d,
};
use burn::nn::{Dropout, GroupNorm, InstanceNorm, PRelu, RotaryEncoding};
use burn::tensor::ops::PadMode;
use burn::tensor::{Bool, DType, Device, Distribution, Int, Tensor};

use crate::extension::FlexKernels;
use crate::flex::activation::Activation;
use crate::flex::attention::{ScoreBias, ScoreMask, Scores};
use crate::flex::conv::depth_windows::DepthWindows;
use crate::flex::dropout::DropoutMask;
use crate::flex::gemm::arithmetic::Arithmetic;
pub(crate) use crate::flex::norm::layer_norm::RowNorm;
use crate::flex::pool::max_pool::MaxPoolShape;
use crate::flex::pool::padded_max_pool;
use crate::flex::pool::window_mean::MeanWindows;
use crate::flex::prelu::Channels;
use crate::padding::{conv_padding, row_padding, symmetric};
use crate::precision::{Precision, current_precision};

/// `x · weight` over `x`'s last dimension (a dense layer's product), `x`'s leading dimensions
/// folded into rows, by the flex kernels in `dtype` (f32, or bf16 operands summed in f32);
/// `None` for other types or devices.
pub(super) fn dense_product<const D: usize>(
    x: &Tensor<D>,
    weight: &Tensor<2>,
    dtype: DType,
) -> Option<Tensor<D>> {
    let arithmetic = match dtype {
        DType::F32 => Arithmetic::F32,
        DType::BF16 => Arithmetic::Bf16,
        _ => return None,
    };
    if D < 2 || !on_flex(x) || !on_flex(weight) || weight.device() != x.device() {
        return None;
    }
    let mut dims = x.dims();
    let x = x.clone().flatten::<2>(0, D - 2).into_dispatch();
    let w = weight.clone().into_dispatch();
    let y = <Dispatch as FlexKernels>::towers_dense_product(x, w, arithmetic);
    dims[D - 1] = weight.dims()[1];
    Some(Tensor::<2>::from_dispatch(y).reshape(dims))
}

/// An f32 flex tensor with no empty dimension (Burn's kernels report or handle those).
pub fn on_flex<const D: usize>(x: &Tensor<D>) -> bool {
    on_flex_in(x, DType::F32)
}

/// [`on_flex`] in `dtype`.
fn on_flex_in<const D: usize>(x: &Tensor<D>, dtype: DType) -> bool {
    x.dtype() == dtype && is_flex(x.device()) && x.dims().iter().all(|&d| d > 0)
}

/// Whether `device` is a flex device (with or without autodiff).
fn is_flex(device: Device) -> bool {
    matches!(device.inner().as_dispatch(), DispatchDevice::Flex(_))
}

/// Whether `conv` reads an input of `[_, _, h, w]` rounded to bf16 as it is, in this
/// thread's precision: in bf16, where the direct vector kernels and the windows take it
/// (AVX-512 BF16 without AMX; not a 1x1 at stride 1, whose windows f32 gemm reads in
/// place: `crate::flex::conv::passes::reads_bf16_images`). Elsewhere the convolution widens such
/// an input to f32 first, a pass for nothing.
pub fn reads_rounded(conv: &Conv2d, [_, _, h, w]: [usize; 4]) -> bool {
    let sides = conv_padding(&conv.padding, [h, w], conv.kernel_size, conv.stride);
    let reads = |padding| {
        crate::flex::conv::passes::reads_bf16_images(conv.kernel_size, conv.stride, padding)
    };
    current_precision() == Precision::Bf16
        && conv.groups == 1
        && conv.dilation == [1, 1]
        && symmetric(sides.into()).is_some_and(reads)
}

/// Whether the flex kernels take `pool` of `x`: no padding or dilation.
/// `pool`'s padding of `x`'s rows and columns where the flex kernels pool as Burn does: on
/// flex, without dilation, the same padding before and after (within
/// [`padded_max_pool::pads_like_burn`]).
fn max_pool_padding(pool: &MaxPool2d, x: &Tensor<4>) -> Option<[usize; 2]> {
    let [_, _, h, w] = x.dims();
    let sides = conv_padding(&pool.padding, [h, w], pool.kernel_size, pool.stride);
    let padding = symmetric(sides.into())?;
    let shape = MaxPoolShape::new(pool.kernel_size, pool.stride, pool.ceil_mode);
    let fits = padded_max_pool::pads_like_burn(shape, [h, w], padding);
    (on_flex(x) && pool.dilation == [1, 1] && fits).then_some(padding)
}

pub(super) fn max_pool2d(pool: &MaxPool2d, x: &Tensor<4>) -> Option<Tensor<4>> {
    let padding = max_pool_padding(pool, x)?;
    let (kernel, stride) = (pool.kernel_size, pool.stride);
    let x = x.clone().into_dispatch();
    let y =
        <Dispatch as FlexKernels>::towers_max_pool2d(x, kernel, stride, padding, pool.ceil_mode);
    Some(Tensor::from_dispatch(y))
}

/// With the same padding before and after: at stride 1 without ceil mode by window sums,
/// otherwise by window means.
pub(super) fn avg_pool2d(pool: &AvgPool2d, x: &Tensor<4>) -> Option<Tensor<4>> {
    let [_, _, h, w] = x.dims();
    let sides = conv_padding(&pool.padding, [h, w], pool.kernel_size, pool.stride);
    let fits = kernel_fits(pool.kernel_size, [h, w], sides);
    let padding = symmetric(sides.into()).filter(|_| on_flex(x))?;
    let x = x.clone().into_dispatch();
    let y = if pool.stride == [1, 1] && !pool.ceil_mode && fits {
        <Dispatch as FlexKernels>::towers_avg_pool2d(
            x,
            pool.kernel_size,
            padding,
            pool.count_include_pad,
        )
    } else {
        let windows = MeanWindows::Strided {
            kernel: pool.kernel_size,
            stride: pool.stride,
            padding,
            counts_padding: pool.count_include_pad,
            ceil_mode: pool.ceil_mode,
        };
        <Dispatch as FlexKernels>::towers_window_mean(x, windows)
    };
    Some(Tensor::from_dispatch(y))
}

/// [`max_pool2d`] of `x` as a one-row image.
pub(super) fn max_pool1d(pool: &MaxPool1d, x: &Tensor<3>) -> Option<Tensor<3>> {
    let row = MaxPool2d {
        stride: [1, pool.stride],
        kernel_size: [1, pool.kernel_size],
        padding: row_padding(&pool.padding),
        dilation: [1, pool.dilation],
        ceil_mode: pool.ceil_mode,
    };
    max_pool2d(&row, &x.clone().unsqueeze_dim(2)).map(|y| y.squeeze_dim(2))
}

/// [`avg_pool2d`] of `x` as a one-row image.
pub(super) fn avg_pool1d(pool: &AvgPool1d, x: &Tensor<3>) -> Option<Tensor<3>> {
    let row = AvgPool2d {
        stride: [1, pool.stride],
        kernel_size: [1, pool.kernel_size],
        padding: row_padding(&pool.padding),
        count_include_pad: pool.count_include_pad,
        ceil_mode: pool.ceil_mode,
    };
    avg_pool2d(&row, &x.clone().unsqueeze_dim(2)).map(|y| y.squeeze_dim(2))
}

/// [`adaptive_avg_pool2d`] of `x` as a one-row image.
pub(super) fn adaptive_avg_pool1d(pool: &AdaptiveAvgPool1d, x: &Tensor<3>) -> Option<Tensor<3>> {
    let row = AdaptiveAvgPool2d {
        output_size: [1, pool.output_size],
    };
    adaptive_avg_pool2d(&row, &x.clone().unsqueeze_dim(2)).map(|y| y.squeeze_dim(2))
}

/// `rope.apply(x, start)` by the rotary kernel, where `x`'s last axis is the table's width,
/// its positions lie in the table and both are f32 on the same flex device (Burn's layer
/// reports the rest).
pub(super) fn rotary_encoding<const D: usize>(
    rope: &RotaryEncoding,
    x: &Tensor<D>,
    start: usize,
) -> Option<Tensor<D>> {
    let table = &rope.freq_complex;
    let [positions, width, _] = table.dims();
    let dims = x.dims();
    let seq = *dims.get(D.checked_sub(2)?)?;
    let fits = dims[D - 1] == width && start + seq <= positions && x.device() == table.device();
    if !fits || !on_flex(x) || !on_flex(table) {
        return None;
    }
    let rows = dims.iter().product::<usize>() / (seq * width);
    let freq = table.clone().narrow(0, start, seq).into_dispatch();
    let x = x.clone().reshape([rows, seq, width]).into_dispatch();
    let y = <Dispatch as FlexKernels>::towers_rotary(x, freq);
    Some(Tensor::<3>::from_dispatch(y).reshape(dims))
}

/// `x`'s depth windows as 2D images (`[n · od, kernel · c, h, w]`, [`crate::conv3d`]'s), by
/// the flex kernels; the caller checks `x` is on flex.
pub(super) fn depth_windows(x: &Tensor<5>, windows: DepthWindows) -> Tensor<4> {
    let x = x.clone().into_dispatch();
    Tensor::from_dispatch(<Dispatch as FlexKernels>::towers_depth_windows(x, windows))
}

/// [`adaptive_avg_pool2d`] of each depth's image, then of the depths: the windows' means are
/// separable (each window's a mean over its depths of means over its images).
pub(super) fn adaptive_avg_pool3d(pool: &AdaptiveAvgPool3d, x: &Tensor<5>) -> Option<Tensor<5>> {
    let [n, c, d, h, w] = x.dims();
    let [od, oh, ow] = pool.output_size;
    let images = AdaptiveAvgPool2d {
        output_size: [oh, ow],
    };
    let pooled = adaptive_avg_pool2d(&images, &x.clone().reshape([n, c * d, h, w]))?;
    let depths = AdaptiveAvgPool2d {
        output_size: [od, oh * ow],
    };
    let y = adaptive_avg_pool2d(&depths, &pooled.reshape([n, c, d, oh * ow]))?;
    Some(y.reshape([n, c, od, oh, ow]))
}

pub(super) fn adaptive_avg_pool2d(pool: &AdaptiveAvgPool2d, x: &Tensor<4>) -> Option<Tensor<4>> {
    if !on_flex(x) {
        return None;
    }
    let windows = MeanWindows::Adaptive(pool.output_size);
    let y = <Dispatch as FlexKernels>::towers_window_mean(x.clone().into_dispatch(), windows);
    Some(Tensor::from_dispatch(y))
}

/// `towers_models::OffsetBatchNorm::forward_relu` on batch statistics: the output (`rounded` to
/// bf16, or f32) and the batch's `[2, c]` moments (mean, biased variance), on the flex
/// kernels.
pub fn batch_norm_relu(
    x: &Tensor<4>,
    beta: Tensor<1>,
    epsilon: f64,
    rounded: bool,
) -> Option<(Tensor<4>, Tensor<2>)> {
    if !on_flex(x) {
        return None;
    }
    let (y, moments) = <Dispatch as FlexKernels>::towers_batch_norm_relu(
        x.clone().into_dispatch(),
        beta.into_dispatch(),
        epsilon,
        rounded,
    );
    Some((Tensor::from_dispatch(y), Tensor::from_dispatch(moments)))
}

/// `towers_models::OffsetBatchNorm::forward_relu_max_pool` on batch statistics: the output and
/// the batch's `[2, c]` moments, on the flex kernels, for the unpadded pools that
/// [`crate::max_pool2d`] takes to the kernels.
pub fn batch_norm_relu_max_pool(
    x: &Tensor<4>,
    beta: Tensor<1>,
    epsilon: f64,
    pool: &MaxPool2d,
) -> Option<(Tensor<4>, Tensor<2>)> {
    if max_pool_padding(pool, x) != Some([0, 0]) {
        return None;
    }
    let (y, moments) = <Dispatch as FlexKernels>::towers_batch_norm_relu_max_pool(
        x.clone().into_dispatch(),
        beta.into_dispatch(),
        epsilon,
        pool.kernel_size,
        pool.stride,
        pool.ceil_mode,
    );
    Some((Tensor::from_dispatch(y), Tensor::from_dispatch(moments)))
}

/// `towers_models::OffsetBatchNorm::forward_relu_max_pool` on given statistics (the moving
/// averages: in evaluation, or with training turned off), on the flex kernels.
pub fn batch_norm_relu_max_pool_given(
    x: &Tensor<4>,
    beta: Tensor<1>,
    averages: [Tensor<1>; 2],
    epsilon: f64,
    pool: &MaxPool2d,
) -> Option<Tensor<4>> {
    if max_pool_padding(pool, x) != Some([0, 0]) {
        return None;
    }
    let y = <Dispatch as FlexKernels>::towers_batch_norm_relu_max_pool_given(
        x.clone().into_dispatch(),
        beta.into_dispatch(),
        stacked(averages).into_dispatch(),
        epsilon,
        pool.kernel_size,
        pool.stride,
        pool.ceil_mode,
    );
    Some(Tensor::from_dispatch(y))
}

/// A mean and a variance per channel as the kernels take them, `[2, c]`.
fn stacked([mean, variance]: [Tensor<1>; 2]) -> Tensor<2> {
    let [c] = mean.dims();
    Tensor::cat(vec![mean, variance], 0).reshape([2, c])
}

/// Burn's `BatchNorm` (scale `gamma`, offset `beta`, no ReLU) of `[n, c, h, w]` on the batch's
/// statistics: the output and the batch's `[2, c]` moments (mean, biased variance), on the flex
/// kernels.
pub fn batch_norm(
    x: &Tensor<4>,
    [gamma, beta]: [Tensor<1>; 2],
    epsilon: f64,
) -> Option<(Tensor<4>, Tensor<2>)> {
    if !on_flex(x) {
        return None;
    }
    let (y, moments) = <Dispatch as FlexKernels>::towers_batch_norm(
        x.clone().into_dispatch(),
        gamma.into_dispatch(),
        beta.into_dispatch(),
        epsilon,
    );
    Some((Tensor::from_dispatch(y), Tensor::from_dispatch(moments)))
}

/// [`batch_norm`] on given statistics `[mean, variance]` (the moving averages).
pub fn batch_norm_given(
    x: &Tensor<4>,
    [gamma, beta]: [Tensor<1>; 2],
    averages: [Tensor<1>; 2],
    epsilon: f64,
) -> Option<Tensor<4>> {
    if !on_flex(x) {
        return None;
    }
    let y = <Dispatch as FlexKernels>::towers_batch_norm_given(
        x.clone().into_dispatch(),
        gamma.into_dispatch(),
        beta.into_dispatch(),
        stacked(averages).into_dispatch(),
        epsilon,
    );
    Some(Tensor::from_dispatch(y))
}

/// `towers_models::OffsetBatchNorm::forward_relu` on given statistics (the moving averages: in
/// evaluation, or with training turned off) on the flex kernels, the output `rounded` to
/// bf16 or f32.
pub fn batch_norm_relu_given(
    x: &Tensor<4>,
    beta: Tensor<1>,
    averages: [Tensor<1>; 2],
    epsilon: f64,
    rounded: bool,
) -> Option<Tensor<4>> {
    if !on_flex(x) {
        return None;
    }
    let y = <Dispatch as FlexKernels>::towers_batch_norm_relu_given(
        x.clone().into_dispatch(),
        beta.into_dispatch(),
        stacked(averages).into_dispatch(),
        epsilon,
        rounded,
    );
    Some(Tensor::from_dispatch(y))
}

/// `min(max(x, 0), 6)`.
pub(super) fn relu6<const D: usize>(x: &Tensor<D>) -> Option<Tensor<D>> {
    if !on_flex(x) {
        return None;
    }
    let y = <Dispatch as FlexKernels>::towers_relu6(x.clone().into_dispatch());
    Some(Tensor::from_dispatch(y))
}

/// `x · sigmoid(x)`.
pub(super) fn silu<const D: usize>(x: &Tensor<D>) -> Option<Tensor<D>> {
    activation(x, Activation::Silu)
}

/// `x · relu6(x + 3) / 6`.
pub(super) fn hard_swish<const D: usize>(x: &Tensor<D>) -> Option<Tensor<D>> {
    activation(x, Activation::HardSwish)
}

/// `1 / (1 + e^-x)`.
pub(super) fn sigmoid<const D: usize>(x: &Tensor<D>) -> Option<Tensor<D>> {
    activation(x, Activation::Sigmoid)
}

/// `tanh(x)`.
pub(super) fn tanh<const D: usize>(x: &Tensor<D>) -> Option<Tensor<D>> {
    activation(x, Activation::Tanh)
}

/// `layer.forward(x)`, Burn's PReLU, for an f32 `x` on flex whose channels (dimension 1) are
/// as many as the layer's slopes, or any `x` for one slope.
pub(super) fn prelu<const D: usize>(layer: &PRelu, x: &Tensor<D>) -> Option<Tensor<D>> {
    let alpha = layer.alpha.val();
    let dims = x.dims();
    let channels = alpha.dims()[0];
    if !on_flex(x) || !on_flex(&alpha) || (channels > 1 && (D < 2 || dims[1] != channels)) {
        return None;
    }
    let inner = match channels {
        1 => x.shape().num_elements(),
        _ => dims[2..].iter().product(),
    };
    let layout = Channels { channels, inner };
    let x = x.clone().into_dispatch();
    let y = <Dispatch as FlexKernels>::towers_prelu(x, alpha.into_dispatch(), layout);
    Some(Tensor::from_dispatch(y))
}

/// `x · tanh(softplus(x))`.
pub(super) fn mish<const D: usize>(x: &Tensor<D>) -> Option<Tensor<D>> {
    activation(x, Activation::Mish)
}

/// `x` where `x ≥ 0`, `slope · x` below.
pub(super) fn leaky_relu<const D: usize>(x: &Tensor<D>, slope: f64) -> Option<Tensor<D>> {
    let slope = slope as f32;
    activation(x, Activation::LeakyRelu { slope })
}

/// `relu6(x + 3) / 6`.
pub(super) fn hard_sigmoid<const D: usize>(x: &Tensor<D>) -> Option<Tensor<D>> {
    activation(x, Activation::HardSigmoid)
}

/// `norm.forward(x)` for an affine group norm of an f32 `x` (`[n, c, ...]`) whose channels
/// `norm` splits evenly.
pub(super) fn group_norm<const D: usize>(norm: &GroupNorm, x: &Tensor<D>) -> Option<Tensor<D>> {
    let channels = ChannelGroups {
        groups: norm.num_groups,
        channels: norm.num_channels,
        epsilon: norm.epsilon,
    };
    channels.normalize([&norm.gamma, &norm.beta], x)
}

/// `norm.forward(x)` for an affine instance norm of an f32 `x` (`[n, c, ...]`): a group norm
/// of a channel a group.
pub(super) fn instance_norm<const D: usize>(
    norm: &InstanceNorm,
    x: &Tensor<D>,
) -> Option<Tensor<D>> {
    let channels = ChannelGroups {
        groups: norm.num_channels,
        channels: norm.num_channels,
        epsilon: norm.epsilon,
    };
    channels.normalize([&norm.gamma, &norm.beta], x)
}

/// A group norm's settings: `channels` in `groups` groups.
struct ChannelGroups {
    groups: usize,
    channels: usize,
    epsilon: f64,
}

impl ChannelGroups {
    /// `x` normalized per group, scaled by `gamma` and offset by `beta` (per channel); `None`
    /// without them, for groups that do not split the channels evenly, or off flex.
    fn normalize<const D: usize>(
        &self,
        [gamma, beta]: [&Option<Param<Tensor<1>>>; 2],
        x: &Tensor<D>,
    ) -> Option<Tensor<D>> {
        let (Some(gamma), Some(beta)) = (gamma, beta) else {
            return None;
        };
        let dims = x.dims();
        let even = self.groups > 0 && self.channels.is_multiple_of(self.groups);
        if D < 3 || !on_flex(x) || !even || dims[1] != self.channels {
            return None;
        }
        let places = dims[2..].iter().product::<usize>();
        let x = x
            .clone()
            .reshape([dims[0], dims[1], places])
            .into_dispatch();
        let y = <Dispatch as FlexKernels>::towers_group_norm(
            x,
            gamma.val().into_dispatch(),
            beta.val().into_dispatch(),
            self.groups,
            self.epsilon,
        );
        Some(Tensor::<3>::from_dispatch(y).reshape(dims))
    }
}

/// `x` (`[n, c, h, w]`, f32 on flex) resized to `[n, c, out[0], out[1]]` by bilinear
/// interpolation; `None` elsewhere, or for an empty output.
pub(super) fn bilinear(x: &Tensor<4>, out: [usize; 2], align_corners: bool) -> Option<Tensor<4>> {
    if !on_flex(x) || out.contains(&0) {
        return None;
    }
    let y =
        <Dispatch as FlexKernels>::towers_bilinear(x.clone().into_dispatch(), out, align_corners);
    Some(Tensor::from_dispatch(y))
}

/// `dropout.forward(x)` for an f32 `x` on flex, where it drops anything (in training, on an
/// autodiff device, a probability above 0): the mask drawn from a seed that the device's
/// generator gives, so that `Device::seed` repeats it as it repeats Burn's.
pub(super) fn dropout<const D: usize>(dropout: &Dropout, x: &Tensor<D>) -> Option<Tensor<D>> {
    if !on_flex(x) {
        return None;
    }
    dropped(DrawnDropout::draw(dropout, &x.device())?, x)
}

/// `x` through the dropout `drawn`, for an f32 `x` on flex.
pub(super) fn dropped<const D: usize>(drawn: DrawnDropout, x: &Tensor<D>) -> Option<Tensor<D>> {
    if !on_flex(x) {
        return None;
    }
    let x = x.clone().into_dispatch();
    let y = <Dispatch as FlexKernels>::towers_dropout(x, drawn.prob, drawn.seed);
    Some(Tensor::from_dispatch(y))
}

/// One dropout's draw: its probability and seed, which decide its mask wherever a flex kernel
/// applies it (the dropout kernel's and the attention kernel's alike, value for value of the
/// same shape).
#[derive(Clone, Copy, Debug)]
pub(crate) struct DrawnDropout {
    prob: f64,
    seed: u64,
}

impl DrawnDropout {
    /// A draw of `dropout` from `device`'s generator, where it drops anything on a flex
    /// `device` (in training, on an autodiff device, a probability above 0, as Burn's layer).
    pub(crate) fn draw(dropout: &Dropout, device: &Device) -> Option<Self> {
        let drops = dropout.training.is_enabled() && device.is_autodiff() && dropout.prob > 0.0;
        (drops && is_flex(device.clone())).then(|| Self {
            prob: dropout.prob,
            seed: dropout_seed(device),
        })
    }

    fn mask(self) -> DropoutMask {
        DropoutMask::new(self.prob, self.seed)
    }
}

/// A dropout mask's seed, from `device`'s generator.
fn dropout_seed(device: &Device) -> u64 {
    // 16 bits a draw: the device's integers may be 32-bit.
    let parts = Distribution::Uniform(0.0, 65_536.0);
    let parts = Tensor::<1, Int>::random([4], parts, device).into_data();
    (parts.iter::<i64>()).fold(0u64, |seed, part| seed << 16 | part as u64)
}

/// How an attention's products `Q·Kᵀ` become its scores, besides its mask and bias: times
/// `scale`, capped at `softcap` (Burn's), masked past each query's place if `causal`, masked
/// scores set to `fill`.
#[derive(Clone, Copy, Debug)]
pub(super) struct ScoreRule {
    pub scale: f32,
    pub softcap: Option<f32>,
    pub causal: bool,
    pub fill: f32,
}

/// Scaled dot-product attention ([`FlexKernels::towers_attention`]) of f32 `q`, `k` and `v`
/// (`[batch, heads, seq, d]`) on one flex device: the scores by `rule`, masked where `mask` is
/// `true`, plus `bias` (a constant: its gradient is not computed), each of the scores' shape or
/// 1 on an axis it is the same along; the weights through the `dropout` drawn, if any. `None`
/// elsewhere.
pub(super) fn attention(
    [q, k, v]: [&Tensor<4>; 3],
    mask: Option<Tensor<4, Bool>>,
    bias: Option<Tensor<4>>,
    rule: ScoreRule,
    dropout: Option<DrawnDropout>,
) -> Option<Tensor<4>> {
    let device = q.device();
    let on_device = |x: &Tensor<4>| on_flex(x) && x.device() == device;
    if !([q, k, v].into_iter().all(on_device) && bias.as_ref().is_none_or(on_device)) {
        return None;
    }
    let [batch, heads, seq_q, _] = q.dims();
    let scores_shape = [batch, heads, seq_q, k.dims()[2]];
    let mask = mask.map(|mask| {
        let (dims, masked) = (mask.dims(), mask.into_data().try_to_vec::<bool>());
        ScoreMask::new(masked.expect("a boolean mask"), dims, scores_shape, "mask")
    });
    let bias = bias.map(|bias| {
        let (dims, values) = (bias.dims(), bias.into_data().try_to_vec::<f32>());
        ScoreBias::new(values.expect("an f32 bias"), dims, scores_shape, "bias")
    });
    let scores = Scores {
        scale: rule.scale,
        softcap: rule.softcap,
        causal: rule.causal,
        mask,
        fill: rule.fill,
        bias,
        dropout: dropout.map(DrawnDropout::mask),
    };
    let [q, k, v] = [q, k, v].map(|x| x.clone().into_dispatch());
    let y = <Dispatch as FlexKernels>::towers_attention(q, k, v, scores);
    Some(Tensor::from_dispatch(y))
}

/// The recurrence of an LSTM layer ([`FlexKernels::towers_lstm`]) on flex tensors: `xw` the
/// input's projection for every step (`[batch, steps, 4 · hidden]`, gates `[i, f, g, o]`),
/// `w_hh` the hidden state's weights (`[hidden, 4 · hidden]`), from `h0` and `c0`.
pub(super) fn lstm_recurrence(
    xw: Tensor<3>,
    w_hh: Tensor<2>,
    [h0, c0]: [Tensor<2>; 2],
    reverse: bool,
) -> Tensor<3> {
    let out = <Dispatch as FlexKernels>::towers_lstm(
        xw.into_dispatch(),
        w_hh.into_dispatch(),
        h0.into_dispatch(),
        c0.into_dispatch(),
        reverse,
    );
    Tensor::from_dispatch(out)
}

/// The recurrence of a GRU layer ([`FlexKernels::towers_gru`]) on flex tensors: `xw` the
/// input's projection for every step and its biases (`[batch, steps, 3 · hidden]`, gates `[z, r,
/// n]`), `w_hh` and `b_hh` the hidden state's weights and biases, from `h0`.
pub(super) fn gru_recurrence(
    xw: Tensor<3>,
    w_hh: Tensor<2>,
    b_hh: Tensor<1>,
    h0: Tensor<2>,
    reverse: bool,
) -> Tensor<3> {
    let out = <Dispatch as FlexKernels>::towers_gru(
        xw.into_dispatch(),
        w_hh.into_dispatch(),
        b_hh.into_dispatch(),
        h0.into_dispatch(),
        reverse,
    );
    Tensor::from_dispatch(out)
}

/// A layer norm (or RMS norm: `norm`) of an f32 `x` over its last dimension, of that
/// dimension's `gamma` and `beta` (none: zeros).
pub(super) fn layer_norm<const D: usize>(
    x: &Tensor<D>,
    gamma: &Tensor<1>,
    beta: Option<&Tensor<1>>,
    epsilon: f64,
    norm: RowNorm,
) -> Option<Tensor<D>> {
    let dims = x.dims();
    let d = dims[D - 1];
    if !on_flex(x) || gamma.dims() != [d] || gamma.dtype() != DType::F32 {
        return None;
    }
    let beta = beta
        .cloned()
        .unwrap_or_else(|| Tensor::zeros([d], &x.device()));
    let rows = dims.iter().product::<usize>() / d;
    let y = <Dispatch as FlexKernels>::towers_layer_norm(
        x.clone().reshape([rows, d]).into_dispatch(),
        gamma.clone().into_dispatch(),
        beta.into_dispatch(),
        epsilon,
        norm,
    );
    Some(Tensor::<2>::from_dispatch(y).reshape(dims))
}

/// `x · Φ(x)` (GELU), or with `approximate` its tanh approximation.
pub(super) fn gelu<const D: usize>(x: &Tensor<D>, approximate: bool) -> Option<Tensor<D>> {
    match approximate {
        false => activation(x, Activation::Gelu),
        true => activation(x, Activation::GeluTanh),
    }
}

/// Softmax (or with `quiet`, Burn's quiet softmax) of an f32 `x` along `dim`: along the last
/// dimension as it is, along another swapped to the last and back.
pub(super) fn softmax<const D: usize>(x: &Tensor<D>, dim: usize, quiet: bool) -> Option<Tensor<D>> {
    if !on_flex(x) {
        return None;
    }
    let last = D - 1;
    let x = x.clone().swap_dims(dim, last).into_dispatch();
    let y = <Dispatch as FlexKernels>::towers_softmax(x, quiet);
    Some(Tensor::<D>::from_dispatch(y).swap_dims(dim, last))
}

/// `activation` of every value.
fn activation<const D: usize>(x: &Tensor<D>, activation: Activation) -> Option<Tensor<D>> {
    if !on_flex(x) {
        return None;
    }
    let x = x.clone().into_dispatch();
    let y = <Dispatch as FlexKernels>::towers_activation(x, activation);
    Some(Tensor::from_dispatch(y))
}

/// `towers_models::Lrn`'s normalization with its `[bias, alpha, beta]`.
pub fn lrn(x: &Tensor<4>, radius: usize, [bias, alpha, beta]: [f64; 3]) -> Option<Tensor<4>> {
    if !on_flex(x) {
        return None;
    }
    let (bias, alpha, beta) = (bias as f32, alpha as f32, beta as f32);
    let x = x.clone().into_dispatch();
    let y = <Dispatch as FlexKernels>::towers_lrn(x, radius, bias, alpha, beta);
    Some(Tensor::from_dispatch(y))
}

/// In f32 or bf16 (products on AMX tiles or with AVX-512 BF16 where the CPU has them); f16
/// goes to Burn.
pub fn conv2d(conv: &Conv2d, x: &Tensor<4>, precision: Precision) -> Option<Tensor<4>> {
    let Covered { x, padding, bf16 } = covered(conv, x, precision)?;
    let weight = conv.weight.val().into_dispatch();
    let y = <Dispatch as FlexKernels>::towers_conv2d(
        x.into_dispatch(),
        weight,
        conv.stride,
        padding,
        bf16,
    );
    Some(plus_bias(&conv.bias, Tensor::from_dispatch(y)))
}

/// `y` with `bias`, where there is one, added per channel.
fn plus_bias(bias: &Option<Param<Tensor<1>>>, y: Tensor<4>) -> Tensor<4> {
    match bias {
        Some(bias) => y + bias.val().reshape([1, -1, 1, 1]),
        None => y,
    }
}

/// A transposed convolution of an f32 `x` without groups or dilation, its output padding less
/// than its stride (as PyTorch requires; the rows past it would have no window), in f32 or
/// bf16 (f16 goes to Burn).
pub(super) fn conv_transpose2d(
    conv: &ConvTranspose2d,
    x: &Tensor<4>,
    precision: Precision,
) -> Option<Tensor<4>> {
    let bf16 = match precision {
        Precision::F32 => false,
        Precision::Bf16 => true,
        Precision::F16 => return None,
    };
    let ([_, _, h, w], [_, _, kh, kw]) = (x.dims(), conv.weight.dims());
    let side = |len: usize, k: usize, i: usize| {
        let full = (len - 1) * conv.stride[i] + k + conv.padding_out[i];
        full.checked_sub(2 * conv.padding[i])
            .filter(|&side| side > 0)
    };
    let plain = conv.groups == 1 && conv.dilation == [1, 1];
    let padded_out = (0..2).all(|i| conv.padding_out[i] < conv.stride[i]);
    if !on_flex(x) || !plain || !padded_out {
        return None;
    }
    let out = [side(h, kh, 0)?, side(w, kw, 1)?];
    let y = <Dispatch as FlexKernels>::towers_conv_transpose2d(
        x.clone().into_dispatch(),
        conv.weight.val().into_dispatch(),
        conv.stride,
        conv.padding,
        out,
        bf16,
    );
    Some(plus_bias(&conv.bias, Tensor::from_dispatch(y)))
}

/// A depthwise convolution (`groups` = channels in = channels out, no dilation) of an f32 `x`
/// with any padding, in f32 whatever the precision (see `flex/conv/depthwise.rs`).
pub(super) fn depthwise_conv2d(conv: &Conv2d, x: &Tensor<4>) -> Option<Tensor<4>> {
    let [_, c, h, w] = x.dims();
    let [out, per_group, kh, kw] = conv.weight.dims();
    let depthwise = conv.groups == c && out == c && per_group == 1 && conv.dilation == [1, 1];
    let (rows, cols) = conv_padding(&conv.padding, [h, w], conv.kernel_size, conv.stride);
    if !on_flex(x) || !depthwise || !kernel_fits([kh, kw], [h, w], (rows, cols)) {
        return None;
    }
    let side = |len: usize, (before, after), k: usize, s: usize| (len + before + after - k) / s + 1;
    let out = [
        side(h, rows, kh, conv.stride[0]),
        side(w, cols, kw, conv.stride[1]),
    ];
    let y = <Dispatch as FlexKernels>::towers_depthwise_conv2d(
        x.clone().into_dispatch(),
        conv.weight.val().into_dispatch(),
        conv.stride,
        [rows.0, cols.0],
        out,
    );
    Some(plus_bias(&conv.bias, Tensor::from_dispatch(y)))
}

/// [`conv2d`] then its bias and ReLU in one pass: for a convolution with a bias.
pub(super) fn conv2d_relu(conv: &Conv2d, x: &Tensor<4>, precision: Precision) -> Option<Tensor<4>> {
    let bias = conv.bias.as_ref()?.val().into_dispatch();
    let Covered { x, padding, bf16 } = covered(conv, x, precision)?;
    let y = <Dispatch as FlexKernels>::towers_conv2d_bias_relu(
        x.into_dispatch(),
        conv.weight.val().into_dispatch(),
        bias,
        conv.stride,
        padding,
        bf16,
    );
    Some(Tensor::from_dispatch(y))
}

/// What the kernels take for `conv` on `x`: the input, the padding before and after it, and
/// whether the products are in bf16.
struct Covered {
    x: Tensor<4>,
    padding: [usize; 2],
    bf16: bool,
}

/// [`Covered`], when the kernels cover `conv` on `x` in `precision`: f32 or bf16 flex tensors,
/// no groups or dilation. The kernels pad as much after as before: an uneven padding (TF's
/// SAME at stride 2 on an even side, Keras's `padding="same"`) is taken as its even part, the
/// rest added to an f32 input as zeros first (a copy of the input, which Burn's convolution
/// makes too).
fn covered(conv: &Conv2d, x: &Tensor<4>, precision: Precision) -> Option<Covered> {
    let [_, _, h, w] = x.dims();
    let (rows, cols) = conv_padding(&conv.padding, [h, w], conv.kernel_size, conv.stride);
    let symmetric = symmetric([rows, cols]).is_some();
    let fits = kernel_fits(conv.kernel_size, [h, w], (rows, cols));
    let bf16 = match precision {
        Precision::F32 => false,
        Precision::Bf16 => true,
        Precision::F16 => return None,
    };
    let plain = conv.groups == 1 && conv.dilation == [1, 1];
    // f32 inputs, or in bf16 inputs already rounded to it (and padded evenly).
    let input = on_flex(x) || bf16 && symmetric && on_flex_in(x, DType::BF16);
    if !(input && plain && fits) {
        return None;
    }
    let even = [rows.0.min(rows.1), cols.0.min(cols.1)];
    let x = match symmetric {
        true => x.clone(),
        false => x.clone().pad(
            [
                (0, 0),
                (0, 0),
                (rows.0 - even[0], rows.1 - even[0]),
                (cols.0 - even[1], cols.1 - even[1]),
            ],
            PadMode::Constant(0.0),
        ),
    };
    Some(Covered {
        x,
        padding: even,
        bf16,
    })
}

/// Whether a `[kh, kw]` window fits an `[h, w]` input padded by `rows` and `cols` (before,
/// after). A window larger than the padded input has no output: Burn's error to report, not
/// the kernels'.
fn kernel_fits(
    [kh, kw]: [usize; 2],
    [h, w]: [usize; 2],
    (rows, cols): ((usize, usize), (usize, usize)),
) -> bool {
    h + rows.0 + rows.1 >= kh && w + cols.0 + cols.1 >= kw
}
