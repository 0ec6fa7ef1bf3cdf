//! [`ConvBn`]: MobileNetV2's unit, a convolution without a bias and its batch norm
//! (torchvision's `Conv2dNormActivation`; Keras's `Conv2D` or `DepthwiseConv2D` and
//! `BatchNormalization`), with or without the ReLU6 after them.

use burn::config::Config;
use burn::module::Module;
use burn::tensor::{Device, Tensor};
use towers_kernels::nn::BatchNorm;
use towers_kernels::nn::conv::Conv2d;

use crate::nets::mobilenet::layout::MobileNetLayout;

/// [`ConvBn`]'s shape.
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct ConvBnConfig {
    /// `[in, out]` channels (equal for a depthwise convolution).
    pub channels: [usize; 2],
    /// The side of the square kernel.
    pub kernel: usize,
    /// The convolution's stride.
    #[config(default = 1)]
    pub stride: usize,
    /// One filter per input channel (`groups` = the channels), not a full convolution.
    #[config(default = false)]
    pub depthwise: bool,
    /// Whose padding, constants and initializers.
    #[config(default = "MobileNetLayout::Torchvision")]
    pub layout: MobileNetLayout,
}

impl ConvBnConfig {
    /// A new [`ConvBn`], initialized as its layout's library initializes it (batch norm at
    /// scale 1 and offset 0).
    pub fn init(&self, device: &Device) -> ConvBn {
        let [c_in, c_out] = self.channels;
        assert!(
            !self.depthwise || c_in == c_out,
            "a depthwise convolution keeps its channels: {c_in} in, {c_out} out"
        );
        let groups = if self.depthwise { c_in } else { 1 };
        ConvBn {
            conv: (self.layout).conv(self.channels, self.kernel, self.stride, groups, device),
            bn: self.layout.batch_norm(c_out, device),
        }
    }
}

/// `bn(conv(x))`, and [`forward_relu6`](Self::forward_relu6) with the ReLU6 after it.
#[derive(Module, Debug)]
pub struct ConvBn {
    /// The convolution, without a bias.
    pub conv: Conv2d,
    /// Its batch norm.
    pub bn: BatchNorm,
}

impl ConvBn {
    /// `[n, in, h, w]` to `[n, out, h / stride, w / stride]` (rounded up), without an
    /// activation (a block's projection).
    pub fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        self.bn.forward(self.conv.forward(x))
    }

    /// [`forward`](Self::forward), then `min(max(x, 0), 6)` (`BatchNorm::forward_relu6`: on a
    /// CubeCL device in the batch norm's op while training).
    pub fn forward_relu6(&self, x: Tensor<4>) -> Tensor<4> {
        self.bn.forward_relu6(self.conv.forward(x))
    }
}
