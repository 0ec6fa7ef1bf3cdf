//! Running state that is not batch norm's: a model with a `RunningState` of its own (a moving
//! average of its inputs, updated by the forward pass) and a frozen weight, on towers against
//! plain Burn steps on one device.

use burn::module::{Module, Param, RunningState};
use burn::nn::{Linear, LinearConfig};
use burn::optim::{GradientsParams, ModuleOptimizer, SgdConfig};
use burn::tensor::{Device, Tensor, TensorData};
use towers_multigpu::{Reduce, RunningStates, Towers, TowersConfig, parse_devices};

const LR: f64 = 0.05;

/// One example: four inputs and two targets.
#[derive(Clone, Debug)]
struct Item {
    x: [f32; 4],
    y: [f32; 2],
}

#[derive(Module, Debug)]
struct Smoothed {
    fc: Linear,
    /// Added to the output; never trained.
    frozen: Param<Tensor<1>>,
    /// The moving average (momentum 0.1) of the inputs seen in training.
    input_mean: RunningState<Tensor<1>>,
}

impl Smoothed {
    fn new(device: &Device) -> Self {
        let frozen = Tensor::<1>::from_floats([0.5, -0.25], device);
        Self {
            fc: LinearConfig::new(4, 2).init(device),
            frozen: Param::from_tensor(frozen).set_require_grad(false),
            input_mean: RunningState::new(Tensor::zeros([4], device)),
        }
    }

    fn loss(&self, items: &[Item], device: &Device) -> Tensor<1> {
        let n = items.len();
        let x: Vec<f32> = items.iter().flat_map(|i| i.x).collect();
        let y: Vec<f32> = items.iter().flat_map(|i| i.y).collect();
        let x = Tensor::<2>::from_data(TensorData::new(x, [n, 4]), device);
        let y = Tensor::<2>::from_data(TensorData::new(y, [n, 2]), device);
        let batch_mean = x.clone().mean_dim(0).reshape([4]).detach();
        // As burn-nn's BatchNorm: `value_sync` folds this thread's last update in first.
        let mean = self.input_mean.value_sync();
        self.input_mean
            .update(mean.mul_scalar(0.9) + batch_mean.mul_scalar(0.1));
        let out = self.fc.forward(x) + self.frozen.val().unsqueeze::<2>();
        (out - y).powi_scalar(2).mean()
    }
}

fn batch(step: usize) -> Vec<Item> {
    (0..8)
        .map(|i| {
            let v = |k: usize| ((i * 7 + k * 3 + step * 5) % 11) as f32 / 5.0 - 1.0;
            Item {
                x: [v(0), v(1), v(2), v(3)],
                y: [v(4), v(5)],
            }
        })
        .collect()
}

fn sgd() -> ModuleOptimizer {
    SgdConfig::new().init()
}

fn read(t: Tensor<1>) -> Vec<f32> {
    t.into_data().try_to_vec::<f32>().unwrap()
}

/// Weights, then the running mean, then the frozen weight.
fn state(model: &Smoothed) -> [Vec<f32>; 3] {
    let weights = [
        model.fc.weight.val().flatten(0, 1),
        model.fc.bias.as_ref().unwrap().val(),
    ];
    [
        read(Tensor::cat(weights.to_vec(), 0)),
        read(model.input_mean.value_sync()),
        read(model.frozen.val()),
    ]
}

/// A copy of `model` with running-state buffers of its own (a clone shares them).
fn fresh(model: &Smoothed) -> Smoothed {
    model.valid().train()
}

/// Plain Burn steps on one device: the reference.
fn one_device(mut model: Smoothed, device: &Device, steps: usize) -> Smoothed {
    let mut optim = sgd();
    for step in 0..steps {
        let grads = model.loss(&batch(step), device).backward();
        let grads = GradientsParams::from_grads(grads, &model);
        model = optim.step(LR, model, grads);
    }
    model
}

fn on_towers(model: Smoothed, config: TowersConfig, steps: usize) -> Smoothed {
    // Parts of 2 and 6 examples: the running means must be weighted by examples.
    let devices = parse_devices("flex*1,flex*3").unwrap();
    let mut towers = Towers::new(model, sgd(), &devices, config).unwrap();
    for step in 0..steps {
        let loss = |m: &Smoothed, items: &[Item], device: &Device| m.loss(items, device);
        towers.step(&batch(step), LR, loss).unwrap();
    }
    towers.into_model()
}

fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= 1e-5 * w.abs().max(1.0),
            "{what}: {got:?} vs {want:?}"
        );
    }
}

/// A model's own running state is found and averaged by examples, which for a moving mean
/// gives one device's value; the frozen weight stays bit for bit. Both reductions.
#[test]
fn a_models_own_running_state_is_kept_like_one_devices() {
    let device = Device::flex().autodiff();
    let model = Smoothed::new(&device);
    let [_, _, frozen] = state(&model);
    let expected = state(&one_device(fresh(&model), &device, 3));
    assert_ne!(
        expected[1],
        vec![0.0; 4],
        "the forward pass updates the running mean"
    );
    for reduce in [Reduce::ParameterDevice, Reduce::AllReduce] {
        let config = TowersConfig::default().with_reduce(reduce);
        let got = state(&on_towers(fresh(&model), config, 3));
        assert_close(&got[0], &expected[0], &format!("{reduce:?}: weights"));
        assert_close(&got[1], &expected[1], &format!("{reduce:?}: running mean"));
        assert_eq!(got[2], frozen, "{reduce:?}: the frozen weight is untouched");
    }
}

/// Named running state leaves any other alone: the model keeps its own running mean, which
/// the towers' forward passes never reach under the parameter-device reduction, and stderr
/// names `input_mean` as running state the names leave out. The towers run in a child process
/// (this test binary again), whose stderr is read.
#[test]
fn running_state_left_out_by_name_is_not_synced() {
    if towers_testing::child::role().is_some() {
        let device = Device::flex().autodiff();
        let model = Smoothed::new(&device);
        let names = vec!["running_mean".to_string(), "running_var".to_string()];
        let config = TowersConfig::default().with_running_states(RunningStates::Named(names));
        let got = state(&on_towers(fresh(&model), config, 2));
        let expected = state(&one_device(fresh(&model), &device, 2));
        assert_close(&got[0], &expected[0], "weights");
        assert_eq!(
            got[1],
            vec![0.0; 4],
            "the model's running mean was never written"
        );
        return;
    }
    let name = towers_testing::test_name!("running_state_left_out_by_name_is_not_synced");
    let child = towers_testing::child::child(&name, "named running state", &[], "")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&child.stderr);
    assert!(child.status.success(), "{stderr}");
    let warning = "warning: `input_mean` is running state (the first training step changed it";
    assert_eq!(
        stderr.matches(warning).count(),
        1,
        "one warning, at the first step: {stderr}"
    );
    assert!(
        stderr.contains(r#"["running_mean", "running_var"]"#),
        "{stderr}"
    );
}
