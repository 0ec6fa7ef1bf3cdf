//! A model written with Burn's layers against the same model with `towers_kernels::nn`'s
//! drop-in layers: examples/own_model.rs's net (two 3x3 convolutions, adaptive pooling, two
//! dense layers, batch 128 of 12x12 images), train step (forward, cross-entropy, backward, SGD),
//! on flex or the device `TOWERS_BENCH_DEVICE` names.
//!
//! `cargo run --release -p towers-bench --bin bench_layers [REPS]` (default 10 timed steps per
//! version after 3 untimed ones, the two versions alternating step by step).

use std::time::Instant;

use burn::module::Module;
use burn::optim::{GradientsParams, ModuleOptimizer, SgdConfig};
use burn::tensor::{Distribution, Int, Tensor, TensorData};
use towers_bench::{bench_device, reps};

/// The net with Burn's layers.
mod burn_layers {
    use burn::module::Module;
    use burn::nn;
    use burn::tensor::{Device, Int, Tensor};
    include!("../own_model_net.rs");
}

/// The same net with the drop-in layers.
mod drop_in_layers {
    use burn::module::Module;
    use burn::tensor::{Device, Int, Tensor};
    use towers_kernels::nn;
    include!("../own_model_net.rs");
}

/// Untimed steps before the timed ones, each version.
const WARM_UP: usize = 3;

/// One model in training: the model (taken and put back by each step) and its optimizer.
struct Training<M> {
    model: Option<M>,
    optim: ModuleOptimizer,
    seconds: f64,
}

impl<M: Module> Training<M> {
    fn new(model: M) -> Self {
        let optim = SgdConfig::new().init();
        Self {
            model: Some(model),
            optim,
            seconds: 0.0,
        }
    }

    /// One SGD step on `loss`, its time added to `seconds` when `timed`.
    fn step(&mut self, timed: bool, loss: impl Fn(&M) -> Tensor<1>) {
        let start = Instant::now();
        let model = self.model.take().expect("put back by every step");
        let loss = loss(&model);
        let device = loss.device();
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        self.model = Some(self.optim.step(0.01, model, grads));
        device.sync().expect("the device finishes the step");
        if timed {
            self.seconds += start.elapsed().as_secs_f64();
        }
    }
}

fn main() {
    let reps = reps(10);
    let (entry, device) = bench_device();
    let batch = 128;
    device.seed(0);
    let images = Tensor::<4>::random(
        [batch, 1, 12, 12],
        Distribution::Uniform(-1.0, 1.0),
        &device,
    );
    let labels: Vec<i64> = (0..batch as i64).map(|i| i % 4).collect();
    let labels = Tensor::<1, Int>::from_data(TensorData::new(labels, [batch]), &device);
    println!(
        "device: {entry}; examples/own_model.rs's net, batch {batch}, {reps} timed steps after \
         {WARM_UP}, alternating"
    );
    let mut burns = Training::new(burn_layers::Model::new(&device));
    let mut ours = Training::new(drop_in_layers::Model::new(&device));
    for rep in 0..WARM_UP + reps {
        let timed = rep >= WARM_UP;
        burns.step(timed, |model| model.loss(images.clone(), labels.clone()));
        ours.step(timed, |model| model.loss(images.clone(), labels.clone()));
    }
    let per_step = |seconds: f64| seconds * 1e3 / reps as f64;
    let (burn_ms, our_ms) = (per_step(burns.seconds), per_step(ours.seconds));
    println!("own_model net, Burn's layers:       {burn_ms:8.2} ms/step");
    println!("own_model net, towers_kernels::nn:  {our_ms:8.2} ms/step");
    println!(
        "own_model net: drop-in layers {:.2}x Burn's",
        burn_ms / our_ms
    );
}
