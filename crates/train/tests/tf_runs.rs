//! Continuing a TF 1.x run: train directories TF 2.21 left (crates/train/tests/data/tf_runs,
//! from scripts/tf_fixtures/tf_run_checkpoint.py: the CIFAR-10 tutorial's net fine-tuned by
//! RMSProp with moving averages, by momentum and by Adam; a centered RMSProp's) go on under
//! `--resume` as TF's own run went
//! on after its save: the same losses, weights and moving averages two steps later, with the
//! learning rate of TF's step. A run of another optimizer, or that trained other parameters, is
//! refused, naming the variable that shows it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use burn::tensor::{Device, Tensor};
use towers_data::cifar10::Cifar10Format;
use towers_data::transforms::CifarEval;
use towers_models::{Cifar10Config, Cifar10Net};
use towers_train::{
    Input, LoadOptions, LrScheduleConfig, OptimizerConfig, TrainConfig, Trained, Trainer,
    fine_tuning, load_weights, read_log,
};

#[derive(serde::Deserialize)]
struct Expected {
    checkpoint_step: u64,
    image_size: usize,
    scopes: Vec<String>,
    learning_rates: Vec<f64>,
    losses: Vec<f64>,
    after: BTreeMap<String, Summary>,
    step_after: u64,
}

/// A tensor's sum, absolute sum and first values, in TF's layout.
#[derive(serde::Deserialize, Debug)]
struct Summary {
    sum: f64,
    abs_sum: f64,
    head: Vec<f64>,
}

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tf_runs")
}

fn expected(run: &str) -> Expected {
    let text = std::fs::read_to_string(data().join(run).join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// A copy of the TF run `run`'s train directory, which a resumed run writes into.
fn copy_of(run: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(data().join(run)).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), tmp.path().join(entry.file_name())).unwrap();
    }
    tmp
}

/// The run's settings: the whole 200-image file a step, in order, as TF's steps took it.
fn config(dir: &Path, optimizer: OptimizerConfig, expected: &Expected) -> TrainConfig {
    let mut config = TrainConfig::cifar10();
    config.devices = "flex".into();
    config.batch_size = 200;
    config.reader_threads = Some(1);
    config.shuffle_queue = false;
    config.max_steps = expected.step_after;
    config.optimizer = optimizer;
    config.learning_rate = LrScheduleConfig::PiecewiseConstant {
        boundaries: vec![expected.checkpoint_step],
        values: expected.learning_rates.clone(),
    };
    config.log_every = 1;
    config.train_dir = dir.to_path_buf();
    config.resume = true;
    config
}

fn rmsprop() -> OptimizerConfig {
    OptimizerConfig::inception_rmsprop()
}

/// TF 1.x's Adam at TF-slim's epsilon.
fn tf_adam(beta2: f64) -> OptimizerConfig {
    OptimizerConfig::TfAdam {
        beta1: 0.9,
        beta2,
        epsilon: 1.0,
    }
}

fn momentum() -> OptimizerConfig {
    OptimizerConfig::Momentum {
        momentum: 0.9,
        nesterov: false,
    }
}

/// The CIFAR-10 tutorial's images, TF's test file, undistorted.
fn input(size: usize) -> Input {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../models/tests/data/tf_cifar10/test_batch.bin");
    Input::new(Cifar10Format, vec![file], CifarEval { size })
}

/// Trains `config` from the TF run in its train directory, training `scopes` only.
fn go_on(config: TrainConfig, scopes: &[String]) -> towers_train::Result<Trained<Cifar10Net>> {
    let size = expected("rmsprop").image_size;
    Trainer::new(config)
        .with_prepare(fine_tuning(None, scopes.to_vec()))
        .with_tf_resume()
        .run(
            |device| Cifar10Config::new().with_image_size(size).init(device),
            &input(size),
        )
}

fn flat<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().convert::<f32>().try_to_vec().unwrap()
}

