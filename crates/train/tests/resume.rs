//! Resuming training from a checkpoint's input position, against the uninterrupted run computed
//! in the same test: bitwise the same per-step losses, dropout included, on one tower and on
//! two; a checkpoint without a position is refused, naming its step. Dropout masks follow the
//! examples, so one tower and two log the same losses. With f16 products the checkpoint keeps
//! the loss scale, so the resumed run skips and scales exactly the steps the uninterrupted one
//! does.

use std::path::Path;

use towers_data::cifar10::BuiltinCifar10;
use towers_kernels::Precision;
use towers_models::{Cifar10Net, ImageClassifier};
use towers_multigpu::TowerLoss;
use towers_testing::nets::DropoutNet;
use towers_testing::training::{cifar_net, quick_cifar_config};
use towers_train::{Checkpoint, Input, StopFlag, TrainConfig, Trainer, read_log};

/// Batch 16, one reader, every step logged, a checkpoint every 3 steps.
fn config(train_dir: &Path, devices: &str, max_steps: u64) -> TrainConfig {
    quick_cifar_config(train_dir, devices, max_steps)
        .with_reader_threads(Some(1))
        .with_checkpoint_every(3)
}

/// Trains the dropout net; returns the logged `(step, loss)`s of the whole train directory.
fn train(config: TrainConfig, data: &BuiltinCifar10) -> Vec<(u64, f64)> {
    let dir = config.train_dir.clone();
    Trainer::new(config)
        .run(DropoutNet::new, &Input::cifar10_train(data.dir()).unwrap())
        .unwrap();
    read_log(&dir.join(towers_train::LOG_FILE))
        .unwrap()
        .iter()
        .map(|e| (e.step, e.loss))
        .collect()
}

/// A run asked to stop before its first step (a Ctrl-C while it counted its input) trains
/// nothing and writes no checkpoint of step 0, which would make the next run ask for
/// `--resume`: the same command then trains.
#[test]
fn a_run_stopped_before_its_first_step_leaves_no_checkpoint() {
    let data = BuiltinCifar10::create(40, 1, 2).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let stop = StopFlag::new();
    stop.request();
    let input = Input::cifar10_train(data.dir()).unwrap();
    let trained = Trainer::new(config(dir.path(), "flex", 2))
        .with_stop(stop)
        .run(DropoutNet::new, &input)
        .unwrap();
    assert!(trained.report.interrupted);
    assert_eq!((trained.report.step, trained.report.checkpoint), (0, None));
    assert!(!dir.path().join("model.ckpt-0").exists());
    assert_eq!(train(config(dir.path(), "flex", 2), &data).len(), 2);
}

/// Resumed runs take the input from the checkpoint's position (a run that started its input
/// afresh would see other batches).
fn resumed(train_dir: &Path, devices: &str, max_steps: u64) -> TrainConfig {
    config(train_dir, devices, max_steps).with_resume(true)
}

/// Stopped at step 3, resumed to 5, stopped, resumed to 8: the losses of every step equal the
/// uninterrupted run's bit for bit, on one tower and on two (with dropout, whose masks two
/// towers on one backend would otherwise draw in thread order).
#[test]
fn resumed_runs_log_the_losses_of_the_uninterrupted_run() {
    let data = BuiltinCifar10::create(40, 1, 2).unwrap();
    for devices in ["flex", "flex,flex"] {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let whole = train(config(a.path(), devices, 8), &data);
        assert_eq!(whole.len(), 8);
        train(config(b.path(), devices, 3), &data);
        let ckpt = Checkpoint::load(&b.path().join("model.ckpt-3")).unwrap();
        assert!(
            ckpt.input.is_some(),
            "the checkpoint holds the input position"
        );
        train(resumed(b.path(), devices, 5), &data);
        let stopped_twice = train(resumed(b.path(), devices, 8), &data);
        assert_eq!(stopped_twice, whole, "{devices}");
    }
}

