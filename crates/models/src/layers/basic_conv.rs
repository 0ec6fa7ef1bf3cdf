//! [`BasicConv`]: Inception v3's convolution unit (convolution without bias, offset-only batch
//! norm, ReLU), built of this crate's [`OffsetBatchNorm`](super::OffsetBatchNorm) and
//! `towers_kernels`' convolutions.

use crate::layers::{OffsetBatchNorm, OffsetBatchNormConfig, truncated_normal};
use burn::config::Config;
use burn::module::Module;
use burn::nn::PaddingConfig2d;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::pool::AvgPool2d;
use burn::tensor::{Device, Tensor};
use towers_kernels::{avg_pool2d, conv_images, conv2d};

/// Configuration of [`BasicConv`]; the defaults are TF-slim Inception v3's `conv2d` arg scope.
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct BasicConvConfig {
    /// `[in, out]` channels.
    pub channels: [usize; 2],
    /// `[height, width]` of the kernel.
    pub kernel_size: [usize; 2],
    /// `[height, width]` strides.
    #[config(default = "[1, 1]")]
    pub stride: [usize; 2],
    /// TF's SAME (pads more at the bottom and right when odd) or VALID.
    #[config(default = "PaddingConfig2d::Same")]
    pub padding: PaddingConfig2d,
    /// Standard deviation of the truncated-normal weights.
    #[config(default = 0.1)]
    pub stddev: f64,
    /// Batch-norm epsilon.
    #[config(default = 1e-3)]
    pub epsilon: f64,
    /// Batch-norm momentum in Burn's convention, `1 - TF decay`.
    #[config(default = "1.0 - 0.9997")]
    pub momentum: f64,
}

/// Convolution without bias, batch norm with offset only, ReLU: every convolution of
/// Inception v3 (the batch norm's beta stands in for the bias).
#[derive(Module, Debug)]
pub struct BasicConv {
    /// Weights `[out, in, kh, kw]`, no bias.
    pub conv: Conv2d,
    /// Offset-only batch norm.
    pub bn: OffsetBatchNorm,
}

impl BasicConvConfig {
    /// Initializes the layer; weights are drawn lazily on first use.
    pub fn init(&self, device: &Device) -> BasicConv {
        let [c_in, c_out] = self.channels;
        let [kh, kw] = self.kernel_size;
        let mut conv = Conv2dConfig::new(self.channels, self.kernel_size)
            .with_stride(self.stride)
            .with_padding(self.padding.clone())
            .with_bias(false)
            .init(device);
        conv.weight = truncated_normal([c_out, c_in, kh, kw], self.stddev, device);
        let bn = OffsetBatchNormConfig::new(c_out)
            .with_epsilon(self.epsilon)
            .with_momentum(self.momentum)
            .init(device);
        BasicConv { conv, bn }
    }
}

impl BasicConv {
    /// `[n, in, h, w]` to `[n, out, h', w']`.
    pub fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        self.bn.forward_relu(conv2d(&self.conv, x))
    }

    /// [`forward`](Self::forward) for an output that only `next` reads, handed on as `next`
    /// reads it best ([`OffsetBatchNorm::forward_relu_into`]: in bf16 on the direct vector
    /// kernels, rounded to bf16 already).
    pub fn forward_into(&self, x: Tensor<4>, next: &BasicConv) -> Tensor<4> {
        self.bn.forward_relu_into(conv2d(&self.conv, x), &next.conv)
    }

    /// [`forward`](Self::forward) of `pool`'s output (Inception's pooling branches), computed
    /// as the pool of the convolution's output when the convolution is 1x1 at stride 1: it mixes
    /// channels place by place and the average pool mixes places channel by channel with
    /// weights common to all channels (whether or not it counts the padding), so the two
    /// commute, and pooling the convolution's fewer channels (192 of Inception's 768 to 2,048)
    /// is a fraction of the work, forward and backward.
    pub fn forward_pooled(&self, pool: &AvgPool2d, x: Tensor<4>) -> Tensor<4> {
        let pointwise = self.conv.kernel_size == [1, 1]
            && self.conv.stride == [1, 1]
            && self.conv.dilation == [1, 1]
            && matches!(
                self.conv.padding,
                PaddingConfig2d::Same | PaddingConfig2d::Valid
            );
        match pointwise {
            true => self
                .bn
                .forward_relu(avg_pool2d(pool, conv2d(&self.conv, x))),
            false => self.forward(avg_pool2d(pool, x)),
        }
    }

    /// [`forward`](Self::forward) of an input that needs no gradient (a network's images),
    /// the convolution by [`conv_images`].
    pub fn forward_images(&self, images: Tensor<4>) -> Tensor<4> {
        self.bn.forward_relu(conv_images(&self.conv, images))
    }

    /// [`forward_into`](Self::forward_into) of an input that needs no gradient (a network's
    /// images), the convolution by [`conv_images`].
    pub fn forward_images_into(&self, images: Tensor<4>, next: &BasicConv) -> Tensor<4> {
        self.bn
            .forward_relu_into(conv_images(&self.conv, images), &next.conv)
    }
}

