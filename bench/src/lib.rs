//! What the benchmarks (`src/bin/bench_*.rs`) share: their command line, their batches, their
//! optimizers and how they summarize timings; the nets, layer timing, loopback servers, input
//! stages, record indexing, torchvision's preprocessing and batch uploads that some of them
//! use; a step's kernel launches, host syncs and the fusion blocks behind its launches
//! (`step_counts`, `fusion_blocks`); and a test that counts a loss's kernel launches
//! (`penalty_launches`). Their figures, and the commands that reproduce them, are in
//! `bench/README.md`.

pub mod cifar_net;
#[cfg(all(feature = "gpu", feature = "fusion"))]
mod fusion_blocks;
pub mod input_stages;
pub mod layer_timing;
#[cfg(feature = "remote")]
pub mod loopback;
#[cfg(all(test, feature = "gpu"))]
mod penalty_launches;
pub mod record_index;
#[cfg(feature = "gpu")]
pub mod step_counts;
pub mod torchvision_eval;
pub mod upload;

use std::time::Duration;

// Links burn-towers, and so its global allocator, as the training examples do: the benchmarks
// measure what those run.
use burn_towers as _;

use burn::module::Module;
use burn::optim::ModuleOptimizer;
use burn::tensor::{Device, Distribution, Int, Tensor, TensorData};
use towers_data::HostBatch;
use towers_models::ImageClassifier;
use towers_train::OptimizerConfig;

/// The device list entry the benchmarks run on: `TOWERS_BENCH_DEVICE` (`cuda:0`, `wgpu`, ...),
/// else `flex`; and that device, with autodiff. Call it first in `main`: it also shows the
/// kernels CubeCL tunes on stderr as it decides them, as the trainer does (a cold GPU tunes
/// for minutes before a row's first step, and looked hung without them: bench_models on an
/// H200, 2026-12-04). Unfused builds tune nothing.
pub fn bench_device() -> (String, Device) {
    #[cfg(feature = "fusion")]
    towers_multigpu::tuning::show_tuning();
    let entry = std::env::var("TOWERS_BENCH_DEVICE").unwrap_or_else(|_| "flex".into());
    let towers = towers_multigpu::parse_devices(&entry).expect("TOWERS_BENCH_DEVICE");
    let device = towers[0].device().clone().autodiff();
    (entry, device)
}

/// The model `build` makes, with its weights drawn on flex (as the trainer draws them:
/// `towers_train::init_holding_generators`, then moved) and moved to `device`; on flex, built
/// there. Drawn on a GPU device, each truncated-normal weight is a loop of `any()` reductions
/// read back to the host: 21 reductions of u32 tuned before Inception v3's first step on a
/// cold lavapipe, 15 of its 250 s of tuning (bench/HISTORY.md, "Where Inception v3's cold
/// tuning goes"), and NVRTC compiled each candidate in about a second on an H200.
pub fn init_on<M: Module>(device: &Device, build: impl FnOnce(&Device) -> M) -> M {
    let host = weights_device();
    if *device == host {
        return build(device);
    }
    towers_train::init_holding_generators(|| build(&host)).fork(device)
}

/// Where [`init_on`] draws weights (flex, with autodiff): what a bench seeds to draw them alike.
pub fn weights_device() -> Device {
    Device::flex().autodiff()
}

/// Timed steps per row: the first argument, else `default`.
pub fn reps(default: usize) -> usize {
    std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("REPS must be a number"))
        .unwrap_or(default)
}

/// A row's batch: `TOWERS_BENCH_BATCH`, else the row's own `default`. The GPU bench's smoke run
/// (CI, on lavapipe) sets it small: there the script is checked, not the figures, and each
/// lavapipe step at the rows' batches (and its cold tuning) takes seconds.
pub fn batch(default: usize) -> usize {
    std::env::var("TOWERS_BENCH_BATCH").map_or(default, |s| {
        s.parse().expect("TOWERS_BENCH_BATCH must be a number")
    })
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

/// `n` random images of `model`'s input shape (uniform in [-1, 1], drawn on `device`), and
/// labels cycling over its classes: the batch `bench_models` and `bench_graph` train on.
pub fn classifier_batch<M: ImageClassifier>(
    model: &M,
    n: usize,
    device: &Device,
) -> (Tensor<4>, Tensor<1, Int>) {
    let [c, h, w] = model.input_shape();
    let images = Tensor::<4>::random([n, c, h, w], Distribution::Uniform(-1.0, 1.0), device);
    let labels: Vec<i64> = (0..n).map(|i| (i % model.num_classes()) as i64).collect();
    let labels = Tensor::<1, Int>::from_data(TensorData::new(labels, [n]), device);
    (images, labels)
}

/// Plain SGD as the trainer builds it for `model`: its weight decay's gradient added in each
/// decayed parameter's update (the loss holding the penalty's value only,
/// `ImageClassifier::loss_decay_in_update`).
pub fn trainers_sgd<M: ImageClassifier>(model: &M) -> ModuleOptimizer {
    OptimizerConfig::Sgd.init_with_weight_decays(&model.weight_decays_by_id())
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Cargo.toml builds the benchmarks without a test harness (`test = false`).
    #[test]
    fn the_benchmarks_hold_no_tests() {
        let bins = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bin");
        towers_testing::layers::assert_no_unit_tests(&bins);
    }
}
