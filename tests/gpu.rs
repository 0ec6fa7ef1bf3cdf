//! The CIFAR-10 trainer on a real GPU backend (`wgpu`, Mesa's lavapipe in CI, or the entry
//! `TOWERS_GPU_DEVICE` names): a run on the GPU and on `flex,GPU` follows the `flex` run of the
//! same seed, and a run checkpointed on `flex,GPU` resumes on the GPU alone where it left off.
//!
//! The weights come from the seed on the CPU whatever the devices, and the input pipeline is
//! deterministic, so the runs see the same weights and batches; they differ only by the GPU's
//! f32 rounding (see crates/multigpu/tests/wgpu.rs), which three steps at rate 0.01 keep under
//! 1e-4 of the loss.
//!
//! Run with `cargo test --features wgpu --test gpu`.
#![cfg(any(
    feature = "wgpu",
    feature = "vulkan",
    feature = "metal",
    feature = "cuda",
    feature = "rocm"
))]

use std::path::Path;

use burn::tensor::Device;
use burn_towers::data::cifar10::BuiltinCifar10;
use burn_towers::models::{Cifar10Config, Cifar10Net};
use burn_towers::train::{
    Input, LrScheduleConfig, OptimizerConfig, TrainConfig, Trainer, read_log,
};
use towers_testing::gpu::gpu_or_skip;

/// Relative difference allowed between the losses of a GPU run and the flex run.
const TOLERANCE: f64 = 1e-4;

fn config(train_dir: &Path, devices: &str, max_steps: u64) -> TrainConfig {
    TrainConfig {
        devices: devices.into(),
        batch_size: 16,
        reader_threads: Some(2),
        max_steps,
        optimizer: OptimizerConfig::Momentum {
            momentum: 0.9,
            nesterov: false,
        },
        learning_rate: LrScheduleConfig::Constant { value: 0.01 },
        checkpoint_every: 2,
        log_every: 1,
        train_dir: train_dir.to_path_buf(),
        seed: 5,
        ..TrainConfig::cifar10()
    }
}

fn net(device: &Device) -> Cifar10Net {
    Cifar10Config::new().init(device)
}

/// Trains as `config` says and returns the logged `(step, loss)` pairs of the whole directory.
fn train(config: TrainConfig, data: &BuiltinCifar10) -> Vec<(u64, f64)> {
    let dir = config.train_dir.clone();
    Trainer::new(config)
        .run(net, &Input::cifar10_train(data.dir()).unwrap())
        .unwrap();
    read_log(&dir.join(burn_towers::train::LOG_FILE))
        .unwrap()
        .iter()
        .map(|e| (e.step, e.loss))
        .collect()
}

fn assert_track(got: &[(u64, f64)], want: &[(u64, f64)], what: &str) {
    assert_eq!(
        got.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        want.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        "{what}: steps"
    );
    for ((step, g), (_, w)) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= TOLERANCE * w.abs(),
            "{what}: step {step} loss {g}, flex {w}"
        );
    }
}

#[test]
fn cifar10_trains_on_a_gpu_and_resumes_on_another_device_list() {
    let Some(gpu) = gpu_or_skip("cifar10_trains_on_a_gpu") else {
        return;
    };
    let data = BuiltinCifar10::create(64, 16, 3).unwrap();
    let dirs: Vec<_> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    let flex = train(config(dirs[0].path(), "flex", 3), &data);
    assert_eq!(flex.len(), 3);
    assert!(
        flex[0].1 > 2.0 && flex[0].1 < 2.6,
        "a fresh 10-class net: {flex:?}"
    );

    let alone = train(config(dirs[1].path(), &gpu.entry, 3), &data);
    assert_track(&alone, &flex, &gpu.entry);
    let mixed_list = gpu.list("flex,GPU");
    let mixed = train(config(dirs[2].path(), &mixed_list, 3), &data);
    assert_track(&mixed, &flex, &mixed_list);

    // Two steps on flex,GPU (a checkpoint at step 2), then resume on the GPU alone.
    let first = train(config(dirs[3].path(), &mixed_list, 2), &data);
    assert_track(&first, &flex[..2], "before the checkpoint");
    let resumed = TrainConfig {
        resume: true,
        ..config(dirs[3].path(), &gpu.entry, 3)
    };
    let all = train(resumed, &data);
    assert_track(&all, &flex, "resumed on the GPU alone");
}
