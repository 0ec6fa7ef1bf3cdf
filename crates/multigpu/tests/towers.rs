//! Towers against independent computations: plain single-device Burn steps for the
//! parameters, fresh `BatchNorm` layers for the running statistics.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use burn::module::{Module, ModuleVisitor, Param, RunningState};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{BatchNorm, BatchNormConfig, Linear, LinearConfig};
use burn::optim::momentum::MomentumConfig;
use burn::optim::{GradientsParams, ModuleOptimizer, SgdConfig};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Int, Tensor, TensorData};
use towers_data::HostBatch;
use towers_multigpu::{
    BatchNormSync, Error, Reduce, StepOutput, TowerDevice, Towers, TowersConfig, parse_devices,
};

const LR: f64 = 0.1;

fn flex() -> Device {
    Device::flex().autodiff()
}

#[allow(deprecated)] // burn 0.22 deprecates ndarray; it is the second CPU backend to mix with
fn ndarray() -> Device {
    Device::ndarray().autodiff()
}

/// SGD with PyTorch/TF momentum (no dampening): plain SGD is sensitive to the gradient's scale,
/// so a sum where a mean belongs, or a wrong weight, shows in the parameters.
fn sgd() -> ModuleOptimizer {
    SgdConfig::new()
        .with_momentum(Some(
            MomentumConfig::new().with_momentum(0.9).with_dampening(0.0),
        ))
        .init()
}

/// A tiny conv net without batch norm: images `[n, 3, 8, 8]`, 5 classes.
#[derive(Module, Debug)]
struct Net {
    conv: Conv2d,
    fc: Linear,
}

impl Net {
    fn new(device: &Device) -> Self {
        Self {
            conv: Conv2dConfig::new([3, 4], [3, 3]).init(device),
            fc: LinearConfig::new(4 * 6 * 6, 5).init(device),
        }
    }

    fn loss(&self, x: Tensor<4>, y: Tensor<1, Int>) -> (Tensor<1>, Tensor<2>) {
        let logits = self
            .fc
            .forward(relu(self.conv.forward(x)).flatten::<2>(1, 3));
        let loss = CrossEntropyLossConfig::new()
            .init(&logits.device())
            .forward(logits.clone(), y);
        (loss, logits)
    }
}

/// Batch norm straight on the images, so its statistics are those of the input slices.
#[derive(Module, Debug)]
struct BnNet {
    bn: BatchNorm,
    fc: Linear,
}

impl BnNet {
    fn new(device: &Device) -> Self {
        Self {
            bn: BatchNormConfig::new(3).init(device),
            fc: LinearConfig::new(3 * 8 * 8, 5).init(device),
        }
    }

    fn loss(&self, x: Tensor<4>, y: Tensor<1, Int>) -> Tensor<1> {
        let logits = self.fc.forward(self.bn.forward(x).flatten::<2>(1, 3));
        CrossEntropyLossConfig::new()
            .init(&logits.device())
            .forward(logits, y)
    }
}

/// `n` images `[3, 8, 8]` that differ per `seed`, with channel means of about 0, 1 and 2, and
/// labels spread over the 5 classes.
fn batch(n: usize, seed: usize) -> HostBatch {
    let images = (0..n * 192)
        .map(|i| {
            let channel = (i / 64) % 3;
            let noise = ((i * 7919 + seed * 104_729) % 1009) as f32 / 504.5 - 1.0;
            channel as f32 + noise * (1.0 + channel as f32)
        })
        .collect();
    let labels = (0..n).map(|i| ((i * 3 + seed) % 5) as i64).collect();
    HostBatch::new(images, labels, [3, 8, 8])
}

fn concat(batches: &[HostBatch]) -> HostBatch {
    HostBatch::new(
        batches.iter().flat_map(|b| b.images().to_vec()).collect(),
        batches.iter().flat_map(|b| b.labels().to_vec()).collect(),
        [3, 8, 8],
    )
}

/// Every float tensor of a module, flattened in visiting order.
fn values<M: Module>(module: &M) -> Vec<f32> {
    struct Values(Vec<f32>);
    impl ModuleVisitor for Values {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            self.0.extend(param.val().to_data().iter::<f32>());
        }
    }
    let mut v = Values(Vec::new());
    module.visit(&mut v);
    v.0
}

