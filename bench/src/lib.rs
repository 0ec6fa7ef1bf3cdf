//! What the benchmarks (`src/bin/bench_*.rs`) share: their command line, their batch, their
//! optimizer and how they summarize timings; the nets, layer timing, loopback servers, input
//! stages and batch uploads that some of them use. Their figures, and the commands that
//! reproduce them, are in `bench/README.md`.

pub mod cifar_net;
pub mod input_stages;
pub mod layer_timing;
#[cfg(feature = "remote")]
pub mod loopback;
#[cfg(feature = "gpu")]
pub mod step_counts;
pub mod upload;

use std::time::Duration;

// Links burn-towers, and so its global allocator, as the training examples do: the benchmarks
// measure what those run.
use burn_towers as _;

use burn::optim::ModuleOptimizer;
use burn::tensor::{Device, Distribution, Tensor};
use towers_data::HostBatch;
use towers_train::OptimizerConfig;

/// The device list entry the benchmarks run on: `TOWERS_BENCH_DEVICE` (`cuda:0`, `wgpu`, ...),
/// else `flex`; and that device, with autodiff.
pub fn bench_device() -> (String, Device) {
    let entry = std::env::var("TOWERS_BENCH_DEVICE").unwrap_or_else(|_| "flex".into());
    let towers = towers_multigpu::parse_devices(&entry).expect("TOWERS_BENCH_DEVICE");
    let device = towers[0].device().clone().autodiff();
    (entry, device)
}

/// Timed steps per row: the first argument, else `default`.
pub fn reps(default: usize) -> usize {
    std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("REPS must be a number"))
        .unwrap_or(default)
}

/// `n` random CIFAR-sized images (3x24x24, uniform in [-1, 1], drawn on `device`) with labels
/// cycling over 10 classes.
pub fn cifar_batch(n: usize, device: &Device) -> HostBatch {
    let images: Vec<f32> =
        Tensor::<1>::random([n * 3 * 24 * 24], Distribution::Uniform(-1.0, 1.0), device)
            .into_data()
            .try_to_vec()
            .expect("f32 images");
    let labels = (0..n).map(|i| (i % 10) as i64).collect();
    HostBatch::new(images, labels, [3, 24, 24])
}

/// TF/PyTorch momentum SGD (0.9, no dampening), as the trainer builds it.
pub fn momentum_sgd() -> ModuleOptimizer {
    OptimizerConfig::Momentum {
        momentum: 0.9,
        nesterov: false,
    }
    .init()
}

/// The median, in seconds.
pub fn median(mut times: Vec<Duration>) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64()
}