/// The trained layers' tensors by TF name (a dense layer's weights are `[in, out]` in both).
fn by_tf_name(m: &Cifar10Net) -> BTreeMap<String, Vec<f32>> {
    let mut all = BTreeMap::new();
    for (scope, layer) in [("local4", &m.local4), ("softmax_linear", &m.softmax_linear)] {
        all.insert(format!("{scope}/weights"), flat(layer.weight.val()));
        let bias = layer.bias.as_ref().expect("a bias");
        all.insert(format!("{scope}/biases"), flat(bias.val()));
    }
    all
}

/// `got` matches TF's `want`: each value to within a thousandth of the change the two steps
/// made (`before`: the value at the checkpoint), so that a step taken otherwise fails.
fn assert_close(name: &str, got: &[f32], want: &Summary, before: &[f32]) {
    let moved: f64 = (want.head.iter().zip(before))
        .map(|(w, b)| (w - *b as f64).abs())
        .sum();
    assert!(moved > 0.0, "{name}: TF's two steps moved nothing");
    let off: f64 = (want.head.iter().zip(got))
        .map(|(w, g)| (w - *g as f64).abs())
        .sum();
    assert!(
        off < 2e-3 * moved,
        "{name}: off by {off:e}, where TF moved {moved:e}"
    );
    let sum: f64 = got.iter().map(|v| *v as f64).sum();
    let abs_sum: f64 = got.iter().map(|v| v.abs() as f64).sum();
    let scale = want.abs_sum.max(1e-3);
    assert!(
        (sum - want.sum).abs() < 1e-4 * scale,
        "{name}: sum {sum} vs TF's {}",
        want.sum
    );
    assert!(
        (abs_sum - want.abs_sum).abs() < 1e-4 * scale,
        "{name}: {abs_sum} vs TF's"
    );
}

/// The values of the run's checkpoint by TF name (the shadows under their variables' names).
fn at_checkpoint(run: &str, averages: bool) -> BTreeMap<String, Vec<f32>> {
    let checkpoint = towers_models::weights::TfCheckpoint::open(&data().join(run)).unwrap();
    let shadow = |name: &str| match averages {
        true => format!("{name}/ExponentialMovingAverage"),
        false => name.to_string(),
    };
    [
        "local4/weights",
        "local4/biases",
        "softmax_linear/weights",
        "softmax_linear/biases",
    ]
    .into_iter()
    .filter_map(|name| Some((name.to_string(), checkpoint.read_f32(&shadow(name)).ok()?)))
    .collect()
}

fn goes_on_as_tf_did(run: &str, optimizer: OptimizerConfig, averages: bool) {
    let expected = expected(run);
    let dir = copy_of(run);
    let mut config = config(dir.path(), optimizer, &expected);
    config.moving_average = averages;
    let trained = go_on(config, &expected.scopes).unwrap();
    assert_eq!(trained.report.step, expected.step_after);
    let log = read_log(&dir.path().join(towers_train::LOG_FILE)).unwrap();
    let logged: Vec<(u64, f64, f64)> = log.iter().map(|e| (e.step, e.loss, e.lr)).collect();
    let first = expected.checkpoint_step + 1;
    assert_eq!(logged.len(), expected.losses.len(), "{logged:?}");
    for ((step, loss, lr), (i, want)) in logged.iter().zip(expected.losses.iter().enumerate()) {
        assert_eq!(*step, first + i as u64);
        assert!(
            (loss - want).abs() < 1e-5 * want,
            "step {step}: {loss} vs TF's {want}"
        );
        assert_eq!(*lr, expected.learning_rates[i], "step {step}'s rate");
    }
    let before = at_checkpoint(run, false);
    let got = by_tf_name(&trained.model);
    let mut compared = 0;
    for (name, want) in &expected.after {
        let (values, start) = match name.strip_suffix("/ExponentialMovingAverage") {
            Some(variable) => {
                let averages = trained.averages.as_ref().expect("averages kept");
                (
                    by_tf_name(averages)[variable].clone(),
                    &at_checkpoint(run, true)[variable],
                )
            }
            None => (got[name].clone(), &before[name]),
        };
        assert_close(name, &values, want, start);
        compared += 1;
    }
    assert_eq!(compared, expected.after.len());
    // The directory now holds TF's checkpoint and ours, later: weights read from it are ours.
    let net = Cifar10Config::new()
        .with_image_size(expected.image_size)
        .init(&Device::flex());
    let (read, _) = load_weights(net, dir.path(), LoadOptions::new()).unwrap();
    assert!(
        by_tf_name(&read) == got,
        "read other weights than the trained ones"
    );
}

