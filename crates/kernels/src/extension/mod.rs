//! [`FlexKernels`]: the Burn backend extension through which [`crate::dispatch`] reaches the
//! kernels of [`crate::flex`], for flex (here) and for autodiff over flex, whose backward passes
//! `autodiff.rs` writes by hand.

mod autodiff;

use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, Flex, backend_extension};

use crate::flex::activation::{Activation, relu6_forward};
use crate::flex::attention::{self, Scores};
use crate::flex::conv::depth_windows::{self, DepthWindows};
use crate::flex::conv::depthwise::{self, DepthwiseGeometry};
use crate::flex::conv::passes::{ConvGeometry, forward, forward_bias_relu, transposed};
use crate::flex::dropout::{self, DropoutMask};
use crate::flex::gemm::arithmetic::Arithmetic;
use crate::flex::gemm::matmul;
use crate::flex::interpolate;
use crate::flex::norm::layer_norm::{self, RowNorm};
use crate::flex::norm::lrn::{LrnParams, lrn_forward};
use crate::flex::norm::{batch_norm, group_norm};
use crate::flex::optimizer_update::{Update, update};
use crate::flex::pool::avg_pool::{AvgPoolShape, avg_pool_forward};
use crate::flex::pool::batch_norm_max_pool;
use crate::flex::pool::max_pool::MaxPoolShape;
use crate::flex::pool::padded_max_pool;
use crate::flex::pool::window_mean::{self, MeanWindows};
use crate::flex::prelu::{self, Channels};
use crate::flex::recurrent::{gru, lstm};
use crate::flex::rotary;
use crate::flex::softmax;

/// Max pooling, LRN, convolution and the like by burn-towers' kernels, and optimizers'
/// updates. Called through Burn's `Dispatch` on f32 flex tensors only
/// ([`crate::dispatch`] checks); other backends are not routed here.
#[backend_extension(Flex, Autodiff)]
pub(crate) trait FlexKernels: Backend {
    /// Max pooling of `[n, c, h, w]` without dilation, `padding` rows above and below and
    /// columns left and right (as [`padded_max_pool::pads_like_burn`] allows).
    fn towers_max_pool2d(
        x: FloatTensor<Self>,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        ceil_mode: bool,
    ) -> FloatTensor<Self>;

    /// Local response normalization across the channels of `[n, c, h, w]`, as `tf.nn.lrn`.
    fn towers_lrn(
        x: FloatTensor<Self>,
        radius: usize,
        bias: f32,
        alpha: f32,
        beta: f32,
    ) -> FloatTensor<Self>;

    /// Convolution of `[n, in, h, w]` by `[out, in, kh, kw]`: no bias, groups or dilation,
    /// the same zero padding before and after; with `bf16`, its products (and its gradients')
    /// from operands rounded to bf16, summed in f32.
    fn towers_conv2d(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        stride: [usize; 2],
        padding: [usize; 2],
        bf16: bool,
    ) -> FloatTensor<Self>;

    /// Transposed convolution of `[n, in, h, w]` by `[in, out, kh, kw]` to `[n, out, out_h,
    /// out_w]` (`out`): no bias, groups or dilation, `padding` taken from both sides; with
    /// `bf16`, its products (and its gradients') from operands rounded to bf16, summed in f32.
    fn towers_conv_transpose2d(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        stride: [usize; 2],
        padding: [usize; 2],
        out: [usize; 2],
        bf16: bool,
    ) -> FloatTensor<Self>;

