//! Tiny models for tests: small enough for a software GPU, with the layers towers care about.

use burn::module::{Module, ModuleMapper, Param};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{BatchNorm, BatchNormConfig, Dropout, DropoutConfig, Linear, LinearConfig};
use burn::optim::momentum::MomentumConfig;
use burn::optim::{ModuleOptimizer, SgdConfig};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Int, Tensor, TensorData};
use towers_models::{ClassifierLoss, ImageClassifier, dropout};
use towers_multigpu::TowerLoss;

/// The learning rate of the tests' steps.
pub const LR: f64 = 0.1;

/// SGD with PyTorch/TF momentum (no dampening): plain SGD is sensitive to the gradient's scale,
/// so a sum where a mean belongs, or a wrong weight, shows in the parameters.
pub fn sgd() -> ModuleOptimizer {
    SgdConfig::new()
        .with_momentum(Some(
            MomentumConfig::new().with_momentum(0.9).with_dampening(0.0),
        ))
        .init()
}

/// `model` with every parameter's values replaced by a fixed pattern of `seed` (in ±0.2), as
/// [`crate::batches::batch`] makes its images: the same weights in any process. Flex's
/// generator is one per process and shared by the tests running at once, so weights drawn
/// from it after `Device::seed` differ whenever another test draws in between (the MPI tests'
/// reference net did, now and then, on a loaded machine).
pub fn seeded<M: Module>(model: M, seed: usize) -> M {
    model.map(&mut Seeded { seed, params: 0 })
}

/// A tensor of `dims` on `device` holding the fixed pattern of `seed` (in ±0.2) that
/// [`seeded`] gives parameters: the same values in any process or thread, whatever else draws
/// from the device's generator.
pub fn pattern<const D: usize>(dims: [usize; D], seed: usize, device: &Device) -> Tensor<D> {
    let values = pattern_values(dims.iter().product(), 0, seed);
    Tensor::from_data(TensorData::new(values, dims), device)
}

/// `len` values of `seed`'s pattern from place `offset` on, in ±0.2.
fn pattern_values(len: usize, offset: usize, seed: usize) -> Vec<f32> {
    (0..len)
        .map(|i| ((offset + i * 7919 + seed * 104_729) % 1009) as f32 / 2522.5 - 0.2)
        .collect()
}

/// [`seeded`]'s mapper: the parameters in the module's order, each its own stretch of the
/// pattern.
struct Seeded {
    seed: usize,
    params: usize,
}

impl ModuleMapper for Seeded {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let offset = 1_000_003 * self.params;
        self.params += 1;
        param.map(|value| {
            let shape = value.shape();
            let values = pattern_values(shape.num_elements(), offset, self.seed);
            let seeded = Tensor::from_data(TensorData::new(values, shape), &value.device());
            match value.is_require_grad() {
                true => seeded.require_grad(),
                false => seeded,
            }
        })
    }
}

/// A tiny conv net without batch norm: images `[n, 3, 8, 8]`, 5 classes.
#[derive(Module, Debug)]
pub struct Net {
    conv: Conv2d,
    fc: Linear,
}

impl Net {
    /// The weights of [`seeded`]'s pattern 0: the same in every run, so that a comparison
    /// after several updates passes or fails for good. With random ones, a ReLU input within
    /// rounding of 0 on one side and not the other flipped a gradient past the tolerance
    /// about once in a thousand runs of the towers' tests.
    pub fn new(device: &Device) -> Self {
        seeded(
            Self {
                conv: Conv2dConfig::new([3, 4], [3, 3]).init(device),
                fc: LinearConfig::new(4 * 6 * 6, 5).init(device),
            },
            0,
        )
    }

    /// The mean cross-entropy of a batch, with the logits and labels to count correct
    /// predictions.
    pub fn loss(&self, x: Tensor<4>, y: Tensor<1, Int>) -> TowerLoss {
        let logits = self
            .fc
            .forward(relu(self.conv.forward(x)).flatten::<2>(1, 3));
        let loss = CrossEntropyLossConfig::new()
            .init(&logits.device())
            .forward(logits.clone(), y.clone());
        TowerLoss::new(loss).with_accuracy(logits, y)
    }
}

/// Batch norm straight on the images, so its statistics are those of the input slices.
#[derive(Module, Debug)]
pub struct BnNet {
    /// The batch norm whose running statistics the tests follow.
    pub bn: BatchNorm,
    fc: Linear,
}

impl BnNet {
    /// Fresh statistics, the weights of [`seeded`]'s pattern 0 (as [`Net::new`]'s).
    pub fn new(device: &Device) -> Self {
        let bn = BatchNormConfig::new(3).init(device);
        let fc = seeded(LinearConfig::new(3 * 8 * 8, 5).init(device), 0);
        Self { bn, fc }
    }

    /// The mean cross-entropy of a batch.
    pub fn loss(&self, x: Tensor<4>, y: Tensor<1, Int>) -> Tensor<1> {
        let logits = self.fc.forward(self.bn.forward(x).flatten::<2>(1, 3));
        CrossEntropyLossConfig::new()
            .init(&logits.device())
            .forward(logits, y)
    }
}

/// A tiny CIFAR-sized classifier with dropout (half the features dropped): images
/// `[n, 3, 24, 24]`, 10 classes. Its masks come from [`towers_models::dropout`].
#[derive(Module, Debug)]
pub struct DropoutNet {
    conv: Conv2d,
    dropout: Dropout,
    fc: Linear,
}

impl DropoutNet {
    /// Random weights from `device`'s generator.
    pub fn new(device: &Device) -> Self {
        Self {
            conv: Conv2dConfig::new([3, 4], [5, 5])
                .with_stride([3, 3])
                .init(device),
            dropout: DropoutConfig::new(0.5).init(),
            fc: LinearConfig::new(4 * 7 * 7, 10).init(device),
        }
    }
}

impl ImageClassifier for DropoutNet {
    fn forward(&self, images: Tensor<4>) -> Tensor<2> {
        let features = relu(self.conv.forward(images)).flatten::<2>(1, 3);
        self.fc.forward(dropout(&self.dropout, features))
    }

    fn loss(&self, images: Tensor<4>, labels: Tensor<1, Int>) -> ClassifierLoss {
        let logits = self.forward(images);
        let loss = CrossEntropyLossConfig::new()
            .init(&logits.device())
            .forward(logits.clone(), labels);
        ClassifierLoss { loss, logits }
    }

    fn num_classes(&self) -> usize {
        10
    }

    fn input_shape(&self) -> [usize; 3] {
        [3, 24, 24]
    }
}
