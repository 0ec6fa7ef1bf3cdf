//! One optimizer update of all of Inception v3's parameters (27.2 M values in 388 tensors,
//! TF-slim's layout with the aux head), by Burn's optimizers (Burn's elementwise ops) and by ours
//! (one fused pass on rayon's threads), on flex.
//!
//! `cargo run --release -p towers-bench --bin bench_optimizers [REPS]` (default 10 timed
//! updates after one that creates the state; medians, alternating Burn's and ours). The update
//! is what `Optimizer::step` does for each parameter, as a training step calls it.

use std::time::Instant;

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::momentum::MomentumConfig;
use burn::optim::{AdamConfig, Optimizer, SgdConfig};
use burn::tensor::{Device, Distribution, Tensor};
use towers_bench::reps;
use towers_models::InceptionV3Config;
use towers_train::{FusedAdam, FusedSgd};

fn main() {
    let reps = reps(10);
    let device = Device::flex();
    let params = parameters(&device);
    let values: usize = params.iter().map(|p| p.shape().num_elements()).sum();
    let grads: Vec<Tensor<1>> = params
        .iter()
        .map(|p| Tensor::random(p.shape(), Distribution::Uniform(-1.0, 1.0), &device))
        .collect();
    println!(
        "Inception v3's {} parameters ({values} values), flex, median of {reps} updates, ms",
        params.len(),
    );
    println!(
        "{:<34} {:>12} {:>12} {:>8}",
        "update", "Burn's", "fused", "ratio"
    );
    let config = MomentumConfig::new().with_momentum(0.9).with_dampening(0.0);
    let sgd = (SgdConfig::new().build(), FusedSgd::plain());
    row("SGD", compare(&sgd.0, &sgd.1, &params, &grads, reps));
    let momentum = (
        SgdConfig::new().with_momentum(Some(config)).build(),
        FusedSgd::with_momentum(0.9, 0.0, false),
    );
    let times = compare(&momentum.0, &momentum.1, &params, &grads, reps);
    row("SGD with momentum 0.9", times);
    let adam = (
        AdamConfig::new().with_epsilon(1e-8).build(),
        FusedAdam::new(0.9, 0.999, 1e-8),
    );
    row("Adam", compare(&adam.0, &adam.1, &params, &grads, reps));
}

/// A row of the table: Burn's time, ours and their ratio.
fn row(name: &str, [burn, fused]: [f64; 2]) {
    println!(
        "{name:<34} {burn:>12.2} {fused:>12.2} {:>7.2}x",
        burn / fused
    );
}

/// Inception v3's parameters (with the batch norms' moving averages, a few thousand values),
/// each flattened.
fn parameters(device: &Device) -> Vec<Tensor<1>> {
    struct Collect(Vec<Tensor<1>>);
    impl ModuleVisitor for Collect {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            self.0.push(param.val().flatten(0, D - 1));
        }
    }
    let mut collect = Collect(Vec::new());
    InceptionV3Config::new(1001)
        .init(device)
        .visit(&mut collect);
    collect.0
}

/// Median milliseconds of one update of every parameter by `burn` and by `ours`, in turn.
fn compare<A: Optimizer, B: Optimizer>(
    burn: &A,
    ours: &B,
    params: &[Tensor<1>],
    grads: &[Tensor<1>],
    reps: usize,
) -> [f64; 2] {
    let (mut a, mut b) = (Updates::new(burn, params), Updates::new(ours, params));
    let (mut times_a, mut times_b) = (Vec::new(), Vec::new());
    for rep in 0..=reps {
        let (ta, tb) = (a.step(grads), b.step(grads));
        if rep > 0 {
            times_a.push(ta);
            times_b.push(tb);
        }
    }
    [times_a, times_b].map(|mut t| {
        t.sort_by(f64::total_cmp);
        t[t.len() / 2]
    })
}

/// An optimizer's parameters and state, stepped together.
struct Updates<'a, O: Optimizer> {
    optim: &'a O,
    params: Vec<Tensor<1>>,
    states: Vec<Option<O::State<1>>>,
}

impl<'a, O: Optimizer> Updates<'a, O> {
    fn new(optim: &'a O, params: &[Tensor<1>]) -> Self {
        Self {
            optim,
            params: params.iter().map(|p| p.clone().mul_scalar(1.0)).collect(),
            states: params.iter().map(|_| None).collect(),
        }
    }

    /// One update of every parameter on `grads`, in milliseconds (the last value read back, so
    /// that nothing is left pending).
    fn step(&mut self, grads: &[Tensor<1>]) -> f64 {
        let start = Instant::now();
        // Each parameter moved into the step, as a module hands its own over.
        let params = std::mem::take(&mut self.params).into_iter();
        for ((param, state), grad) in params.zip(&mut self.states).zip(grads) {
            let (updated, next) = self.optim.step(1e-3, param, grad.clone(), state.take());
            self.params.push(updated);
            *state = next;
        }
        let _ = self.params.last().map(|p| p.to_data());
        start.elapsed().as_secs_f64() * 1e3
    }
}