fn assert_close(got: &[f32], expected: &[f32], what: &str) {
    assert_eq!(got.len(), expected.len(), "{what}: lengths");
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        assert!(
            (g - e).abs() <= 1e-5 * e.abs().max(1.0),
            "{what}: value {i} is {g}, expected {e}"
        );
    }
}

/// The reference: plain Burn steps on one device, one per batch. Returns the model and each
/// step's loss and correct count.
fn plain_training(mut model: Net, batches: &[HostBatch]) -> (Net, Vec<(f64, usize)>) {
    let device = flex();
    let mut optim = sgd();
    let mut outputs = Vec::new();
    for b in batches {
        let (x, y) = b.as_slice().to_tensors(&device);
        let (loss, logits) = model.loss(x, y);
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        let loss: f32 = loss.into_scalar();
        let predicted = logits
            .argmax(1)
            .into_data()
            .iter::<i64>()
            .collect::<Vec<_>>();
        let correct = predicted
            .iter()
            .zip(b.labels())
            .filter(|(p, l)| p == l)
            .count();
        outputs.push((loss as f64, correct));
        model = optim.step(LR, model, grads);
    }
    (model, outputs)
}

/// Trains a copy of `model` with towers on `devices`, one `step` per micro-batch, and checks
/// the parameters and reported losses against plain steps on `updates`, the concatenated
/// micro-batches of each update.
fn assert_like_one_device(
    model: &Net,
    devices: &[TowerDevice],
    config: TowersConfig,
    micro_batches: &[Vec<HostBatch>],
) -> Towers<Net> {
    let k = config.accumulation;
    let mut towers = Towers::new(model.clone(), sgd(), devices, config).unwrap();
    let mut outputs: Vec<StepOutput> = Vec::new();
    for update in micro_batches {
        assert_eq!(update.len(), k);
        for micro in update {
            outputs.push(
                towers
                    .step(micro, LR, |m: &Net, x, y| m.loss(x, y))
                    .unwrap(),
            );
        }
    }
    let updates: Vec<HostBatch> = micro_batches.iter().map(|u| concat(u)).collect();
    let (expected, expected_outputs) = plain_training(model.clone(), &updates);

    let before = values(model);
    let got = values(towers.model());
    let want = values(&expected);
    assert_close(&got, &want, "parameters");
    let moved = want
        .iter()
        .zip(&before)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max);
    assert!(
        moved > 1e-3,
        "the steps must move the parameters (moved {moved})"
    );
    for (replica, tower) in towers.replicas().iter().zip(towers.devices()) {
        assert_eq!(
            values(replica),
            got,
            "every replica holds the model's weights"
        );
        assert_eq!(replica.devices(), vec![tower.device().clone()]);
    }

    let updated: Vec<bool> = outputs.iter().map(|o| o.updated).collect();
    let expected_updated: Vec<bool> = (0..outputs.len()).map(|i| (i + 1) % k == 0).collect();
    assert_eq!(updated, expected_updated);
    if k == 1 {
        for (out, (loss, correct)) in outputs.iter().zip(expected_outputs) {
            assert!(
                (out.loss - loss).abs() <= 1e-5 * loss.abs(),
                "{} vs {loss}",
                out.loss
            );
            assert_eq!(out.correct, Some(correct));
        }
    }
    towers
}

#[test]
fn one_tower_on_the_model_device_is_a_plain_step() {
    let model = Net::new(&flex());
    let batches = [batch(8, 1), batch(8, 2)];
    let mut towers = Towers::new(
        model.clone(),
        sgd(),
        &parse_devices("flex").unwrap(),
        TowersConfig::default(),
    )
    .unwrap();
    for b in &batches {
        towers.step(b, LR, |m: &Net, x, y| m.loss(x, y)).unwrap();
    }
    let (expected, _) = plain_training(model, &batches);
    assert_eq!(
        values(towers.model()),
        values(&expected),
        "bitwise the same"
    );
}

