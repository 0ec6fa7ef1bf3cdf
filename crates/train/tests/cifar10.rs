//! The CIFAR-10 trainer end to end on the built-in data: it learns on two towers, a NaN loss
//! stops it, a resumed run continues exactly, one tower and two log the same losses.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use burn::tensor::Device;
use towers_data::cifar10::BuiltinCifar10;
use towers_models::{Cifar10Config, Cifar10Net, ImageClassifier};
use towers_multigpu::TowerLoss;
use towers_train::{
    Error, Input, LrScheduleConfig, OptimizerConfig, TrainConfig, Trained, Trainer, evaluate,
    read_log,
};

/// 5 x 200 training and 500 test images, seed 3: the same bytes for every test.
fn data() -> BuiltinCifar10 {
    BuiltinCifar10::create(200, 500, 3).unwrap()
}

/// A small, quick run: batch 32, momentum 0.9 at 0.01, averages, every step logged.
fn config(train_dir: &Path, devices: &str, max_steps: u64) -> TrainConfig {
    TrainConfig {
        devices: devices.into(),
        batch_size: 32,
        reader_threads: Some(2),
        max_steps,
        optimizer: OptimizerConfig::Momentum {
            momentum: 0.9,
            nesterov: false,
        },
        learning_rate: LrScheduleConfig::Constant { value: 0.01 },
        checkpoint_every: 1000,
        log_every: 1,
        train_dir: train_dir.to_path_buf(),
        seed: 11,
        ..TrainConfig::cifar10()
    }
}

fn net(device: &Device) -> Cifar10Net {
    Cifar10Config::new().init(device)
}

fn train(config: TrainConfig, data: &BuiltinCifar10) -> Result<Trained<Cifar10Net>, Error> {
    Trainer::new(config).run(net, &Input::cifar10_train(data.dir()).unwrap())
}

fn losses(train_dir: &Path) -> Vec<(u64, f64)> {
    read_log(&train_dir.join(towers_train::LOG_FILE))
        .unwrap()
        .iter()
        .map(|e| (e.step, e.loss))
        .collect()
}

#[test]
fn two_towers_learn_the_builtin_data() {
    let data = data();
    let dir = tempfile::tempdir().unwrap();
    let c = TrainConfig {
        log_every: 25,
        checkpoint_every: 50,
        ..config(dir.path(), "flex,flex", 150)
    };
    let trained = train(c, &data).unwrap();
    let report = &trained.report;
    assert_eq!(
        (report.first_step, report.step, report.interrupted),
        (0, 150, false)
    );
    assert!(
        report
            .checkpoint
            .as_ref()
            .unwrap()
            .ends_with("model.ckpt-150")
    );
    assert!(report.plot.is_file() && report.log.is_file());

    let test = Input::cifar10_test(data.dir()).unwrap();
    let raw = evaluate(&trained.model, &test, 100, 2).unwrap();
    let averaged = evaluate(trained.averages.as_ref().unwrap(), &test, 64, 2).unwrap();
    assert_eq!(
        (raw.examples, averaged.examples),
        (500, 500),
        "every test image once"
    );
    assert_eq!(raw.correct_at_5, None, "no top-5 for 10 classes");
    // Chance is 0.1.
    assert!(raw.at_1() > 0.5, "raw weights: {raw}");
    assert!(averaged.at_1() > 0.5, "moving averages: {averaged}");
    let log = losses(dir.path());
    let steps: Vec<u64> = log.iter().map(|e| e.0).collect();
    assert_eq!(steps, [25, 50, 75, 100, 125, 150]);
    assert!(log[5].1 < log[0].1, "loss fell: {log:?}");
}

#[test]
fn a_nan_loss_stops_the_run_at_its_step() {
    let data = data();
    let dir = tempfile::tempdir().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    // Two towers call the loss twice per step: steps 1 to 3 are clean, step 4 is NaN.
    let poisoned = move |m: &Cifar10Net, x, y| {
        let loss = m.loss(x, y).loss;
        match counter.fetch_add(1, Ordering::SeqCst) {
            n if n >= 6 => TowerLoss::new(loss.mul_scalar(f32::NAN)),
            _ => TowerLoss::new(loss),
        }
    };
    let c = TrainConfig {
        checkpoint_every: 2,
        ..config(dir.path(), "flex,flex", 10)
    };
    let err = Trainer::new(c)
        .with_loss(poisoned)
        .run(net, &Input::cifar10_train(data.dir()).unwrap())
        .unwrap_err();
    assert!(matches!(err, Error::Diverged { step: 4, .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("step 4") && msg.contains("NaN") && msg.contains("model.ckpt-2"),
        "{msg}"
    );
    let ckpts: Vec<u64> = towers_train::CheckpointDir::new(dir.path(), 5)
        .list()
        .unwrap()
        .iter()
        .map(|c| c.0)
        .collect();
    assert_eq!(ckpts, [2], "nothing saved after the divergence");
    assert_eq!(calls.load(Ordering::SeqCst), 8, "no step after the NaN");
}

/// 3 steps, then a resumed run to 5, against 5 steps in one go: the resumed steps have the
/// same losses, and the runs end with the same weights and averages.
#[test]
fn a_resumed_run_continues_like_an_uninterrupted_one() {
    let data = data();
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let whole = train(config(a.path(), "flex", 5), &data).unwrap();
    let first = train(config(b.path(), "flex", 3), &data).unwrap();
    assert_eq!(first.report.step, 3);
    let err = train(config(b.path(), "flex", 5), &data).unwrap_err();
    assert!(err.to_string().contains("--resume"), "{err}");
    let resumed = train(
        TrainConfig {
            resume: true,
            ..config(b.path(), "flex", 5)
        },
        &data,
    )
    .unwrap();
    assert_eq!((resumed.report.first_step, resumed.report.step), (3, 5));
    let (whole_log, resumed_log) = (losses(a.path()), losses(b.path()));
    assert_eq!(whole_log.len(), 5);
    assert_eq!(
        resumed_log, whole_log,
        "step for step, resumed steps included"
    );

    let weights = |m: &Cifar10Net| -> Vec<f32> {
        let mut v: Vec<f32> = m.local3.weight.val().into_data().try_to_vec().unwrap();
        v.extend(
            m.conv1
                .weight
                .val()
                .into_data()
                .try_to_vec::<f32>()
                .unwrap(),
        );
        v
    };
    assert_eq!(weights(&resumed.model), weights(&whole.model));
    assert_eq!(
        weights(resumed.averages.as_ref().unwrap()),
        weights(whole.averages.as_ref().unwrap())
    );
}

#[test]
fn one_tower_and_two_log_the_same_losses() {
    let data = data();
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    train(config(a.path(), "flex", 4), &data).unwrap();
    let two = TrainConfig {
        reader_threads: Some(3),
        ..config(b.path(), "flex,flex", 4)
    };
    train(two, &data).unwrap();
    let (one, two) = (losses(a.path()), losses(b.path()));
    assert_eq!(one.len(), 4);
    for ((s1, l1), (s2, l2)) in one.iter().zip(&two) {
        assert_eq!(s1, s2);
        assert!(
            (l1 - l2).abs() <= 1e-6 * l1.abs(),
            "step {s1}: {l1} vs {l2}"
        );
    }
}
