//! The CIFAR-10-sized net of the tower benchmarks.

use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::pool::{MaxPool2d, MaxPool2dConfig};
use burn::nn::{Linear, LinearConfig, PaddingConfig2d};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Int, Tensor};

/// TF's CIFAR-10 net without local response normalization.
#[derive(Module, Debug)]
pub struct CifarNet {
    conv1: Conv2d,
    conv2: Conv2d,
    pool: MaxPool2d,
    fc1: Linear,
    fc2: Linear,
    fc3: Linear,
}

impl CifarNet {
    /// The net with Burn's default initialization, on `device`.
    pub fn new(device: &Device) -> Self {
        let conv = |c_in| {
            Conv2dConfig::new([c_in, 64], [5, 5])
                .with_padding(PaddingConfig2d::Same)
                .init(device)
        };
        Self {
            conv1: conv(3),
            conv2: conv(64),
            pool: MaxPool2dConfig::new([3, 3])
                .with_strides([2, 2])
                .with_padding(PaddingConfig2d::Same)
                .init(),
            fc1: LinearConfig::new(64 * 6 * 6, 384).init(device),
            fc2: LinearConfig::new(384, 192).init(device),
            fc3: LinearConfig::new(192, 10).init(device),
        }
    }

    /// The mean cross-entropy loss of images `x` against labels `y`.
    pub fn loss(&self, x: Tensor<4>, y: Tensor<1, Int>) -> Tensor<1> {
        let x = self.pool.forward(relu(self.conv1.forward(x)));
        let x = self.pool.forward(relu(self.conv2.forward(x)));
        let x = relu(self.fc1.forward(x.flatten::<2>(1, 3)));
        let logits = self.fc3.forward(relu(self.fc2.forward(x)));
        CrossEntropyLossConfig::new()
            .init(&logits.device())
            .forward(logits, y)
    }
}
