//! [`InceptionA`]: Inception v3's 35x35 block (Mixed_5b, 5c, 5d), of [`BasicConv`](crate::BasicConv)s.

use super::{ArgScope, pool_3x3, sequence};
use crate::layers::BasicConv;
use burn::config::Config;
use burn::module::Module;
use burn::nn::pool::AvgPool2d;
use burn::tensor::{Device, Tensor};

/// Configuration of [`InceptionA`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct InceptionAConfig {
    /// Input channels.
    pub in_channels: usize,
    /// Output channels of the pooling branch: 32 in Mixed_5b, 64 in Mixed_5c/5d.
    pub pool_features: usize,
    /// Batch-norm decay of every convolution (TF-slim's `batch_norm_decay`).
    #[config(default = 0.9997)]
    pub batch_norm_decay: f64,
    /// Whether the pooling branch's average counts the zero padding at the borders, as
    /// torchvision's port does (PyTorch's `count_include_pad=True`); TF averages real pixels only.
    #[config(default = false)]
    pub pool_counts_padding: bool,
}

/// The 35x35 block (Mixed_5b, 5c, 5d): 1x1 | 1x1-5x5 | 1x1-3x3-3x3 | avg pool-1x1,
/// `224 + pool_features` channels out. Each `Vec` is a branch's convolutions in slim's scope
/// order (`Conv2d_0a`, `0b`, ...).
#[derive(Module, Debug)]
pub struct InceptionA {
    /// Branch_0: 1x1, 64.
    pub branch_0: BasicConv,
    /// Branch_1: 1x1 48, 5x5 64.
    pub branch_1: Vec<BasicConv>,
    /// Branch_2: 1x1 64, 3x3 96, 3x3 96.
    pub branch_2: Vec<BasicConv>,
    /// Branch_3's 3x3 average pool (SAME; the padding counted as configured).
    pub pool: AvgPool2d,
    /// Branch_3: 1x1 to `pool_features`.
    pub branch_3: BasicConv,
}

impl InceptionAConfig {
    /// Initializes the block.
    pub fn init(&self, device: &Device) -> InceptionA {
        let s = ArgScope::new(self.batch_norm_decay, device);
        let c = self.in_channels;
        InceptionA {
            branch_0: s.conv(c, 64, [1, 1]),
            branch_1: vec![s.conv(c, 48, [1, 1]), s.conv(48, 64, [5, 5])],
            branch_2: vec![
                s.conv(c, 64, [1, 1]),
                s.conv(64, 96, [3, 3]),
                s.conv(96, 96, [3, 3]),
            ],
            pool: pool_3x3(self.pool_counts_padding),
            branch_3: s.conv(c, self.pool_features, [1, 1]),
        }
    }

    /// Output channels.
    pub fn out_channels(&self) -> usize {
        64 + 64 + 96 + self.pool_features
    }
}

impl InceptionA {
    /// `[n, in, h, w]` to `[n, out, h, w]`.
    pub fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        let branches = vec![
            self.branch_0.forward(x.clone()),
            sequence(&self.branch_1, x.clone()),
            sequence(&self.branch_2, x.clone()),
            self.branch_3.forward_pooled(&self.pool, x),
        ];
        Tensor::cat(branches, 1)
    }
}
