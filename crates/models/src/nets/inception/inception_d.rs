//! [`InceptionD`]: Inception v3's 17x17 to 8x8 reduction (Mixed_7a).

use super::{ArgScope, max_pool_3x3_s2, sequence};
use crate::layers::BasicConv;
use burn::config::Config;
use burn::module::Module;
use burn::nn::pool::MaxPool2d;
use burn::tensor::{Device, Tensor};
use towers_kernels::max_pool2d;

/// Configuration of [`InceptionD`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct InceptionDConfig {
    /// Input channels.
    pub in_channels: usize,
    /// Batch-norm decay of every convolution (TF-slim's `batch_norm_decay`).
    #[config(default = 0.9997)]
    pub batch_norm_decay: f64,
}

/// The 17x17 to 8x8 reduction (Mixed_7a): 1x1-3x3/2 | 1x1-1x7-7x1-3x3/2 | max pool 3x3/2,
/// `512 + in` channels out.
#[derive(Module, Debug)]
pub struct InceptionD {
    /// Branch_0: 1x1 192, 3x3 320 stride 2 VALID.
    pub branch_0: Vec<BasicConv>,
    /// Branch_1: 1x1 192, 1x7 192, 7x1 192, 3x3 192 stride 2 VALID.
    pub branch_1: Vec<BasicConv>,
    /// Branch_2: max pool 3x3, stride 2, VALID.
    pub pool: MaxPool2d,
}

impl InceptionDConfig {
    /// Initializes the block.
    pub fn init(&self, device: &Device) -> InceptionD {
        let s = ArgScope::new(self.batch_norm_decay, device);
        let c = self.in_channels;
        InceptionD {
            branch_0: vec![s.conv(c, 192, [1, 1]), s.reduce(192, 320)],
            branch_1: vec![
                s.conv(c, 192, [1, 1]),
                s.conv(192, 192, [1, 7]),
                s.conv(192, 192, [7, 1]),
                s.reduce(192, 192),
            ],
            pool: max_pool_3x3_s2(),
        }
    }

    /// Output channels.
    pub fn out_channels(&self) -> usize {
        320 + 192 + self.in_channels
    }
}

impl InceptionD {
    /// `[n, in, h, w]` to `[n, out, (h - 3) / 2 + 1, (w - 3) / 2 + 1]`.
    pub fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        let branches = vec![
            sequence(&self.branch_0, x.clone()),
            sequence(&self.branch_1, x.clone()),
            max_pool2d(&self.pool, x),
        ];
        Tensor::cat(branches, 1)
    }
}
