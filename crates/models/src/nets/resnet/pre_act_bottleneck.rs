//! [`PreActBottleneck`]: the residual block of keras.applications' ResNet v2
//! (`residual_block_v2` in `keras/src/applications/resnet.py`; He et al. 2016, "Identity
//! Mappings in Deep Residual Networks"): a batch norm and ReLU before the convolutions, which
//! the shortcut's convolution shares, and nothing after the sum.

use burn::config::Config;
use burn::module::Module;
use burn::tensor::{Device, Tensor};
use towers_kernels::nn::BatchNorm;
use towers_kernels::nn::conv::Conv2d;
use towers_kernels::nn::pool::{MaxPool2d, MaxPool2dConfig};

use crate::nets::resnet::layout::{ResNetLayout, keras_v2_conv};

/// [`PreActBottleneck`]'s shape.
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct PreActBottleneckConfig {
    /// The input's channels.
    pub in_channels: usize,
    /// The narrow convolutions' channels; the block puts out `4 planes`.
    pub planes: usize,
    /// The stride of the 3x3 convolution and of the shortcut (Keras's ResNet v2 strides in a
    /// stage's last block).
    #[config(default = 1)]
    pub stride: usize,
    /// A 1x1 convolution on the shortcut (Keras's `conv_shortcut`, a stage's first block);
    /// otherwise the shortcut is the input, taken at every `stride`-th row and column.
    #[config(default = false)]
    pub conv_shortcut: bool,
}

impl PreActBottleneckConfig {
    /// A new [`PreActBottleneck`], initialized as Keras initializes it (Glorot's uniform,
    /// biases at zero, batch norms at scale 1 and offset 0).
    pub fn init(&self, device: &Device) -> PreActBottleneck {
        let (planes, stride) = (self.planes, self.stride);
        let out = 4 * planes;
        let batch_norm = |channels| ResNetLayout::Keras.batch_norm(channels, device);
        let shortcut = (self.conv_shortcut)
            .then(|| keras_v2_conv([self.in_channels, out], 1, stride, true, device));
        // Keras's `MaxPooling2D(1, strides=stride)`: every `stride`-th value.
        let subsample = (!self.conv_shortcut && stride > 1).then(|| {
            MaxPool2dConfig::new([1, 1])
                .with_strides([stride; 2])
                .init()
        });
        PreActBottleneck {
            preact_bn: batch_norm(self.in_channels),
            conv1: keras_v2_conv([self.in_channels, planes], 1, 1, false, device),
            bn1: batch_norm(planes),
            conv2: keras_v2_conv([planes, planes], 3, stride, false, device),
            bn2: batch_norm(planes),
            conv3: keras_v2_conv([planes, out], 1, 1, true, device),
            shortcut,
            subsample,
        }
    }
}

/// `shortcut + conv3(relu(bn2(conv2(relu(bn1(conv1(p)))))))` of `p = relu(preact_bn(x))`,
/// where `shortcut` is `shortcut(p)`, or `x` itself (every `stride`-th value).
#[derive(Module, Debug)]
pub struct PreActBottleneck {
    /// Before everything: Keras's `_preact_bn`.
    pub preact_bn: BatchNorm,
    /// 1x1, `in` to `planes`, without a bias (`_1_conv`).
    pub conv1: Conv2d,
    /// After `conv1`.
    pub bn1: BatchNorm,
    /// 3x3 at the block's stride, without a bias (`_2_conv`).
    pub conv2: Conv2d,
    /// After `conv2`.
    pub bn2: BatchNorm,
    /// 1x1, `planes` to `4 planes`, with a bias (`_3_conv`).
    pub conv3: Conv2d,
    /// The shortcut's 1x1 at the block's stride, with a bias, on the pre-activation (`_0_conv`):
    /// a stage's first block.
    pub shortcut: Option<Conv2d>,
    /// The identity shortcut's subsampling, where the block strides without a convolution.
    pub subsample: Option<MaxPool2d>,
}

impl PreActBottleneck {
    /// `[n, in, h, w]` to `[n, 4 planes, ceil(h / stride), ceil(w / stride)]`.
    pub fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        let preact = self.preact_bn.forward_relu(x.clone());
        let shortcut = match (&self.shortcut, &self.subsample) {
            (Some(conv), _) => conv.forward(preact.clone()),
            (None, Some(subsample)) => subsample.forward(x),
            (None, None) => x,
        };
        let y = self.bn1.forward_relu(self.conv1.forward(preact));
        let y = self.bn2.forward_relu(self.conv2.forward(y));
        shortcut + self.conv3.forward(y)
    }
}