/// f16 products on the CIFAR-10 net (whose layers follow the precision), its loss times
/// [`F16_LOSS_FACTOR`] so that the gradients overflow f16 at the initial scale of 65,536: the
/// first steps skip their updates and halve the scale, so the checkpoint at step 3 holds
/// another scale. Stopped there and resumed to 6, the run logs the uninterrupted run's losses
/// bit for bit. (Resumed at the initial scale instead, its step 4 overflows again and skips an
/// update the uninterrupted run applied: checked by breaking the restore, which fails this.)
#[test]
fn an_f16_run_resumed_keeps_its_loss_scale_and_its_losses() {
    let data = BuiltinCifar10::create(40, 1, 2).unwrap();
    let f16 = |dir: &Path, max_steps, resume| {
        config(dir, "flex", max_steps)
            .with_precision(Precision::F16)
            .with_resume(resume)
    };
    let train_cifar = |config: TrainConfig| {
        let dir = config.train_dir.clone();
        let loss = |m: &Cifar10Net, x, y| TowerLoss::new(m.loss(x, y).loss * F16_LOSS_FACTOR);
        Trainer::new(config)
            .with_loss(loss)
            .run(cifar_net, &Input::cifar10_train(data.dir()).unwrap())
            .unwrap();
        let log = read_log(&dir.join(towers_train::LOG_FILE)).unwrap();
        log.iter().map(|e| (e.step, e.loss)).collect::<Vec<_>>()
    };
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let whole = train_cifar(f16(a.path(), 6, false));
    train_cifar(f16(b.path(), 3, false));
    let scale = Checkpoint::load(&b.path().join("model.ckpt-3"))
        .unwrap()
        .loss_scale
        .expect("an f16 run's checkpoint keeps its loss scale");
    assert!(
        scale.scale < 65536.0,
        "no overflow before step 3 (scale {scale:?}): this test would not tell a restored \
         scale from the initial one"
    );
    let resumed = train_cifar(f16(b.path(), 6, true));
    let log = std::fs::read_to_string(a.path().join(towers_train::LOG_FILE)).unwrap();
    assert_eq!(
        resumed, whole,
        "scale at step 3: {scale:?}; the whole run: {log}"
    );
}

/// What the f16 test multiplies its loss by: its gradients then overflow f16 at a scale of
/// 65,536 and fit at a few halvings below.
const F16_LOSS_FACTOR: f32 = 30.0;

/// A checkpoint without an input position (another tool's) cannot resume the input: the
/// error names its step, and nothing trains.
#[test]
fn a_checkpoint_without_a_position_is_refused() {
    let data = BuiltinCifar10::create(40, 1, 2).unwrap();
    let dir = tempfile::tempdir().unwrap();
    train(config(dir.path(), "flex", 3), &data);
    let path = dir.path().join("model.ckpt-3");
    let ckpt = Checkpoint::load(&path).unwrap();
    Checkpoint {
        input: None,
        ..ckpt
    }
    .save(&path)
    .unwrap();
    let error = Trainer::new(resumed(dir.path(), "flex", 5))
        .run(DropoutNet::new, &Input::cifar10_train(data.dir()).unwrap())
        .unwrap_err()
        .to_string();
    let says = "the checkpoint of step 3 holds no input position";
    assert!(error.contains(says), "{error}");
}

/// Dropout masks follow the examples, not the towers: one tower and two (parts of 8 + 8, or
/// 4 + 12) log the same losses, to float rounding (the towers sum their gradients in another
/// order).
#[test]
fn one_and_two_towers_draw_the_same_dropout_masks() {
    let data = BuiltinCifar10::create(40, 1, 2).unwrap();
    let run = |devices: &str| {
        let dir = tempfile::tempdir().unwrap();
        train(config(dir.path(), devices, 6), &data)
    };
    let one = run("flex");
    for devices in ["flex,flex", "flex*1,flex*3"] {
        let got = run(devices);
        assert_eq!(got.len(), one.len());
        for ((step, want), (got_step, got)) in one.iter().zip(&got) {
            assert_eq!(step, got_step);
            let close = (want - got).abs() <= 1e-5 * want.abs().max(1.0);
            assert!(
                close,
                "{devices}, step {step}: loss {got} vs one tower's {want}"
            );
        }
    }
}
