//! [`InceptionC`]: Inception v3's 17x17 block with factorized 7x7 convolutions (Mixed_6b..6e).

use super::{ArgScope, pool_3x3, sequence};
use crate::layers::BasicConv;
use burn::config::Config;
use burn::module::Module;
use burn::nn::pool::AvgPool2d;
use burn::tensor::{Device, Tensor};

/// Configuration of [`InceptionC`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct InceptionCConfig {
    /// Input channels.
    pub in_channels: usize,
    /// Width of the factorized 7x7 branches: 128 (Mixed_6b), 160 (6c, 6d), 192 (6e).
    pub channels_7x7: usize,
    /// Batch-norm decay of every convolution (TF-slim's `batch_norm_decay`).
    #[config(default = 0.9997)]
    pub batch_norm_decay: f64,
    /// Whether the pooling branch's average counts the zero padding at the borders, as
    /// torchvision's port does (PyTorch's `count_include_pad=True`); TF averages real pixels only.
    #[config(default = false)]
    pub pool_counts_padding: bool,
}

/// The 17x17 block with factorized 7x7 convolutions (Mixed_6b..6e):
/// 1x1 | 1x1-1x7-7x1 | 1x1-7x1-1x7-7x1-1x7 | avg pool-1x1, 768 channels out.
#[derive(Module, Debug)]
pub struct InceptionC {
    /// Branch_0: 1x1, 192.
    pub branch_0: BasicConv,
    /// Branch_1: 1x1 c7, 1x7 c7, 7x1 192.
    pub branch_1: Vec<BasicConv>,
    /// Branch_2: 1x1 c7, 7x1 c7, 1x7 c7, 7x1 c7, 1x7 192.
    pub branch_2: Vec<BasicConv>,
    /// Branch_3's 3x3 average pool (SAME; the padding counted as configured).
    pub pool: AvgPool2d,
    /// Branch_3: 1x1, 192.
    pub branch_3: BasicConv,
}

impl InceptionCConfig {
    /// Initializes the block.
    pub fn init(&self, device: &Device) -> InceptionC {
        let s = ArgScope::new(self.batch_norm_decay, device);
        let (c, c7) = (self.in_channels, self.channels_7x7);
        InceptionC {
            branch_0: s.conv(c, 192, [1, 1]),
            branch_1: vec![
                s.conv(c, c7, [1, 1]),
                s.conv(c7, c7, [1, 7]),
                s.conv(c7, 192, [7, 1]),
            ],
            branch_2: vec![
                s.conv(c, c7, [1, 1]),
                s.conv(c7, c7, [7, 1]),
                s.conv(c7, c7, [1, 7]),
                s.conv(c7, c7, [7, 1]),
                s.conv(c7, 192, [1, 7]),
            ],
            pool: pool_3x3(self.pool_counts_padding),
            branch_3: s.conv(c, 192, [1, 1]),
        }
    }

    /// Output channels.
    pub fn out_channels(&self) -> usize {
        4 * 192
    }
}

impl InceptionC {
    /// `[n, in, h, w]` to `[n, 768, h, w]`.
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
