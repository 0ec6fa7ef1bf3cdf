//! Your own model (as Burn's guide writes one), `Dataset` and `Batcher` on several devices: a
//! `TrainStep` batches a tower's items on its device and returns the loss; the trainer does the
//! rest (input threads, towers, log, checkpoints, `--resume`, TensorBoard). The loss falls and
//! the accuracy rises: `cargo run --release --example own_model -- --devices flex,flex`.

use burn::config::Config;
use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::{Dataset, DatasetError};
use burn::module::Module;
use burn::tensor::{Device, Int, Tensor, TensorData};
// Burn's layers, on burn-towers' CPU kernels where they apply: `burn::nn` would do as well.
use burn_towers::kernels::nn::conv::{Conv2d, Conv2dConfig};
use burn_towers::kernels::nn::loss::CrossEntropyLossConfig;
use burn_towers::kernels::nn::pool::{AdaptiveAvgPool2d, AdaptiveAvgPool2dConfig};
use burn_towers::kernels::nn::{Dropout, DropoutConfig, Linear, LinearConfig, Relu};
use burn_towers::multigpu::TowerLoss;
use burn_towers::train::{DatasetInput, TrainArgs, TrainConfig, TrainStep, Trainer};

const SIDE: usize = 12;
const CLASSES: usize = 4;

#[derive(Module, Debug)]
struct Model {
    conv1: Conv2d,
    conv2: Conv2d,
    pool: AdaptiveAvgPool2d,
    dropout: Dropout,
    linear1: Linear,
    linear2: Linear,
    activation: Relu,
}

#[derive(Config, Debug)]
struct ModelConfig {
    num_classes: usize,
    hidden_size: usize,
    dropout: f64,
}

impl ModelConfig {
    fn init(&self, device: &Device) -> Model {
        Model {
            conv1: Conv2dConfig::new([1, 8], [3, 3]).init(device),
            conv2: Conv2dConfig::new([8, 16], [3, 3]).init(device),
            pool: AdaptiveAvgPool2dConfig::new([4, 4]).init(),
            dropout: DropoutConfig::new(self.dropout).init(),
            linear1: LinearConfig::new(16 * 4 * 4, self.hidden_size).init(device),
            linear2: LinearConfig::new(self.hidden_size, self.num_classes).init(device),
            activation: Relu::new(),
        }
    }
}

impl Model {
    fn forward(&self, images: Tensor<4>) -> Tensor<2> {
        let x = self.activation.forward(self.conv1.forward(images));
        let x = self.activation.forward(self.conv2.forward(x));
        let x = self.pool.forward(x).flatten::<2>(1, 3);
        let x = self.dropout.forward(x);
        let x = self.activation.forward(self.linear1.forward(x));
        self.linear2.forward(x)
    }

    /// Mean cross-entropy of a batch, with what the towers need to count correct predictions.
    fn loss(&self, images: Tensor<4>, labels: Tensor<1, Int>) -> TowerLoss {
        let logits = self.forward(images);
        let loss = CrossEntropyLossConfig::new().init(&logits.device());
        let loss = loss.forward(logits.clone(), labels.clone());
        TowerLoss::new(loss).with_accuracy(logits, labels)
    }
}

/// One example: a bar across a noisy image, and its direction.
#[derive(Clone, Debug)]
struct ShapeItem {
    pixels: Vec<f32>,
    label: i64,
}

/// 4096 items made on demand from their index, so every run sees the same data.
struct ShapeDataset;

impl Dataset<ShapeItem> for ShapeDataset {
    fn get(&self, index: usize) -> Result<ShapeItem, DatasetError> {
        Ok(shape_item(index))
    }

    fn len(&self) -> usize {
        4096
    }
}

fn shape_item(index: usize) -> ShapeItem {
    // Knuth's multiplicative hash: pseudo-random bits without a dependency.
    let hash = |x: usize| (x as u64).wrapping_mul(2_654_435_761) >> 8;
    let (label, at) = (index % CLASSES, hash(index) as usize % SIDE);
    let pixel = |p: usize| {
        let (row, col) = (p / SIDE, p % SIDE);
        let diagonals = [(row + at) % SIDE == col, (row + col + at) % SIDE == 0];
        let on = [row == at, col == at, diagonals[0], diagonals[1]];
        let noise = (hash(index * 1000 + p) % 1000) as f32 / 1000.0 - 0.5;
        f32::from(u8::from(on[label])) + 0.6 * noise
    };
    let (pixels, label) = ((0..SIDE * SIDE).map(pixel).collect(), label as i64);
    ShapeItem { pixels, label }
}

/// Images `[n, 1, SIDE, SIDE]` and labels `[n]`.
struct ShapeBatcher;

impl Batcher<ShapeItem, (Tensor<4>, Tensor<1, Int>)> for ShapeBatcher {
    fn batch(&self, items: Vec<ShapeItem>, device: &Device) -> (Tensor<4>, Tensor<1, Int>) {
        let n = items.len();
        let pixels: Vec<f32> = items.iter().flat_map(|i| i.pixels.clone()).collect();
        let labels: Vec<i64> = items.iter().map(|i| i.label).collect();
        let images = Tensor::from_data(TensorData::new(pixels, [n, 1, SIDE, SIDE]), device);
        (
            images,
            Tensor::from_data(TensorData::new(labels, [n]), device),
        )
    }
}

/// What one tower does with its part of a batch.
struct ShapeStep;

impl TrainStep<Model> for ShapeStep {
    type Batch = Vec<ShapeItem>;

    fn loss(&self, model: &Model, part: &[ShapeItem], device: &Device) -> TowerLoss {
        let (images, labels) = ShapeBatcher.batch(part.to_vec(), device);
        model.loss(images, labels)
    }
}

fn main() -> anyhow::Result<()> {
    let args = TrainArgs::from_command_line();
    let config = args.builtin_config(
        TrainConfig::new(std::env::temp_dir().join("own_model_train"))
            .with_devices("flex,flex".into())
            .with_max_steps(200),
    )?;
    let init = |device: &Device| ModelConfig::new(CLASSES, 32, 0.2).init(device);
    let trainer = Trainer::with_step(config, ShapeStep);
    args.finish(&trainer.run(init, &DatasetInput::new(ShapeDataset))?)?;
    Ok(())
}
