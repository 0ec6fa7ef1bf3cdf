//! Short CIFAR-10 training runs for end-to-end tests.

use std::path::Path;

use burn::tensor::Device;
use towers_models::{Cifar10Config, Cifar10Net};
use towers_train::{LrScheduleConfig, OptimizerConfig, TrainConfig};

/// A small, quick CIFAR-10 run on `devices`: batch 16, 2 readers, momentum 0.9 at 0.01 (no
/// decay), every step logged, a checkpoint every 2 steps, seed 7. Change fields with
/// `quick_cifar_config(..).with_..(..)`.
pub fn quick_cifar_config(train_dir: &Path, devices: &str, max_steps: u64) -> TrainConfig {
    TrainConfig::cifar10()
        .with_devices(devices.into())
        .with_batch_size(16)
        .with_reader_threads(Some(2))
        .with_max_steps(max_steps)
        .with_optimizer(OptimizerConfig::Momentum {
            momentum: 0.9,
            nesterov: false,
        })
        .with_learning_rate(LrScheduleConfig::Constant { value: 0.01 })
        .with_checkpoint_every(2)
        .with_log_every(1)
        .with_train_dir(train_dir.to_path_buf())
        .with_seed(7)
}

/// The TF CIFAR-10 tutorial net with its defaults.
pub fn cifar_net(device: &Device) -> Cifar10Net {
    Cifar10Config::new().init(device)
}
