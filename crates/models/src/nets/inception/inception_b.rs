//! [`InceptionB`]: Inception v3's 35x35 to 17x17 reduction (Mixed_6a).

use super::{ArgScope, max_pool_3x3_s2, sequence};
use crate::layers::BasicConv;
use burn::config::Config;
use burn::module::Module;
use burn::nn::pool::MaxPool2d;
use burn::tensor::{Device, Tensor};
use towers_kernels::max_pool2d;

/// Configuration of [`InceptionB`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct InceptionBConfig {
    /// Input channels.
    pub in_channels: usize,
    /// Batch-norm decay of every convolution (TF-slim's `batch_norm_decay`).
    #[config(default = 0.9997)]
    pub batch_norm_decay: f64,
}

/// The 35x35 to 17x17 reduction (Mixed_6a): 3x3/2 | 1x1-3x3-3x3/2 | max pool 3x3/2,
/// `480 + in` channels out.
#[derive(Module, Debug)]
pub struct InceptionB {
    /// Branch_0: 3x3 384, stride 2, VALID.
    pub branch_0: BasicConv,
    /// Branch_1: 1x1 64, 3x3 96, 3x3 96 stride 2 VALID.
    pub branch_1: Vec<BasicConv>,
    /// Branch_2: max pool 3x3, stride 2, VALID.
    pub pool: MaxPool2d,
}

impl InceptionBConfig {
    /// Initializes the block.
    pub fn init(&self, device: &Device) -> InceptionB {
        let s = ArgScope::new(self.batch_norm_decay, device);
        let c = self.in_channels;
        InceptionB {
            branch_0: s.reduce(c, 384),
            branch_1: vec![
                s.conv(c, 64, [1, 1]),
                s.conv(64, 96, [3, 3]),
                s.reduce(96, 96),
            ],
            pool: max_pool_3x3_s2(),
        }
    }

    /// Output channels.
    pub fn out_channels(&self) -> usize {
        384 + 96 + self.in_channels
    }
}

impl InceptionB {
    /// `[n, in, h, w]` to `[n, out, (h - 3) / 2 + 1, (w - 3) / 2 + 1]`.
    pub fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        let branches = vec![
            self.branch_0.forward(x.clone()),
            sequence(&self.branch_1, x.clone()),
            max_pool2d(&self.pool, x),
        ];
        Tensor::cat(branches, 1)
    }
}
