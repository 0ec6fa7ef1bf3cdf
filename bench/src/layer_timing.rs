//! Timing one layer, or formulations of one computation, forward and forward+backward: what
//! `bench_step` measures.

use std::time::Instant;

use burn::tensor::{Device, Distribution, Tensor};

use crate::median;

/// A layer under test: its input's shape, whether the gradient reaches its input, and the sum
/// of its output.
pub struct Layer<'a> {
    /// The row's name in the tables.
    pub name: &'static str,
    input: [usize; 4],
    input_grad: bool,
    run: Box<dyn Fn(Tensor<4>) -> Tensor<1> + 'a>,
}

impl<'a> Layer<'a> {
    /// The layer `run` (from its input to the sum of its output), timed on random inputs of
    /// shape `input`; `input_grad`: whether backward computes the gradient of its input too.
    pub fn new(
        name: &'static str,
        input: [usize; 4],
        input_grad: bool,
        run: impl Fn(Tensor<4>) -> Tensor<1> + 'a,
    ) -> Self {
        Self {
            name,
            input,
            input_grad,
            run: Box::new(run),
        }
    }
}

/// Times each layer alone and prints a table with their sum; returns each layer's forward and
/// forward+backward medians, in ms.
pub fn layer_table(layers: Vec<Layer>, reps: usize, device: &Device) -> Vec<[f64; 2]> {
    let header = ["layer", "forward", "backward", "fwd+bwd"];
    println!(
        "{:<40} {:>8} {:>9} {:>8}",
        header[0], header[1], header[2], header[3]
    );
    let mut times = Vec::new();
    for layer in layers {
        let [fwd, both] = time_layer(&layer, reps, device);
        row(layer.name, fwd, both);
        times.push([fwd, both]);
    }
    let total = |i: usize| times.iter().map(|t: &[f64; 2]| t[i]).sum::<f64>();
    row("sum of layers", total(0), total(1));
    times
}

/// Times formulations of one computation call by call in turn and prints a row each.
pub fn alternatives_rows(group: &[Layer], reps: usize, device: &Device) {
    for (layer, [fwd, both]) in group.iter().zip(time_alternating(group, reps, device)) {
        row(layer.name, fwd, both);
    }
}

/// Prints a row: forward, backward (the difference) and forward+backward, in ms.
fn row(name: &str, fwd: f64, both: f64) {
    println!("{name:<40} {fwd:>8.2} {:>9.2} {both:>8.2}", both - fwd);
}

/// Forward and forward+backward medians of one layer, in ms.
fn time_layer(layer: &Layer, reps: usize, device: &Device) -> [f64; 2] {
    time_alternating(std::slice::from_ref(layer), reps, device)[0]
}

/// Forward and forward+backward medians of layers of one input shape, called in turn, in ms.
fn time_alternating(layers: &[Layer], reps: usize, device: &Device) -> Vec<[f64; 2]> {
    let mut x = Tensor::<4>::random(layers[0].input, Distribution::Uniform(-1.0, 1.0), device);
    if layers[0].input_grad {
        x = x.require_grad();
    }
    let mut times = vec![[Vec::new(), Vec::new()]; layers.len()];
    for rep in 0..reps + 1 {
        for (layer, times) in layers.iter().zip(&mut times) {
            let start = Instant::now();
            let _: f32 = (layer.run)(x.clone()).into_scalar();
            let fwd = start.elapsed();
            let start = Instant::now();
            let _grads = (layer.run)(x.clone()).backward();
            device.sync().unwrap();
            if rep > 0 {
                times[0].push(fwd);
                times[1].push(start.elapsed());
            }
        }
    }
    times
        .into_iter()
        .map(|[f, b]| [median(f) * 1e3, median(b) * 1e3])
        .collect()
}