#[cfg(all(test, feature = "flex"))]
mod tests {
    use super::*;
    use burn::nn::pool::AvgPool2dConfig;
    use burn::tensor::{Distribution, Tensor};
    use towers_testing::compare::rel_diff;

    /// The pooling branch computed convolution first equals it computed pool first, outputs
    /// and the gradients of the input, the kernel and the offset (of outputs away from the
    /// ReLU's bend), with and without the padding counted in the averages.
    #[test]
    fn pooling_after_a_1x1_convolution_is_pooling_before_it() {
        let device = Device::flex().autodiff();
        for counts_padding in [false, true] {
            let pool = AvgPool2dConfig::new([3, 3])
                .with_strides([1, 1])
                .with_padding(PaddingConfig2d::Same)
                .with_count_include_pad(counts_padding)
                .init();
            let layer = BasicConvConfig::new([24, 8], [1, 1]).init(&device);
            let x = Tensor::<4>::random([3, 24, 7, 9], Distribution::Normal(0.0, 1.0), &device)
                .require_grad();
            // A weighted sum, so that every output's gradient differs; none where the ReLU's
            // input is within 1e-3 of 0 (or below it), where the two orders may round to its
            // two sides and rightly disagree on the gradient.
            let active = (layer.forward(avg_pool2d(&pool, x.clone())).detach())
                .greater_elem(1e-3)
                .float();
            let weights =
                Tensor::<4>::random([3, 8, 7, 9], Distribution::Default, &device) * active;
            let outputs_and_grads = |y: Tensor<4>| {
                let mut grads = (y.clone() * weights.clone()).sum().backward();
                let x_grad = x.grad_remove(&mut grads).unwrap();
                let kernel_grad = layer.conv.weight.val().grad_remove(&mut grads).unwrap();
                let beta_grad = layer.bn.beta.val().grad_remove(&mut grads).unwrap();
                (y, x_grad, kernel_grad, beta_grad)
            };
            let commuted = outputs_and_grads(layer.forward_pooled(&pool, x.clone()));
            let plain = outputs_and_grads(layer.forward(avg_pool2d(&pool, x.clone())));
            let what = format!("counting the padding: {counts_padding}");
            assert!(rel_diff(commuted.0, plain.0) < 1e-5, "outputs, {what}");
            assert!(
                rel_diff(commuted.1, plain.1) < 1e-5,
                "input gradients, {what}"
            );
            assert!(
                rel_diff(commuted.2, plain.2) < 1e-5,
                "kernel gradients, {what}"
            );
            let beta = rel_diff(
                commuted.3.reshape([1, 1, 1, -1]),
                plain.3.reshape([1, 1, 1, -1]),
            );
            assert!(beta < 1e-5, "offset gradients, {what}");
        }
    }