    /// `γ·(x - mean)/√(var + ε) + β` per group of `groups` of `[n, c, places]`: each image's
    /// channels in `groups` groups, normalized over their channels and places (Burn's
    /// `GroupNorm`, affine).
    fn towers_group_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        groups: usize,
        epsilon: f64,
    ) -> FloatTensor<Self>;

    /// `γ·(x - mean)/√(var + ε) + β` of each row of `[rows, d]` (Burn's `LayerNorm`); with
    /// [`RowNorm::Rms`], `γ·x/√(mean(x²) + ε) + β` (Burn's `RmsNorm`, `β` zeros).
    fn towers_layer_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
        norm: RowNorm,
    ) -> FloatTensor<Self>;

    /// `min(max(x, 0), 6)` of every value; its gradient passes where `0 < x < 6`.
    fn towers_relu6(x: FloatTensor<Self>) -> FloatTensor<Self>;

    /// `activation` of every value (SiLU, hard swish, hard sigmoid).
    fn towers_activation(x: FloatTensor<Self>, activation: Activation) -> FloatTensor<Self>;

    /// `x` where `x ≥ 0`, `alpha[c] · x` below (`crate::flex::prelu`), value `i` in channel `c =
    /// i / layout.inner % layout.channels`.
    fn towers_prelu(
        x: FloatTensor<Self>,
        alpha: FloatTensor<Self>,
        layout: Channels,
    ) -> FloatTensor<Self>;

    /// Softmax over the last dimension (with `quiet`, Burn's quiet softmax: a 1 added to each
    /// row's sum of exponentials).
    fn towers_softmax(x: FloatTensor<Self>, quiet: bool) -> FloatTensor<Self>;

    /// Dropout of every value (`crate::flex::dropout`): kept with probability `1 - prob` and
    /// scaled by `1 / (1 - prob)`, the mask drawn from `seed` and each value's index.
    fn towers_dropout(x: FloatTensor<Self>, prob: f64, seed: u64) -> FloatTensor<Self>;

    /// `[n, c, h, w]` resized to `[n, c, out[0], out[1]]` by bilinear interpolation
    /// (`crate::flex::interpolate`), input and output aligned by their corner pixels or not.
    fn towers_bilinear(
        x: FloatTensor<Self>,
        out: [usize; 2],
        align_corners: bool,
    ) -> FloatTensor<Self>;

    /// An LSTM layer's recurrence over a whole sequence (`crate::flex::recurrent::lstm`): `xw`
    /// `[batch, steps, 4 · hidden]` (the input's projection and both biases, gates `[i, f, g, o]`),
    /// `w_hh` `[hidden, 4 · hidden]`, from `h0` and `c0` `[batch, hidden]`, the steps from the
    /// last to the first with `reverse`: `[batch, steps + 1, hidden]`, each step's hidden state
    /// at its time index, then the last cell.
    fn towers_lstm(
        xw: FloatTensor<Self>,
        w_hh: FloatTensor<Self>,
        h0: FloatTensor<Self>,
        c0: FloatTensor<Self>,
        reverse: bool,
    ) -> FloatTensor<Self>;

    /// A GRU layer's recurrence over a whole sequence (`crate::flex::recurrent::gru`): `xw`
    /// `[batch, steps, 3 · hidden]` (the input's projection and its biases, gates `[z, r, n]`),
    /// `w_hh` `[hidden, 3 · hidden]` and `b_hh` `[3 · hidden]`, from `h0` `[batch, hidden]`, the
    /// steps from the last to the first with `reverse`: each step's hidden state at its time
    /// index, `[batch, steps, hidden]`.
    fn towers_gru(
        xw: FloatTensor<Self>,
        w_hh: FloatTensor<Self>,
        b_hh: FloatTensor<Self>,
        h0: FloatTensor<Self>,
        reverse: bool,
    ) -> FloatTensor<Self>;

    /// Depthwise convolution of `[n, c, h, w]` by `[c, 1, kh, kw]` (one filter per channel) in
    /// f32: zero `padding` before the first row and column, an `[oh, ow]` output (the padding
    /// after is what that leaves).
    fn towers_depthwise_conv2d(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        stride: [usize; 2],
        padding: [usize; 2],
        out: [usize; 2],
    ) -> FloatTensor<Self>;

    /// `relu(towers_conv2d(x, weight) + bias)`, the bias per output channel.
    fn towers_conv2d_bias_relu(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: FloatTensor<Self>,
        stride: [usize; 2],
        padding: [usize; 2],
        bf16: bool,
    ) -> FloatTensor<Self>;

    /// `relu((x - mean)/√(var + epsilon) + beta)` per channel of `[n, c, h, w]` on the batch's
    /// own statistics, and those statistics, `[2, c]` (mean, biased variance; no gradient).
    /// The output's gradient counts the statistics' dependence on `x`. The output is f32, or
    /// bf16 when `rounded` (for a tensor only bf16 convolutions read; its gradient is f32).
    fn towers_batch_norm_relu(
        x: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
        rounded: bool,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// [`towers_max_pool2d`](Self::towers_max_pool2d) of
    /// [`towers_batch_norm_relu`](Self::towers_batch_norm_relu)'s output, and the statistics.
    fn towers_batch_norm_relu_max_pool(
        x: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
        kernel: [usize; 2],
        stride: [usize; 2],
        ceil_mode: bool,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// [`towers_batch_norm_relu_max_pool`](Self::towers_batch_norm_relu_max_pool) on given
    /// `[2, c]` `moments` (the moving averages), constants to its gradient.
    fn towers_batch_norm_relu_max_pool_given(
        x: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        moments: FloatTensor<Self>,
        epsilon: f64,
        kernel: [usize; 2],
        stride: [usize; 2],
        ceil_mode: bool,
    ) -> FloatTensor<Self>;

    /// [`towers_batch_norm_relu`](Self::towers_batch_norm_relu) on given `[2, c]` `moments`
    /// (the moving averages), constants to its gradient.
    fn towers_batch_norm_relu_given(
        x: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        moments: FloatTensor<Self>,
        epsilon: f64,
        rounded: bool,
    ) -> FloatTensor<Self>;

    /// `gamma·(x - mean)/√(var + epsilon) + beta` per channel of `[n, c, h, w]` on the batch's
    /// own statistics (Burn's `batch_norm_train`), and those statistics, `[2, c]` (mean, biased
    /// variance; no gradient). The output's gradient counts the statistics' dependence on `x`.
    fn towers_batch_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// [`towers_batch_norm`](Self::towers_batch_norm) on given `[2, c]` `moments` (the moving
    /// averages: Burn's `batch_norm`), constants to its gradient.
    fn towers_batch_norm_given(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        moments: FloatTensor<Self>,
        epsilon: f64,
    ) -> FloatTensor<Self>;

    /// A dense layer's product `x · w` for `[n, k]` and `[k, m]`, in `arithmetic`.
    fn towers_dense_product(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        arithmetic: Arithmetic,
    ) -> FloatTensor<Self>;

    /// Average pooling of `[n, c, h, w]` at stride 1, the same zero padding before and after.
    fn towers_avg_pool2d(
        x: FloatTensor<Self>,
        kernel: [usize; 2],
        padding: [usize; 2],
        counts_padding: bool,
    ) -> FloatTensor<Self>;

    /// Average pooling of `[n, c, h, w]` in `windows` (strided, or adaptive to an output size).
    fn towers_window_mean(x: FloatTensor<Self>, windows: MeanWindows) -> FloatTensor<Self>;

    /// A 3D convolution's depth windows of `[n, c, d, h, w]` as `[n · od, kernel · c, h, w]`
    /// images (zeros in the depth padding).
    fn towers_depth_windows(x: FloatTensor<Self>, windows: DepthWindows) -> FloatTensor<Self>;

    /// Rotary position encoding of `[rows, seq, d]` by Burn's table `freq` (`[seq, d, 2]`),
    /// a constant to the gradient.
    fn towers_rotary(x: FloatTensor<Self>, freq: FloatTensor<Self>) -> FloatTensor<Self>;

    /// Scaled dot-product attention of `q` (`[batch, heads, seq_q, d]`) to `k` (`[batch,
    /// heads, seq_k, d]`) and `v` (`[batch, heads, seq_k, d_v]`), the scores made weights as
    /// `scores` says: `[batch, heads, seq_q, d_v]`.
    fn towers_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        scores: Scores,
    ) -> FloatTensor<Self>;

    /// An optimizer's update of one parameter (`update`: RMSProp's, Adam's or SGD's), in one
    /// pass: the weight and its two slots after a step on `grad` (all of one shape). An update
    /// that keeps fewer slots ([`Update::slots`]) takes the first and hands the others back as
    /// they came (placeholders: the macro passes no `Option` or `Vec` of tensors). No gradient.
    fn towers_optimizer_update(
        weight: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        slot_1: FloatTensor<Self>,
        slot_2: FloatTensor<Self>,
        update: Update,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>);
}

