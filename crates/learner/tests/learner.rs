//! A burn-train `Learner` trained through `TowersStrategy` takes the updates of plain Burn steps
//! on the devices' batches taken together: the mean gradient, not burn-train's sum.

use std::sync::Arc;

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataloader::{DataLoader, DataLoaderBuilder};
use burn::data::dataset::InMemDataset;
use burn::module::{Module, Param};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{BatchNorm, BatchNormConfig, Linear};
use burn::optim::{GradientsParams, SgdConfig};
use burn::tensor::{Device, Int, Tensor, TensorData};
use burn_train::{
    ClassificationOutput, InferenceStep, Learner, SupervisedTraining, TrainOutput, TrainStep,
};
use towers_learner::TowersStrategy;
use towers_multigpu::parse_devices;

const LR: f64 = 0.5;
const BATCH: usize = 4;

#[derive(Module, Debug)]
struct Net {
    /// Batch norm over the inputs, whose running mean is then the inputs' own.
    bn: Option<BatchNorm>,
    fc: Linear,
}

#[derive(Clone, Debug)]
struct Item {
    x: [f32; 4],
    y: i64,
}

#[derive(Clone, Debug)]
struct Batch {
    x: Tensor<2>,
    y: Tensor<1, Int>,
}

#[derive(Clone)]
struct ItemBatcher;

impl Batcher<Item, Batch> for ItemBatcher {
    fn batch(&self, items: Vec<Item>, device: &Device) -> Batch {
        let n = items.len();
        let x: Vec<f32> = items.iter().flat_map(|i| i.x).collect();
        let y: Vec<i64> = items.iter().map(|i| i.y).collect();
        Batch {
            x: Tensor::from_data(TensorData::new(x, [n, 4]), device),
            y: Tensor::from_data(TensorData::new(y, [n]), device),
        }
    }
}

impl Net {
    fn classify(&self, batch: Batch) -> ClassificationOutput {
        let x = match &self.bn {
            Some(bn) => bn.forward(batch.x),
            None => batch.x,
        };
        let logits = self.fc.forward(x);
        let loss = CrossEntropyLossConfig::new()
            .init(&logits.device())
            .forward(logits.clone(), batch.y.clone());
        ClassificationOutput::new(loss, logits, batch.y)
    }
}

impl TrainStep for Net {
    type Input = Batch;
    type Output = ClassificationOutput;

    fn step(&self, batch: Batch) -> TrainOutput<ClassificationOutput> {
        let output = self.classify(batch);
        TrainOutput::new(self, output.loss.backward(), output)
    }
}

impl InferenceStep for Net {
    type Input = Batch;
    type Output = ClassificationOutput;

    fn step(&self, batch: Batch) -> ClassificationOutput {
        self.classify(batch)
    }
}

fn items(n: usize) -> Vec<Item> {
    (0..n)
        .map(|i| {
            let f = i as f32;
            Item {
                x: [f.sin(), f.cos(), (0.3 * f).sin(), 0.1 * f - 1.0],
                y: (i % 3) as i64,
            }
        })
        .collect()
}

fn loader(items: Vec<Item>) -> Arc<dyn DataLoader<Batch>> {
    DataLoaderBuilder::new(ItemBatcher)
        .batch_size(BATCH)
        .build(InMemDataset::new(items))
}

/// The same starting weights every time (no RNG: tests run in parallel).
fn net(device: &Device) -> Net {
    plain_net(device, false)
}

fn plain_net(device: &Device, batch_norm: bool) -> Net {
    let weights: Vec<f32> = (0..12).map(|i| 0.1 * ((i * 7 % 12) as f32 - 5.5)).collect();
    let weight = Tensor::from_data(TensorData::new(weights, [4, 3]), device);
    let bias = Tensor::from_data(TensorData::new(vec![0.1f32, -0.2, 0.05], [3]), device);
    Net {
        bn: batch_norm.then(|| BatchNormConfig::new(4).init(device)),
        fc: Linear {
            weight: Param::from_tensor(weight),
            bias: Some(Param::from_tensor(bias)),
        },
    }
}

/// `model` after one epoch of burn-train with `strategy`.
fn train_model(model: Net, data: &[Item], strategy: TowersStrategy<Batch>) -> Net {
    let dir = tempfile::tempdir().unwrap();
    let learner = Learner::new(model, SgdConfig::new().init(), LR);
    let training = SupervisedTraining::new(dir.path(), loader(data.to_vec()), loader(items(8)))
        .with_application_logger(None)
        .with_training_strategy(strategy.into());
    let result = training.launch(learner);
    assert!(result.error.is_none(), "{:?}", result.error);
    result.model
}

