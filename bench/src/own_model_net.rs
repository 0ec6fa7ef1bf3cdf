// The net of examples/own_model.rs, written once for `bench_layers`, which includes it twice:
// with `nn` as Burn's `burn::nn` and as `towers_kernels::nn`. Not a module of the library.

/// examples/own_model.rs's model.
#[derive(Module, Debug)]
pub(super) struct Model {
    conv1: nn::conv::Conv2d,
    conv2: nn::conv::Conv2d,
    pool: nn::pool::AdaptiveAvgPool2d,
    dropout: nn::Dropout,
    linear1: nn::Linear,
    linear2: nn::Linear,
    activation: nn::Relu,
}

impl Model {
    /// examples/own_model.rs's `ModelConfig::new(4, 32, 0.2).init(device)`.
    pub(super) fn new(device: &Device) -> Self {
        Self {
            conv1: nn::conv::Conv2dConfig::new([1, 8], [3, 3]).init(device),
            conv2: nn::conv::Conv2dConfig::new([8, 16], [3, 3]).init(device),
            pool: nn::pool::AdaptiveAvgPool2dConfig::new([4, 4]).init(),
            dropout: nn::DropoutConfig::new(0.2).init(),
            linear1: nn::LinearConfig::new(16 * 4 * 4, 32).init(device),
            linear2: nn::LinearConfig::new(32, 4).init(device),
            activation: nn::Relu::new(),
        }
    }

    /// Mean cross-entropy of `images` `[n, 1, 12, 12]` against `labels`.
    pub(super) fn loss(&self, images: Tensor<4>, labels: Tensor<1, Int>) -> Tensor<1> {
        let x = self.activation.forward(self.conv1.forward(images));
        let x = self.activation.forward(self.conv2.forward(x));
        let x = self.pool.forward(x).flatten::<2>(1, 3);
        let x = self.dropout.forward(x);
        let x = self.activation.forward(self.linear1.forward(x));
        let logits = self.linear2.forward(x);
        nn::loss::CrossEntropyLossConfig::new()
            .init(&logits.device())
            .forward(logits, labels)
    }
}
