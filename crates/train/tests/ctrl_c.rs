//! Ctrl-C, as a real SIGINT to this process, stops a run after a checkpoint with every
//! pipeline and tower thread joined. Alone in its file: the signal and the thread list belong
//! to the whole test process.

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use burn::tensor::{Device, Tensor};
use towers_data::cifar10::BuiltinCifar10;
use towers_models::{Cifar10Config, Cifar10Net, ImageClassifier};
use towers_multigpu::TowerLoss;
use towers_train::{Checkpoint, Input, StopFlag, TrainConfig, Trainer, init_holding_generators};

/// The names of this process's threads.
fn threads() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.unwrap().path().join("comm")).ok())
        .map(|name| name.trim().to_string())
        .collect()
}

#[test]
fn ctrl_c_stops_after_a_checkpoint_and_joins_every_thread() {
    // A thread inherits its creator's name on Linux. Start Burn's CPU worker pool here, so that
    // its threads carry this test's name rather than that of the tower that would start it.
    // Draws on flex's generator beside the other tests' runs (see `lock_device_generators`).
    let warm_up = init_holding_generators(|| Cifar10Config::new().init(&Device::flex()));
    let _ = warm_up.forward(Tensor::zeros([64, 3, 24, 24], &Device::flex()));
    let data = BuiltinCifar10::create(100, 10, 3).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let stop = StopFlag::ctrl_c().unwrap();
    let calls = AtomicUsize::new(0);
    // Two towers: the third call is step 2's first tower.
    let interrupt_in_step_2 = move |m: &Cifar10Net, x, y| {
        if calls.fetch_add(1, Ordering::SeqCst) == 2 {
            let pid = std::process::id().to_string();
            let status = Command::new("kill").args(["-INT", &pid]).status().unwrap();
            assert!(status.success());
        }
        TowerLoss::new(m.loss(x, y).loss)
    };
    let mut config = TrainConfig::cifar10();
    config.devices = "flex,flex".into();
    config.batch_size = 16;
    config.reader_threads = Some(2);
    config.max_steps = 1000;
    config.checkpoint_every = 500;
    config.train_dir = dir.path().to_path_buf();
    let trained = Trainer::new(config)
        .with_stop(stop.clone())
        .with_loss(interrupt_in_step_2)
        .run(
            |d| Cifar10Config::new().init(d),
            &Input::cifar10_train(data.dir()).unwrap(),
        )
        .unwrap();
    let report = trained.report;
    assert!(stop.is_requested() && report.interrupted);
    // The handler runs on its own thread: the flag is up by the end of step 2, or soon after.
    assert!(
        (2..10).contains(&report.step),
        "stopped at step {}",
        report.step
    );
    let path = report.checkpoint.unwrap();
    assert!(path.ends_with(format!("model.ckpt-{}", report.step)));
    assert_eq!(Checkpoint::load(&path).unwrap().step, report.step);
    assert!(report.plot.is_file());
    let left: Vec<String> = threads()
        .into_iter()
        .filter(|t| {
            ["reader-", "batcher-", "tower-"]
                .iter()
                .any(|p| t.starts_with(p))
        })
        .collect();
    assert!(left.is_empty(), "threads still running: {left:?}");
}