#[test]
fn two_and_three_towers_train_like_one_device() {
    let model = Net::new(&flex());
    let updates = vec![vec![batch(12, 1)], vec![batch(12, 2)]];
    for reduce in [Reduce::ParameterDevice, Reduce::AllReduce] {
        let config = TowersConfig::default().with_reduce(reduce);
        // Equal slices (6 + 6, 4 + 4 + 4), then unequal ones (2 + 4 + 6).
        for list in ["flex,flex", "flex,flex,flex", "flex*1,flex*2,flex*3"] {
            let devices = parse_devices(list).unwrap();
            assert_like_one_device(&model, &devices, config.clone(), &updates);
        }
    }
}

#[test]
fn mixed_backends_train_like_one_device() {
    let model = Net::new(&flex());
    let updates = vec![vec![batch(10, 3)], vec![batch(10, 4)]];
    for reduce in [Reduce::ParameterDevice, Reduce::AllReduce] {
        let devices = parse_devices("flex*2,ndarray*3").unwrap();
        let towers = assert_like_one_device(
            &model,
            &devices,
            TowersConfig::default().with_reduce(reduce),
            &updates,
        );
        // The optimizer moves a parameter to its gradient's device: the gradients must have
        // been on the model's device.
        assert_eq!(towers.model().devices(), vec![flex()], "{reduce:?}");
    }
    // The parameter device need not be a tower.
    let devices = parse_devices("ndarray,ndarray").unwrap();
    let towers = assert_like_one_device(&model, &devices, TowersConfig::default(), &updates);
    assert_eq!(towers.model().devices(), vec![flex()]);
}

#[test]
fn accumulated_micro_batches_train_like_one_larger_batch() {
    let model = Net::new(&flex());
    // Micro-batches of unequal sizes: each example must weigh the same.
    let updates = vec![
        vec![batch(4, 5), batch(6, 6), batch(4, 7)],
        vec![batch(6, 8), batch(4, 9), batch(4, 10)],
    ];
    for reduce in [Reduce::ParameterDevice, Reduce::AllReduce] {
        let config = TowersConfig::default()
            .with_reduce(reduce)
            .with_accumulation(3);
        for list in ["flex", "flex,flex", "flex,ndarray*2"] {
            let devices = parse_devices(list).unwrap();
            assert_like_one_device(&model, &devices, config.clone(), &updates);
        }
    }
}

/// Running mean and variance one fresh `BatchNorm` (starting from `start`) holds after each
/// slice, averaged with the slices' sizes as weights.
fn expected_stats(start: &(Vec<f32>, Vec<f32>), slices: &[HostBatch]) -> (Vec<f32>, Vec<f32>) {
    let device = flex();
    let total: usize = slices.iter().map(HostBatch::len).sum();
    let mut mean = vec![0.0; 3];
    let mut var = vec![0.0; 3];
    for slice in slices {
        let mut bn: BatchNorm = BatchNormConfig::new(3).init(&device);
        let tensor = |v: &Vec<f32>| Tensor::from_data(TensorData::new(v.clone(), [3]), &device);
        bn.running_mean = RunningState::new(tensor(&start.0));
        bn.running_var = RunningState::new(tensor(&start.1));
        let (x, _) = slice.as_slice().to_tensors(&device);
        let _ = bn.forward(x);
        let w = slice.len() as f32 / total as f32;
        let m = bn.running_mean.value_sync().into_data();
        let v = bn.running_var.value_sync().into_data();
        for (acc, s) in mean.iter_mut().zip(m.iter::<f32>()) {
            *acc += w * s;
        }
        for (acc, s) in var.iter_mut().zip(v.iter::<f32>()) {
            *acc += w * s;
        }
    }
    (mean, var)
}

fn stats_of(model: &BnNet) -> (Vec<f32>, Vec<f32>) {
    let read = |s: &RunningState<Tensor<1>>| s.value().into_data().iter::<f32>().collect();
    (read(&model.bn.running_mean), read(&model.bn.running_var))
}

fn split(b: &HostBatch, sizes: &[usize]) -> Vec<HostBatch> {
    b.split(sizes)
        .unwrap()
        .iter()
        .map(|s| HostBatch::new(s.images().to_vec(), s.labels().to_vec(), [3, 8, 8]))
        .collect()
}

