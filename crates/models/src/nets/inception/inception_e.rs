//! [`InceptionE`]: Inception v3's 8x8 block with expanded filter banks (Mixed_7b, 7c).

use super::{ArgScope, pool_3x3, sequence_into};
use crate::layers::BasicConv;
use burn::config::Config;
use burn::module::Module;
use burn::nn::pool::AvgPool2d;
use burn::tensor::{Device, Tensor};

/// Configuration of [`InceptionE`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct InceptionEConfig {
    /// Input channels.
    pub in_channels: usize,
    /// Batch-norm decay of every convolution (TF-slim's `batch_norm_decay`).
    #[config(default = 0.9997)]
    pub batch_norm_decay: f64,
    /// Whether the pooling branch's average counts the zero padding at the borders, as
    /// torchvision's port does (PyTorch's `count_include_pad=True`); TF averages real pixels only.
    #[config(default = false)]
    pub pool_counts_padding: bool,
}

/// The 8x8 block with expanded filter banks (Mixed_7b, 7c):
/// 1x1 | 1x1-(1x3, 3x1) | 1x1-3x3-(1x3, 3x1) | avg pool-1x1, 2048 channels out.
#[derive(Module, Debug)]
pub struct InceptionE {
    /// Branch_0: 1x1, 320.
    pub branch_0: BasicConv,
    /// Branch_1: 1x1, 384.
    pub branch_1: BasicConv,
    /// Branch_1's split: 1x3 384 and 3x1 384, side by side.
    pub branch_1_split: Vec<BasicConv>,
    /// Branch_2: 1x1 448, 3x3 384.
    pub branch_2: Vec<BasicConv>,
    /// Branch_2's split: 1x3 384 and 3x1 384, side by side.
    pub branch_2_split: Vec<BasicConv>,
    /// Branch_3's 3x3 average pool (SAME; the padding counted as configured).
    pub pool: AvgPool2d,
    /// Branch_3: 1x1, 192.
    pub branch_3: BasicConv,
}

impl InceptionEConfig {
    /// Initializes the block.
    pub fn init(&self, device: &Device) -> InceptionE {
        let s = ArgScope::new(self.batch_norm_decay, device);
        let c = self.in_channels;
        let split = || vec![s.conv(384, 384, [1, 3]), s.conv(384, 384, [3, 1])];
        InceptionE {
            branch_0: s.conv(c, 320, [1, 1]),
            branch_1: s.conv(c, 384, [1, 1]),
            branch_1_split: split(),
            branch_2: vec![s.conv(c, 448, [1, 1]), s.conv(448, 384, [3, 3])],
            branch_2_split: split(),
            pool: pool_3x3(self.pool_counts_padding),
            branch_3: s.conv(c, 192, [1, 1]),
        }
    }

    /// Output channels.
    pub fn out_channels(&self) -> usize {
        320 + 2 * 768 + 192
    }
}

impl InceptionE {
    /// `[n, in, h, w]` to `[n, 2048, h, w]`.
    pub fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        // Each split's pair (1x3 and 3x1) reads its input alike: handed on as the first reads it.
        let b1 = self
            .branch_1
            .forward_into(x.clone(), &self.branch_1_split[0]);
        let b2 = sequence_into(&self.branch_2, x.clone(), Some(&self.branch_2_split[0]));
        let mut branches = vec![self.branch_0.forward(x.clone())];
        branches.extend(self.branch_1_split.iter().map(|c| c.forward(b1.clone())));
        branches.extend(self.branch_2_split.iter().map(|c| c.forward(b2.clone())));
        branches.push(self.branch_3.forward_pooled(&self.pool, x));
        Tensor::cat(branches, 1)
    }
}