    /// In bf16, a layer's output handed to the next convolution rounded to bf16 gives the very
    /// bits of handing it in f32 (the convolution rounds its input to bf16 either way): the
    /// next layer's output and the gradients of the input, both kernels and both offsets. For
    /// convolutions that read the rounded input as they are (3x3 and 5x5 at stride 1 on both
    /// of `vector_conv`'s layouts; a 1x7, whose weight gradient builds windows; a 3x3 at
    /// stride 2, windows both ways) and one that widens it (a 1x1, which f32 gemm reads in
    /// place), on every CPU (the kernels that round differ by CPU, and so does the path
    /// taken). And `forward_into` hands it on rounded exactly where the next reads it so, never
    /// to a 1x1.
    #[test]
    fn rounded_outputs_give_the_next_convolution_the_same_bits() {
        use burn::tensor::DType;
        use towers_kernels::reads_rounded;
        use towers_kernels::{Precision, with_precision};
        let device = Device::flex().autodiff();
        let random = |dims: [usize; 4]| Tensor::<4>::random(dims, Distribution::Default, &device);
        let first = BasicConvConfig::new([8, 32], [3, 3]).init(&device);
        // The last field: whether the next may read it rounded (on the direct vector kernels).
        let cases = [
            ([3, 3], [1, 1], 32, true),
            ([3, 3], [1, 1], 24, true),
            ([5, 5], [1, 1], 24, true),
            ([1, 7], [1, 1], 16, true),
            ([1, 1], [1, 1], 16, false),
            ([3, 3], [2, 2], 16, true),
        ];
        for (kernel, stride, out, may_read_rounded) in cases {
            let case = format!("next {kernel:?}/{stride:?} -> {out}");
            let next = BasicConvConfig::new([32, out], kernel)
                .with_stride(stride)
                .init(&device);
            let x = random([2, 8, 11, 13]).require_grad();
            // SAME padding: outputs of 11.div_ceil(stride) x 13.div_ceil(stride).
            let probe = random([
                2,
                out,
                11usize.div_ceil(stride[0]),
                13usize.div_ceil(stride[1]),
            ]);
            let run = |rounded: bool| {
                with_precision(Precision::Bf16, || {
                    let mid = first
                        .bn
                        .normalized_relu(conv2d(&first.conv, x.clone()), rounded);
                    let dtype = mid.dtype();
                    let y = next.forward(mid);
                    let grads = (y.clone() * probe.clone()).sum().backward();
                    let grad = |t: Tensor<4>| t.grad(&grads).unwrap().into_data();
                    let kernels = [&first, &next].map(|l| grad(l.conv.weight.val()));
                    let offsets =
                        [&first, &next].map(|l| l.bn.beta.val().grad(&grads).unwrap().into_data());
                    (dtype, [y.into_data(), grad(x.clone())], kernels, offsets)
                })
            };
            let (plain, rounded) = (run(false), run(true));
            assert_eq!((plain.0, rounded.0), (DType::F32, DType::BF16), "{case}");
            assert_eq!(plain.1, rounded.1, "{case}: output or input gradient");
            assert_eq!(plain.2, rounded.2, "{case}: kernel gradients");
            assert_eq!(plain.3, rounded.3, "{case}: offset gradients");
            let handed = with_precision(Precision::Bf16, || {
                let rounds = reads_rounded(&next.conv, [2, 32, 11, 13]);
                (first.forward_into(x.clone(), &next).dtype(), rounds)
            });
            let expected = match handed.1 {
                true => DType::BF16,
                false => DType::F32,
            };
            assert_eq!(handed.0, expected, "{case}");
            assert!(may_read_rounded || !handed.1, "{case}");
        }
    }

    /// Without autodiff (evaluation, on the moving averages), the same: the next convolution's
    /// output from the rounded output is the very bits of its output from the f32 one, on the
    /// direct vector kernels (3x3) and the windows (stride 2).
    #[test]
    fn rounded_outputs_evaluate_to_the_same_bits() {
        use towers_kernels::{Precision, with_precision};
        let device = Device::flex();
        let first = BasicConvConfig::new([8, 32], [3, 3]).init(&device);
        let x = Tensor::<4>::random([2, 8, 11, 13], Distribution::Default, &device);
        for stride in [[1, 1], [2, 2]] {
            let next = BasicConvConfig::new([32, 24], [3, 3])
                .with_stride(stride)
                .init(&device);
            let run = |rounded: bool| {
                with_precision(Precision::Bf16, || {
                    let mid = first
                        .bn
                        .normalized_relu(conv2d(&first.conv, x.clone()), rounded);
                    next.forward(mid).into_data()
                })
            };
            assert_eq!(run(false), run(true), "next at stride {stride:?}");
        }
    }
}