/// The model after one epoch of burn-train with `strategy`.
fn train(data: &[Item], strategy: TowersStrategy<Batch>) -> Net {
    train_model(net(&Device::flex().autodiff()), data, strategy)
}

/// Plain Burn: one SGD step per group of items, on the mean loss over the whole group.
fn reference(groups: &[Vec<Item>]) -> Net {
    let device = Device::flex().autodiff();
    let mut model = net(&device);
    let mut optim = SgdConfig::new().init();
    for group in groups {
        let output = model.classify(ItemBatcher.batch(group.clone(), &device));
        let grads = GradientsParams::from_grads(output.loss.backward(), &model);
        model = optim.step(LR, model, grads);
    }
    model
}

/// Items `[a, b)` and `[c, d)` as one group.
fn group(data: &[Item], [a, b]: [usize; 2], [c, d]: [usize; 2]) -> Vec<Item> {
    data[a..b].iter().chain(&data[c..d]).cloned().collect()
}

fn values(t: Tensor<2>) -> Vec<f32> {
    t.into_data().try_to_vec().unwrap()
}

fn assert_same(trained: &Net, expected: &Net) {
    let (a, b) = (
        values(trained.fc.weight.val()),
        values(expected.fc.weight.val()),
    );
    let worst = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max);
    assert!(worst < 1e-5, "weights differ by {worst}: {a:?} vs {b:?}");
    let moved = a.iter().zip(values(net(&Device::flex()).fc.weight.val()));
    assert!(
        moved.map(|(x, y)| (x - y).abs()).fold(0.0, f32::max) > 1e-2,
        "it trained"
    );
}

#[test]
fn two_towers_take_the_step_of_both_devices_batches_together() {
    // burn-train gives device 0 items 0..12 and device 1 items 12..24, in batches of 4.
    let data = items(24);
    let trained = train(
        &data,
        TowersStrategy::new(parse_devices("flex,flex").unwrap()),
    );
    let groups: Vec<_> = (0..3)
        .map(|s| group(&data, [4 * s, 4 * s + 4], [12 + 4 * s, 16 + 4 * s]))
        .collect();
    assert_same(&trained, &reference(&groups));
}

#[test]
fn batches_weighted_by_their_examples_give_the_mean_over_all_of_them() {
    // 21 items: device 0 gets 0..10 (batches of 4, 4, 2), device 1 gets 10..21 (4, 4, 3).
    let data = items(21);
    let strategy = TowersStrategy::new(parse_devices("flex,flex").unwrap())
        .with_weight(|b: &Batch| b.y.dims()[0] as f64);
    let trained = train(&data, strategy);
    let groups = [
        group(&data, [0, 4], [10, 14]),
        group(&data, [4, 8], [14, 18]),
        group(&data, [8, 10], [18, 21]),
    ];
    assert_same(&trained, &reference(&groups));
}

#[test]
fn one_tower_is_a_plain_learner() {
    let data = items(12);
    let trained = train(&data, TowersStrategy::new(parse_devices("flex").unwrap()));
    let groups: Vec<_> = data.chunks(BATCH).map(<[Item]>::to_vec).collect();
    assert_same(&trained, &reference(&groups));
}

#[test]
fn the_learner_ends_with_the_running_state_the_towers_kept_in_sync() {
    let data = items(24);
    let model = plain_net(&Device::flex().autodiff(), true);
    let devices = parse_devices("flex,flex").unwrap();
    let trained = train_model(model, &data, TowersStrategy::new(devices));
    // Batch norm's running mean (momentum 0.1, from 0) over the steps' inputs, both devices'
    // batches taken together: the towers average the replicas' means after each update.
    let mut expected = [0.0f64; 4];
    for s in 0..3 {
        let step = group(&data, [4 * s, 4 * s + 4], [12 + 4 * s, 16 + 4 * s]);
        for (j, e) in expected.iter_mut().enumerate() {
            let mean = step.iter().map(|i| i.x[j] as f64).sum::<f64>() / step.len() as f64;
            *e = 0.9 * *e + 0.1 * mean;
        }
    }
    let bn = trained.bn.expect("the net has batch norm");
    let running: Vec<f32> = bn.running_mean.value().into_data().try_to_vec().unwrap();
    for (got, want) in running.iter().zip(expected) {
        assert!(
            (*got as f64 - want).abs() < 1e-5,
            "{running:?} vs {expected:?}"
        );
    }
}
