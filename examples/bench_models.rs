//! Forward and forward+backward time per image of the CIFAR-10 net (batch 128) and
//! Inception v3 (batch 32, 299x299) on the default CPU backend (flex), or on the device
//! `TOWERS_BENCH_DEVICE` names.
//!
//! `cargo run --release --example bench_models [REPS]` (default 3 timed runs after a warm-up).
//! Forward is the evaluation forward (`valid()` model: no autodiff, batch norm on moving
//! averages); forward+backward is the training loss and its backward pass, without an
//! optimizer step.

mod bench_common;
use bench_common::{bench_device, reps};

use burn::tensor::{Device, Distribution, Int, Tensor, TensorData};
use std::time::Instant;
use towers_models::{Cifar10Config, ImageClassifier, InceptionV3Config};

fn main() {
    let reps = reps(3);
    let (entry, device) = bench_device();
    device.seed(0);
    let cifar = Cifar10Config::new().init(&device);
    let inception = InceptionV3Config::new(1001).init(&device);
    println!("{}\n\n{}\n", cifar.summary(), inception.summary());
    println!("device: {entry}, {reps} timed runs after one warm-up");
    println!(
        "{:<28} {:>6} {:>18} {:>26}",
        "model", "batch", "forward ms/image", "forward+backward ms/image"
    );
    bench("CIFAR-10 net, 24x24", cifar, 128, reps);
    bench("Inception v3, 299x299", inception, 32, reps);
}

fn bench<M: ImageClassifier>(name: &str, model: M, batch: usize, reps: usize) {
    let train_device = model.devices()[0].clone();
    let eval_device = train_device.clone().without_autodiff();
    let [c, h, w] = model.input_shape();
    let images = |device: &Device| {
        Tensor::<4>::random([batch, c, h, w], Distribution::Uniform(-1.0, 1.0), device)
    };
    let labels: Vec<i64> = (0..batch)
        .map(|i| (i % model.num_classes()) as i64)
        .collect();
    let labels = Tensor::<1, Int>::from_data(TensorData::new(labels, [batch]), &train_device);

    let eval = model.valid();
    let eval_images = images(&eval_device);
    let forward = time(reps, || {
        let logits = eval.forward(eval_images.clone());
        let _: Vec<f32> = logits.into_data().try_to_vec().unwrap();
    });

    let train_images = images(&train_device);
    let train = time(reps, || {
        let loss = model.loss(train_images.clone(), labels.clone()).loss;
        let _grads = loss.backward();
        train_device.sync().unwrap();
    });

    let per_image = |secs: f64| secs * 1e3 / batch as f64;
    println!(
        "{name:<28} {batch:>6} {:>18.2} {:>26.2}",
        per_image(forward),
        per_image(train)
    );
}

/// Mean seconds per call over `reps` calls, after one untimed warm-up call.
fn time(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let start = Instant::now();
    for _ in 0..reps {
        f();
    }
    start.elapsed().as_secs_f64() / reps as f64
}
