//! A model written for burn-train (`TrainStep`, `InferenceStep`, a `Learner`, a
//! `SupervisedTraining` with its metrics) trained on several devices through
//! the towers: one line, its training strategy. Built-in data (is a point inside the unit
//! circle?); the held-out accuracy rises:
//! `cargo run --release --example learner -- --devices flex,flex --epochs 4`.

use std::sync::Arc;

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataloader::{DataLoader, DataLoaderBuilder};
use burn::data::dataset::InMemDataset;
use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{Linear, LinearConfig, Relu};
use burn::optim::AdamConfig;
use burn::tensor::{Device, Int, Tensor, TensorData};
use burn_train::metric::{AccuracyMetric, LossMetric};
use burn_train::{
    ClassificationOutput, InferenceStep, Learner, SupervisedTraining, TrainOutput, TrainStep,
};
use clap::Parser;
use towers_learner::TowersStrategy;

#[derive(Parser)]
struct Args {
    /// The devices, one replica each: `flex,flex`, `cuda:0,cuda:1`, `wgpu:0,flex`...
    #[arg(long, default_value = "flex,flex")]
    devices: String,
    #[arg(long, default_value_t = 4)]
    epochs: usize,
    /// Where burn-train writes its logs.
    #[arg(long, default_value = "/tmp/learner")]
    dir: String,
}

#[derive(Module, Debug)]
struct Model {
    hidden: Linear,
    output: Linear,
    relu: Relu,
}

#[derive(Clone, Debug)]
struct Point([f32; 2]);

#[derive(Clone, Debug)]
struct Points {
    xy: Tensor<2>,
    inside: Tensor<1, Int>,
}

#[derive(Clone)]
struct PointBatcher;

impl Batcher<Point, Points> for PointBatcher {
    fn batch(&self, points: Vec<Point>, device: &Device) -> Points {
        let n = points.len();
        let inside = points
            .iter()
            .map(|Point([x, y])| (x * x + y * y < 1.0) as i64);
        let inside = TensorData::new(inside.collect(), [n]);
        let xy = TensorData::new(points.into_iter().flat_map(|p| p.0).collect(), [n, 2]);
        Points {
            xy: Tensor::from_data(xy, device),
            inside: Tensor::from_data(inside, device),
        }
    }
}

impl Model {
    fn classify(&self, points: Points) -> ClassificationOutput {
        let logits = (self.output).forward(self.relu.forward(self.hidden.forward(points.xy)));
        let loss = CrossEntropyLossConfig::new().init(&logits.device());
        let loss = loss.forward(logits.clone(), points.inside.clone());
        ClassificationOutput::new(loss, logits, points.inside)
    }
}

impl TrainStep for Model {
    type Input = Points;
    type Output = ClassificationOutput;

    fn step(&self, points: Points) -> TrainOutput<ClassificationOutput> {
        let output = self.classify(points);
        TrainOutput::new(self, output.loss.backward(), output)
    }
}

impl InferenceStep for Model {
    type Input = Points;
    type Output = ClassificationOutput;

    fn step(&self, points: Points) -> ClassificationOutput {
        self.classify(points)
    }
}

/// `n` points spread over [-1.5, 1.5]², the same every run.
fn points(n: usize, seed: u32) -> Arc<dyn DataLoader<Points>> {
    let coordinate = |i: u32| (i.wrapping_mul(2_654_435_761) >> 8) as f32 / (1 << 24) as f32;
    let points = (0..n as u32).map(|i| {
        let i = 2 * (i + seed);
        Point([3.0 * coordinate(i) - 1.5, 3.0 * coordinate(i + 1) - 1.5])
    });
    DataLoaderBuilder::new(PointBatcher)
        .batch_size(32)
        .build(InMemDataset::new(points.collect()))
}

/// The share of `loader`'s points that `model` classifies right.
fn accuracy(model: &Model, loader: &Arc<dyn DataLoader<Points>>) -> anyhow::Result<f64> {
    let (mut right, mut all) = (0, 0);
    let loader = loader.to_device(&model.devices()[0]);
    for points in loader.iter() {
        let output = InferenceStep::step(model, points?);
        all += output.targets.dims()[0] as i64;
        let predicted = output.output.argmax(1).flatten::<1>(0, 1);
        right += predicted
            .equal(output.targets)
            .int()
            .sum()
            .into_scalar::<i64>();
    }
    Ok(right as f64 / all as f64)
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let devices = burn_towers::multigpu::parse_devices(&args.devices)?;
    let device = Device::flex().autodiff();
    let model = Model {
        hidden: LinearConfig::new(2, 32).init(&device),
        output: LinearConfig::new(32, 2).init(&device),
        relu: Relu::new(),
    };
    let held_out = points(512, 9_999);
    let before = accuracy(&model.valid(), &held_out)?;
    let learner = Learner::new(model, AdamConfig::new().init(), 0.01);
    let result = SupervisedTraining::new(&args.dir, points(2048, 0), held_out.clone())
        .metrics((LossMetric::new(), AccuracyMetric::new()))
        .num_epochs(args.epochs)
        .with_training_strategy(TowersStrategy::new(devices).into())
        .launch(learner);
    if let Some(error) = result.error {
        anyhow::bail!("training failed: {error}");
    }
    let after = accuracy(&result.model, &held_out)?;
    println!(
        "held-out accuracy on {}: {before:.3} before, {after:.3} after",
        args.devices
    );
    Ok(())
}