#[test]
fn an_rmsprop_run_with_moving_averages_goes_on_as_tfs_did() {
    goes_on_as_tf_did("rmsprop", rmsprop(), true);
}

#[test]
fn a_momentum_run_goes_on_as_tfs_did() {
    goes_on_as_tf_did("momentum", momentum(), false);
}

#[test]
fn an_adam_run_goes_on_as_tfs_did() {
    goes_on_as_tf_did("adam", tf_adam(0.999), false);
}

/// The error of continuing `run` with `optimizer`, training `scopes`.
fn refusal(run: &str, optimizer: OptimizerConfig, scopes: &[&str]) -> String {
    let dir = copy_of(run);
    let config = config(dir.path(), optimizer, &expected(run));
    let scopes: Vec<String> = scopes.iter().map(|s| s.to_string()).collect();
    let Err(error) = go_on(config, &scopes) else {
        panic!("{run} continued with {scopes:?}")
    };
    format!("{:?}", anyhow::Error::from(error))
}

fn assert_says(error: &str, words: &[&str]) {
    for words in words {
        assert!(error.contains(words), "{words:?} in {error}");
    }
}

#[test]
fn a_run_of_another_optimizer_is_refused_naming_its_slot() {
    let error = refusal("momentum", rmsprop(), &["softmax_linear"]);
    assert_says(
        &error,
        &[
            "model.ckpt-6.index",
            "written by TF's MomentumOptimizer (`softmax_linear/weights/Momentum`)",
            "`RMSProp` slots",
        ],
    );
    let error = refusal(
        "rmsprop",
        OptimizerConfig::Sgd,
        &["local4", "softmax_linear"],
    );
    assert_says(
        &error,
        &[
            "RMSPropOptimizer (`local4/weights/RMSProp`)",
            "no slots (`sgd`)",
        ],
    );
    let adam = OptimizerConfig::Adam {
        beta1: 0.9,
        beta2: 0.999,
        epsilon: 1e-8,
    };
    let error = refusal("adam", adam.clone(), &["softmax_linear"]);
    assert_says(&error, &["kind = \"tf_adam\"", "not Burn's"]);
    let error = refusal("rmsprop", adam, &["local4", "softmax_linear"]);
    assert_says(
        &error,
        &[
            "RMSPropOptimizer (`local4/weights/RMSProp`)",
            "`Adam` slots",
        ],
    );
    let error = refusal("adam", tf_adam(0.99), &["softmax_linear"]);
    assert_says(
        &error,
        &[
            "do not fit this run's betas",
            "`beta2_power` 0.40598",
            "(beta2 0.99)",
        ],
    );
    let error = refusal("centered_rmsprop", rmsprop(), &["softmax_linear"]);
    assert_says(
        &error,
        &["centered RMSProp", "`softmax_linear/weights/RMSProp_2`"],
    );
}

#[test]
fn a_run_that_trained_other_parameters_is_refused() {
    // TF trained local4 and softmax_linear; this run trains everything.
    let error = refusal("rmsprop", rmsprop(), &[]);
    assert_says(
        &error,
        &["keeps no `conv1/weights/RMSProp`", "--trainable-scopes"],
    );
    // ... and this one freezes local4.
    let error = refusal("rmsprop", rmsprop(), &["softmax_linear"]);
    assert_says(
        &error,
        &[
            "TF's run trained `local4.weight` with RMSPropOptimizer (`local4/weights/RMSProp`)",
            "freezes it",
        ],
    );
}