#[test]
fn batch_norm_statistics_are_averaged_over_towers() {
    let device = flex();
    for reduce in [Reduce::ParameterDevice, Reduce::AllReduce] {
        for sync in [BatchNormSync::Average, BatchNormSync::FirstTower] {
            let config = TowersConfig::default()
                .with_reduce(reduce)
                .with_batch_norm(sync);
            // Slices of 2 and 6: an unweighted mean, or one tower's, would differ.
            let devices = parse_devices("flex,ndarray*3").unwrap();
            let mut towers = Towers::new(BnNet::new(&device), sgd(), &devices, config).unwrap();
            let mut expected = (vec![0.0; 3], vec![1.0; 3]);
            for seed in 0..2 {
                let b = batch(8, seed);
                towers.step(&b, LR, |m: &BnNet, x, y| m.loss(x, y)).unwrap();
                let slices = split(&b, &[2, 6]);
                expected = match sync {
                    BatchNormSync::Average => expected_stats(&expected, &slices),
                    BatchNormSync::FirstTower => expected_stats(&expected, &slices[..1]),
                };
                let what = format!("{reduce:?}, {sync:?}, step {seed}");
                for (i, model) in std::iter::once(towers.model())
                    .chain(towers.replicas())
                    .enumerate()
                {
                    let (mean, var) = stats_of(model);
                    assert_close(&mean, &expected.0, &format!("{what}, copy {i}, mean"));
                    assert_close(&var, &expected.1, &format!("{what}, copy {i}, var"));
                }
            }
            assert!(expected.0[2] > 0.2, "the statistics moved: {expected:?}");
        }
    }
}

/// Runs `f` on a thread of its own and fails the test if it takes longer than a minute.
fn within_a_minute<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || tx.send(f()));
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the step hung")
}

/// This thread's id in `/proc/self/task`.
fn thread_id() -> String {
    let link = std::fs::read_link("/proc/thread-self").unwrap();
    link.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn a_failing_tower_ends_the_step_with_its_device_and_no_thread_left() {
    let model = Net::new(&flex());
    let good = batch(9, 11);
    let failing = batch(9, 12);
    for reduce in [Reduce::ParameterDevice, Reduce::AllReduce] {
        let devices = parse_devices("flex,ndarray,flex").unwrap();
        let config = TowersConfig::default().with_reduce(reduce);
        let mut towers = Towers::new(model.clone(), sgd(), &devices, config).unwrap();
        let threads = Arc::new(Mutex::new(Vec::new()));
        let seen = threads.clone();
        let failing = failing.clone();
        let (towers, result) = within_a_minute(move || {
            let result = towers.step(&failing, LR, |m: &Net, x: Tensor<4>, y| {
                seen.lock().unwrap().push(thread_id());
                // A shape error on one device only: the linear layer gets the wrong width.
                let x = if x.device() == ndarray() {
                    x.narrow(3, 0, 7)
                } else {
                    x
                };
                m.loss(x, y)
            });
            (towers, result)
        });
        match result {
            Err(Error::TowerPanicked { tower, device, .. }) => {
                assert_eq!((tower, device.as_str()), (1, "ndarray"), "{reduce:?}")
            }
            other => panic!("{reduce:?}: expected tower 1 to panic, got {other:?}"),
        }
        let threads = threads.lock().unwrap();
        assert_eq!(threads.len(), 3, "every tower ran");
        for id in threads.iter() {
            let alive = std::path::Path::new(&format!("/proc/self/task/{id}")).exists();
            assert!(!alive, "{reduce:?}: tower thread {id} still running");
        }

        // Nothing of the failed step was kept: the next one is one plain step.
        let mut towers = towers;
        towers
            .step(&good, LR, |m: &Net, x, y| m.loss(x, y))
            .unwrap();
        let (expected, _) = plain_training(model.clone(), std::slice::from_ref(&good));
        assert_close(
            &values(towers.model()),
            &values(&expected),
            "after a failure",
        );
    }
}

#[test]
fn a_loss_function_error_ends_the_step_with_its_device() {
    let model = Net::new(&flex());
    for reduce in [Reduce::ParameterDevice, Reduce::AllReduce] {
        let devices = parse_devices("flex,flex,ndarray").unwrap();
        let config = TowersConfig::default().with_reduce(reduce);
        let mut towers = Towers::new(model.clone(), sgd(), &devices, config).unwrap();
        let result = within_a_minute(move || {
            towers.step(&batch(6, 13), LR, |m: &Net, x: Tensor<4>, y| {
                if x.device() == ndarray() {
                    Err("labels out of range")
                } else {
                    Ok(m.loss(x, y).0)
                }
            })
        });
        match result {
            Err(Error::TowerFailed {
                tower,
                device,
                message,
            }) => {
                assert_eq!((tower, device.as_str()), (2, "ndarray"));
                assert_eq!(message, "labels out of range");
            }
            other => panic!("{reduce:?}: expected tower 2 to fail, got {other:?}"),
        }
    }
}

#[test]
fn misuse_is_an_error() {
    let model = Net::new(&flex());
    let three = parse_devices("flex,flex,flex").unwrap();
    let mut towers = Towers::new(model.clone(), sgd(), &three, TowersConfig::default()).unwrap();
    let err = towers
        .step(&batch(2, 0), LR, |m: &Net, x, y| m.loss(x, y))
        .unwrap_err();
    assert!(matches!(err, Error::Batch(_)), "{err}");

    // Per-example values instead of the mean loss.
    let err = towers
        .step(&batch(6, 0), LR, |m: &Net, x, y| {
            m.loss(x, y).1.flatten::<1>(0, 1)
        })
        .unwrap_err();
    assert!(
        matches!(&err, Error::TowerFailed { message, .. } if message.contains("shape [1]")),
        "{err}"
    );

    let plain = Net::new(&Device::flex());
    let err = Towers::new(plain, sgd(), &three, TowersConfig::default()).unwrap_err();
    assert!(matches!(err, Error::Config(_)), "{err}");
    let err = Towers::new(
        model,
        sgd(),
        &three,
        TowersConfig::default().with_accumulation(0),
    )
    .unwrap_err();
    assert!(matches!(err, Error::Config(_)), "{err}");
}

/// The gradients of `grads` for the parameters of `module`, flattened in visiting order.
fn gradient_values<M: Module>(module: &M, grads: &GradientsParams) -> Vec<f32> {
    struct Values<'a>(&'a GradientsParams, Vec<f32>);
    impl ModuleVisitor for Values<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let g = self.0.get::<D>(param.id).expect("a gradient per parameter");
            self.1.extend(g.to_data().iter::<f32>());
        }
    }
    let mut v = Values(grads, Vec::new());
    module.visit(&mut v);
    v.1
}

