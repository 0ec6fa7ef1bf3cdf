use crate::{OffsetBatchNorm, OffsetBatchNormConfig, conv_images, conv2d, truncated_normal};
use burn::config::Config;
use burn::module::Module;
use burn::nn::PaddingConfig2d;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::tensor::{Device, Tensor};

/// Configuration of [`BasicConv`]; the defaults are TF-slim Inception v3's `conv2d` arg scope.
#[derive(Config, Debug)]
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

    /// [`forward`](Self::forward) of an input that needs no gradient (a network's images),
    /// the convolution by [`conv_images`].
    pub fn forward_images(&self, images: Tensor<4>) -> Tensor<4> {
        self.bn.forward_relu(conv_images(&self.conv, images))
    }
}
