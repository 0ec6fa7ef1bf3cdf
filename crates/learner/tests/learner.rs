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
    ClassificationOutput, InferenceStep, Learner, LearningResult, SupervisedTraining, TrainOutput,
    TrainStep,
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
    let result = launch(model, data, |t| t.with_training_strategy(strategy.into()));
    assert!(result.error.is_none(), "{:?}", result.error);
    result.model
}

/// burn-train's training of `model` on `data`, as `setup` sets it up (one epoch by default, with
/// burn-train's own strategy unless `setup` names one).
fn launch(
    model: Net,
    data: &[Item],
    setup: impl FnOnce(SupervisedTraining<Net>) -> SupervisedTraining<Net>,
) -> LearningResult<Net> {
    launch_in(tempfile::tempdir().unwrap().path(), model, data, setup)
}

/// [`launch`], writing to `dir` (its checkpoints, where `setup` asks for them).
fn launch_in(
    dir: &std::path::Path,
    model: Net,
    data: &[Item],
    setup: impl FnOnce(SupervisedTraining<Net>) -> SupervisedTraining<Net>,
) -> LearningResult<Net> {
    let learner = Learner::new(model, SgdConfig::new().init(), LR);
    let training = SupervisedTraining::new(dir, loader(data.to_vec()), loader(items(8)))
        .with_application_logger(None);
    setup(training).launch(learner)
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

/// Plain Burn, accumulating: one SGD step per cycle, on the sum of its micro-batches' gradients,
/// each that of the mean loss over its group of items (burn-train's accumulation).
fn reference_accumulated(cycles: &[Vec<Vec<Item>>]) -> Net {
    let device = Device::flex().autodiff();
    let mut model = net(&device);
    let mut optim = SgdConfig::new().init();
    for cycle in cycles {
        let losses = cycle.iter().map(|group| {
            let batch = ItemBatcher.batch(group.clone(), &device);
            model.classify(batch).loss
        });
        let loss = losses
            .reduce(|a, b| a + b)
            .expect("a cycle has micro-batches");
        let grads = GradientsParams::from_grads(loss.backward(), &model);
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
    // Both devices' batches taken together: the towers average the replicas' means after each
    // update.
    let steps: Vec<_> = (0..3)
        .map(|s| group(&data, [4 * s, 4 * s + 4], [12 + 4 * s, 16 + 4 * s]))
        .collect();
    assert_running_mean(trained, &steps);
}

/// Panics unless `trained`'s batch norm holds the running mean (momentum 0.1, from 0) of a
/// step on each group of `steps` in turn.
fn assert_running_mean(trained: Net, steps: &[Vec<Item>]) {
    let mut expected = [0.0f64; 4];
    for step in steps {
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

#[test]
fn running_state_is_averaged_with_the_batches_weights() {
    // 21 items: device 0 gets 0..10 (batches of 4, 4, 2), device 1 gets 10..21 (4, 4, 3),
    // each batch weighing its examples.
    let data = items(21);
    let model = plain_net(&Device::flex().autodiff(), true);
    let strategy = TowersStrategy::new(parse_devices("flex,flex").unwrap())
        .with_weight(|b: &Batch| b.y.dims()[0] as f64);
    let trained = train_model(model, &data, strategy);
    // The running mean over all of each step's inputs.
    let steps = [
        group(&data, [0, 4], [10, 14]),
        group(&data, [4, 8], [14, 18]),
        group(&data, [8, 10], [18, 21]),
    ];
    assert_running_mean(trained, &steps);
}

#[test]
fn one_tower_accumulates_as_burn_trains_own_strategy() {
    // 10 items in batches of 4, 4, 2 and cycles of 2, for 2 epochs: burn-train sums each
    // cycle's gradients and ends a shorter cycle with each epoch.
    let data = items(10);
    let setup = |t: SupervisedTraining<Net>| t.grads_accumulation(2).num_epochs(2);
    let flex = || net(&Device::flex().autodiff());
    let devices = parse_devices("flex").unwrap();
    let towers = launch(flex(), &data, |t| {
        setup(t).with_training_strategy(TowersStrategy::new(devices).into())
    });
    assert!(towers.error.is_none(), "{:?}", towers.error);
    let burn_train = launch(flex(), &data, setup);
    assert!(burn_train.error.is_none(), "{:?}", burn_train.error);
    assert_same(&towers.model, &burn_train.model);
}

#[test]
fn two_towers_sum_the_cycles_steps_and_end_a_cycle_with_the_epoch() {
    // Device 0 gets items 0..12, device 1 items 12..24, 3 steps of both; cycles of 2 steps.
    let data = items(24);
    let devices = parse_devices("flex,flex").unwrap();
    let trained = launch(net(&Device::flex().autodiff()), &data, |t| {
        t.grads_accumulation(2)
            .with_training_strategy(TowersStrategy::new(devices).into())
    });
    assert!(trained.error.is_none(), "{:?}", trained.error);
    let step = |s: usize| group(&data, [4 * s, 4 * s + 4], [12 + 4 * s, 16 + 4 * s]);
    let cycles = [vec![step(0), step(1)], vec![step(2)]];
    assert_same(&trained.model, &reference_accumulated(&cycles));
}

#[test]
fn a_run_resumed_from_its_checkpoint_ends_as_one_run_straight_through() {
    // Cycles of 2 steps, 3 steps an epoch: each epoch's last cycle is a short one, which the
    // first epoch's checkpoint must hold.
    let data = items(24);
    let flex = || net(&Device::flex().autodiff());
    let towers = || TowersStrategy::new(parse_devices("flex,flex").unwrap()).into();
    let setup =
        |t: SupervisedTraining<Net>| t.grads_accumulation(2).with_training_strategy(towers());
    let straight = launch(flex(), &data, |t| setup(t).num_epochs(2));
    assert!(straight.error.is_none(), "{:?}", straight.error);
    let dir = tempfile::tempdir().unwrap();
    let checkpointed = |t: SupervisedTraining<Net>| setup(t).with_default_checkpointers();
    let first = launch_in(dir.path(), flex(), &data, |t| checkpointed(t).num_epochs(1));
    assert!(first.error.is_none(), "{:?}", first.error);
    let resumed = launch_in(dir.path(), flex(), &data, |t| {
        checkpointed(t).checkpoint(1).num_epochs(2)
    });
    assert!(resumed.error.is_none(), "{:?}", resumed.error);
    assert_same(&resumed.model, &straight.model);
}

#[test]
fn devices_with_unequal_shares_are_refused() {
    let devices = parse_devices("flex*3,flex").unwrap();
    let result = launch(net(&Device::flex().autodiff()), &items(16), |t| {
        t.with_training_strategy(TowersStrategy::new(devices).into())
    });
    let error = result.error.expect("unequal shares are refused");
    assert!(
        format!("{error:?}").contains("shares must be equal"),
        "{error:?}"
    );
}

#[test]
fn items_left_on_some_devices_at_the_epochs_end_are_counted_in_a_warning() {
    // 9 items: device 0 gets 0..4 (one batch), device 1 gets 4..9 (batches of 4 and 1); the
    // epoch ends where device 0's loader does, and item 8 is left.
    let data = items(9);
    let devices = parse_devices("flex,flex").unwrap();
    warnings::capture();
    let trained = train(&data, TowersStrategy::new(devices));
    assert_same(&trained, &reference(&[group(&data, [0, 4], [4, 8])]));
    let warned = warnings::taken();
    let expected = "1 items left in 1 of the 2 devices' data loaders are not trained on";
    assert!(
        warned.iter().any(|w| w.starts_with(expected)),
        "no warning of the item left: {warned:?}"
    );
}

/// The warnings logged while the test program runs (the `log` crate's, which burn-train's
/// strategies write to).
mod warnings {
    use std::sync::Mutex;

    static TAKEN: Mutex<Vec<String>> = Mutex::new(Vec::new());

    struct Capture;

    impl log::Log for Capture {
        fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
            metadata.level() <= log::Level::Warn
        }

        fn log(&self, record: &log::Record<'_>) {
            if self.enabled(record.metadata()) {
                TAKEN.lock().unwrap().push(record.args().to_string());
            }
        }

        fn flush(&self) {}
    }

    /// Captures the warnings from here on (once per program; later calls do nothing).
    pub(super) fn capture() {
        if log::set_logger(&Capture).is_ok() {
            log::set_max_level(log::LevelFilter::Warn);
        }
    }

    /// The warnings captured so far.
    pub(super) fn taken() -> Vec<String> {
        TAKEN.lock().unwrap().clone()
    }
}