#[test]
fn towers_report_each_towers_loss_and_keep_the_applied_gradient_when_asked() {
    let model = Net::new(&flex());
    let b = batch(12, 1);
    let (x, y) = b.as_slice().to_tensors(&flex());
    let (loss, _) = model.loss(x, y);
    let full = loss.clone().into_scalar::<f32>() as f64;
    let want = gradient_values(
        &model,
        &GradientsParams::from_grads(loss.backward(), &model),
    );
    let halves: Vec<f64> = split(&b, &[6, 6])
        .iter()
        .map(|h| {
            let (x, y) = h.as_slice().to_tensors(&flex());
            model.loss(x, y).0.into_scalar::<f32>() as f64
        })
        .collect();
    for list in ["flex", "flex,flex"] {
        let mut towers = Towers::new(
            model.clone(),
            sgd(),
            &parse_devices(list).unwrap(),
            TowersConfig::default(),
        )
        .unwrap();
        towers.keep_gradients();
        let out = towers.step(&b, LR, |m: &Net, x, y| m.loss(x, y)).unwrap();
        let kept = towers.take_gradients().expect("kept");
        assert_close(&gradient_values(&model, &kept), &want, list);
        let expected_losses = if list == "flex" {
            vec![full]
        } else {
            halves.clone()
        };
        assert_close(
            &out.tower_losses
                .iter()
                .map(|&l| l as f32)
                .collect::<Vec<_>>(),
            &expected_losses
                .iter()
                .map(|&l| l as f32)
                .collect::<Vec<_>>(),
            "tower losses",
        );
        towers.step(&b, LR, |m: &Net, x, y| m.loss(x, y)).unwrap();
        assert!(towers.take_gradients().is_none(), "kept once, when asked");
    }
}
