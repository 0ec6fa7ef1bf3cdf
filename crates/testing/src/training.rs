//! Short CIFAR-10 training runs for end-to-end tests.

use std::path::Path;

use burn::tensor::Device;
use towers_models::{Cifar10Config, Cifar10Net};
use towers_train::{LrScheduleConfig, OptimizerConfig, TrainConfig};

/// A small, quick CIFAR-10 run on `devices`: batch 16, 2 readers, momentum 0.9 at 0.01 (no
/// decay), every step logged, a checkpoint every 2 steps, seed 7. Change fields with
/// `TrainConfig { .., ..quick_cifar_config(..) }`.
pub fn quick_cifar_config(train_dir: &Path, devices: &str, max_steps: u64) -> TrainConfig {
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
        seed: 7,
        ..TrainConfig::cifar10()
    }
}

/// The TF CIFAR-10 tutorial net with its defaults.
pub fn cifar_net(device: &Device) -> Cifar10Net {
    Cifar10Config::new().init(device)
}
