//! [`AuxHead`]: Inception v3's auxiliary classifier on Mixed_6e (slim's `AuxLogits`).

use crate::layers::{BasicConv, BasicConvConfig, truncated_normal};
use burn::config::Config;
use burn::module::Module;
use burn::nn::pool::{AvgPool2d, AvgPool2dConfig};
use burn::nn::{Initializer, Linear, LinearConfig, PaddingConfig2d};
use burn::tensor::{Device, Tensor};

/// Configuration of [`AuxHead`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct AuxHeadConfig {
    /// Input channels (768, Mixed_6e).
    pub in_channels: usize,
    /// Number of classes.
    pub num_classes: usize,
    /// Side of the feature map after the 5x5/3 pool: 5 at 299x299. Slim shrinks the 5x5
    /// convolution to this size for smaller inputs.
    #[config(default = 5)]
    pub pooled_size: usize,
    /// Batch-norm decay of both convolutions (TF-slim's `batch_norm_decay`).
    #[config(default = 0.9997)]
    pub batch_norm_decay: f64,
}

/// The auxiliary classifier on Mixed_6e (slim's `AuxLogits`): average pool 5x5/3 VALID,
/// 1x1 128, 5x5 768 VALID (stddev 0.01), then the logits (stddev 0.001, with bias).
/// Slim's final 1x1 convolution on a 1x1 map is a [`Linear`] here, `[in, out]` as TF's kernel.
#[derive(Module, Debug)]
pub struct AuxHead {
    /// AvgPool_1a_5x5.
    pub pool: AvgPool2d,
    /// Conv2d_1b_1x1, 128.
    pub conv2d_1b_1x1: BasicConv,
    /// Conv2d_2a_5x5, 768 (the kernel covers the whole pooled map).
    pub conv2d_2a: BasicConv,
    /// Conv2d_2b_1x1: the auxiliary logits.
    pub conv2d_2b_1x1: Linear,
}

impl AuxHeadConfig {
    /// Initializes the head.
    pub fn init(&self, device: &Device) -> AuxHead {
        let k = self.pooled_size.min(5);
        let momentum = 1.0 - self.batch_norm_decay;
        let mut logits = LinearConfig::new(768, self.num_classes).init(device);
        logits.weight = truncated_normal([768, self.num_classes], 0.001, device);
        logits.bias = Some(Initializer::Zeros.init([self.num_classes], device));
        AuxHead {
            pool: AvgPool2dConfig::new([5, 5]).with_strides([3, 3]).init(),
            conv2d_1b_1x1: BasicConvConfig::new([self.in_channels, 128], [1, 1])
                .with_momentum(momentum)
                .init(device),
            conv2d_2a: BasicConvConfig::new([128, 768], [k, k])
                .with_momentum(momentum)
                .with_padding(PaddingConfig2d::Valid)
                .with_stddev(0.01)
                .init(device),
            conv2d_2b_1x1: logits,
        }
    }
}

impl AuxHead {
    /// Mixed_6e `[n, 768, 17, 17]` to logits `[n, num_classes]`.
    pub fn forward(&self, x: Tensor<4>) -> Tensor<2> {
        let x = self.conv2d_1b_1x1.forward(self.pool.forward(x));
        let x = self.conv2d_2a.forward(x).flatten::<2>(1, 3);
        towers_kernels::linear(&self.conv2d_2b_1x1, x)
    }
}