#[test]
fn a_tf_train_directory_asks_for_resume_and_a_model_with_tf_names() {
    let expected = expected("momentum");
    let dir = copy_of("momentum");
    let mut config = config(dir.path(), momentum(), &expected);
    config.resume = false;
    let error = go_on(config.clone(), &expected.scopes)
        .err()
        .unwrap()
        .to_string();
    assert_says(
        &error,
        &[
            "holds a TF run's checkpoint",
            "model.ckpt-6, step 6",
            "--resume",
        ],
    );
    config.resume = true;
    let size = expected.image_size;
    let error = Trainer::new(config)
        .run(
            |device| Cifar10Config::new().with_image_size(size).init(device),
            &input(size),
        )
        .err()
        .unwrap()
        .to_string();
    assert_says(&error, &["cannot continue it", "with_tf_resume"]);
}

/// A TF2 training loop's directory (`tf.train.CheckpointManager`: object-based checkpoints) is
/// refused, pointing to `--pretrained`; a file named `checkpoint` that is no TF state file is
/// not taken for one: a fresh run trains there.
#[test]
fn tf2_runs_are_refused_and_other_checkpoint_files_ignored() {
    let expected = expected("momentum");
    let tf2 = Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/tests/data/tf2_object");
    let dir = tempfile::tempdir().unwrap();
    for file in ["checkpoint", "ckpt-1.index", "ckpt-1.data-00000-of-00001"] {
        std::fs::copy(tf2.join(file), dir.path().join(file)).unwrap();
    }
    let config = config(dir.path(), momentum(), &expected);
    let Err(error) = go_on(config.clone(), &expected.scopes) else {
        panic!("a TF2 run continued")
    };
    assert_says(
        &error.to_string(),
        &["ckpt-1.index", "TF2 object-based", "--pretrained"],
    );

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("checkpoint"), "epoch 3, val_loss 0.21\n").unwrap();
    let mut config = config.clone();
    (config.train_dir, config.resume, config.max_steps) = (dir.path().to_path_buf(), false, 1);
    let trained = go_on(config, &expected.scopes).unwrap();
    assert_eq!(trained.report.step, 1);
}

/// A TF V1 checkpoint (one file, named as ours are: `model.ckpt-5`) is not taken for one of
/// ours: a fresh run trains beside it, leaving it as it is; with TF's state file naming it,
/// `--resume` reads it as TF's (here of another network: the missing variable is named).
#[test]
fn a_tf_v1_checkpoint_is_not_taken_for_ours() {
    let v1 =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/tests/data/tf_dtypes/v1/model.ckpt");
    let expected = expected("momentum");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("model.ckpt-5");
    std::fs::copy(&v1, &file).unwrap();
    let mut config = config(dir.path(), momentum(), &expected);
    (config.resume, config.max_steps) = (false, 1);
    let trained = go_on(config.clone(), &expected.scopes).unwrap();
    assert_eq!(trained.report.step, 1);
    assert_eq!(std::fs::read(&file).unwrap(), std::fs::read(&v1).unwrap());

    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(&v1, dir.path().join("model.ckpt-5")).unwrap();
    let state = "model_checkpoint_path: \"model.ckpt-5\"\n";
    std::fs::write(dir.path().join("checkpoint"), state).unwrap();
    (config.train_dir, config.resume) = (dir.path().to_path_buf(), true);
    config.optimizer = OptimizerConfig::Sgd;
    let Err(error) = go_on(config, &expected.scopes) else {
        panic!("another network's V1 checkpoint continued")
    };
    let error = format!("{:?}", anyhow::Error::from(error));
    assert_says(&error, &["model.ckpt-5:", "weights of another network"]);
}