/// Without autodiff: the forward passes alone.
impl FlexKernels for Flex {
    fn towers_max_pool2d(
        x: FloatTensor<Self>,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        ceil_mode: bool,
    ) -> FloatTensor<Self> {
        let shape = MaxPoolShape::new(kernel, stride, ceil_mode);
        padded_max_pool::max_pool_forward_padded(x, shape, padding).0
    }

    fn towers_lrn(
        x: FloatTensor<Self>,
        radius: usize,
        bias: f32,
        alpha: f32,
        beta: f32,
    ) -> FloatTensor<Self> {
        lrn_forward(x, LrnParams::new(radius, bias, alpha, beta)).0
    }

    fn towers_conv2d(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        stride: [usize; 2],
        padding: [usize; 2],
        bf16: bool,
    ) -> FloatTensor<Self> {
        forward(
            x,
            weight,
            ConvGeometry { stride, padding },
            Arithmetic::new(bf16),
        )
    }

    fn towers_conv_transpose2d(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        stride: [usize; 2],
        padding: [usize; 2],
        out: [usize; 2],
        bf16: bool,
    ) -> FloatTensor<Self> {
        let geometry = ConvGeometry { stride, padding };
        transposed(x, weight, geometry, out, Arithmetic::new(bf16))
    }

    fn towers_group_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        groups: usize,
        epsilon: f64,
    ) -> FloatTensor<Self> {
        group_norm::forward(x, [&gamma, &beta], groups, epsilon).0
    }

    fn towers_layer_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
        norm: RowNorm,
    ) -> FloatTensor<Self> {
        layer_norm::forward(x, [&gamma, &beta], epsilon, norm).0
    }

    fn towers_relu6(x: FloatTensor<Self>) -> FloatTensor<Self> {
        relu6_forward(x)
    }

    fn towers_activation(x: FloatTensor<Self>, activation: Activation) -> FloatTensor<Self> {
        activation.forward(x)
    }

    fn towers_prelu(
        x: FloatTensor<Self>,
        alpha: FloatTensor<Self>,
        layout: Channels,
    ) -> FloatTensor<Self> {
        prelu::forward(x, &alpha, layout)
    }

    fn towers_softmax(x: FloatTensor<Self>, quiet: bool) -> FloatTensor<Self> {
        softmax::forward(x, quiet)
    }

    fn towers_dropout(x: FloatTensor<Self>, prob: f64, seed: u64) -> FloatTensor<Self> {
        dropout::forward(x, DropoutMask::new(prob, seed))
    }

    fn towers_bilinear(
        x: FloatTensor<Self>,
        out: [usize; 2],
        align_corners: bool,
    ) -> FloatTensor<Self> {
        interpolate::forward(x, out, align_corners)
    }

    fn towers_lstm(
        xw: FloatTensor<Self>,
        w_hh: FloatTensor<Self>,
        h0: FloatTensor<Self>,
        c0: FloatTensor<Self>,
        reverse: bool,
    ) -> FloatTensor<Self> {
        lstm::forward(xw, &w_hh, [&h0, &c0], reverse).0
    }

    fn towers_gru(
        xw: FloatTensor<Self>,
        w_hh: FloatTensor<Self>,
        b_hh: FloatTensor<Self>,
        h0: FloatTensor<Self>,
        reverse: bool,
    ) -> FloatTensor<Self> {
        gru::forward(xw, [&w_hh, &b_hh], &h0, reverse).0
    }

    fn towers_depthwise_conv2d(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        stride: [usize; 2],
        padding: [usize; 2],
        out: [usize; 2],
    ) -> FloatTensor<Self> {
        let geometry = DepthwiseGeometry {
            stride,
            padding,
            out,
        };
        depthwise::forward(x, weight, geometry)
    }

    fn towers_conv2d_bias_relu(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: FloatTensor<Self>,
        stride: [usize; 2],
        padding: [usize; 2],
        bf16: bool,
    ) -> FloatTensor<Self> {
        let geometry = ConvGeometry { stride, padding };
        forward_bias_relu(x, weight, bias, geometry, Arithmetic::new(bf16))
    }

    fn towers_batch_norm_relu(
        x: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
        rounded: bool,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        batch_norm::forward_training(x, &beta, epsilon, rounded)
    }

    fn towers_batch_norm_relu_max_pool(
        x: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
        kernel: [usize; 2],
        stride: [usize; 2],
        ceil_mode: bool,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let shape = MaxPoolShape::new(kernel, stride, ceil_mode);
        let (y, moments, _) = batch_norm_max_pool::forward(x, (&beta, None), epsilon, shape);
        (y, moments)
    }

    fn towers_batch_norm_relu_max_pool_given(
        x: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        moments: FloatTensor<Self>,
        epsilon: f64,
        kernel: [usize; 2],
        stride: [usize; 2],
        ceil_mode: bool,
    ) -> FloatTensor<Self> {
        let shape = MaxPoolShape::new(kernel, stride, ceil_mode);
        batch_norm_max_pool::forward(x, (&beta, Some(moments)), epsilon, shape).0
    }

    fn towers_batch_norm_relu_given(
        x: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        moments: FloatTensor<Self>,
        epsilon: f64,
        rounded: bool,
    ) -> FloatTensor<Self> {
        batch_norm::forward(x, beta, moments, epsilon, rounded)
    }

    fn towers_batch_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        batch_norm::affine_forward_training(x, [&gamma, &beta], epsilon)
    }

    fn towers_batch_norm_given(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        moments: FloatTensor<Self>,
        epsilon: f64,
    ) -> FloatTensor<Self> {
        batch_norm::affine_forward(x, [&gamma, &beta], &moments, epsilon)
    }

    fn towers_dense_product(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        arithmetic: Arithmetic,
    ) -> FloatTensor<Self> {
        matmul::forward(x, w, arithmetic)
    }

    fn towers_avg_pool2d(
        x: FloatTensor<Self>,
        kernel: [usize; 2],
        padding: [usize; 2],
        counts_padding: bool,
    ) -> FloatTensor<Self> {
        let shape = AvgPoolShape {
            kernel,
            padding,
            counts_padding,
        };
        avg_pool_forward(x, shape)
    }

    fn towers_window_mean(x: FloatTensor<Self>, windows: MeanWindows) -> FloatTensor<Self> {
        window_mean::forward(x, windows)
    }

    fn towers_rotary(x: FloatTensor<Self>, freq: FloatTensor<Self>) -> FloatTensor<Self> {
        rotary::forward(x, &freq)
    }

    fn towers_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        scores: Scores,
    ) -> FloatTensor<Self> {
        attention::forward(&q, &k, &v, &scores).0
    }

    fn towers_depth_windows(x: FloatTensor<Self>, windows: DepthWindows) -> FloatTensor<Self> {
        depth_windows::gather(x, windows)
    }

    fn towers_optimizer_update(
        weight: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        slot_1: FloatTensor<Self>,
        slot_2: FloatTensor<Self>,
        how: Update,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        let mut kept = vec![slot_1, slot_2];
        let unused = kept.split_off(how.slots());
        let (weight, mut slots) = update(weight, grad, kept, how);
        slots.extend(unused);
        let [slot_1, slot_2] = slots.try_into().expect("two slots in, two out");
        (weight, slot_1, slot_2)
    }
}
