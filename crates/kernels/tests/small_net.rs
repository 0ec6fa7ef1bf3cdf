// The net of `drop_in.rs`'s record test, written once and included twice: with `nn` as Burn's
// `burn::nn` and as `towers_kernels::nn`. Not a module of the test binary on its own.

use burn::module::Module;
use burn::tensor::{Device, Tensor};

/// Convolution, max pool, transposed convolution, batch norm, dense layer.
#[derive(Module, Debug)]
pub(super) struct Net {
    conv: nn::conv::Conv2d,
    pool: nn::pool::MaxPool2d,
    up: nn::conv::ConvTranspose2d,
    norm: nn::BatchNorm,
    fc: nn::Linear,
}

impl Net {
    pub(super) fn new(device: &Device) -> Self {
        Self {
            conv: nn::conv::Conv2dConfig::new([3, 4], [3, 3]).init(device),
            pool: nn::pool::MaxPool2dConfig::new([2, 2]).init(),
            up: nn::conv::ConvTranspose2dConfig::new([4, 4], [2, 2])
                .with_stride([2, 2])
                .init(device),
            norm: nn::BatchNormConfig::new(4).init(device),
            fc: nn::LinearConfig::new(4 * 8 * 8, 3).init(device),
        }
    }

    pub(super) fn forward(&self, x: Tensor<4>) -> Tensor<2> {
        let x = self.up.forward(self.pool.forward(self.conv.forward(x)));
        let x = self.norm.forward(x);
        self.fc.forward(x.flatten(1, 3))
    }
}
