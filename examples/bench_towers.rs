//! What the tower strategy costs, measured in one run on the default CPU backend (flex), or on
//! the device `TOWERS_BENCH_DEVICE` names (`TOWERS_BENCH_DEVICE=cuda:0`).
//!
//! `cargo run --release --example bench_towers [REPS]` (default 15 timed steps per row).
//!
//! 1. Step time of `Towers` against a plain Burn training step (forward, loss, backward,
//!    optimizer step, loss read back) on the same model and batch: a CIFAR-10-sized conv net
//!    (TF's, without LRN: 1.07M parameters), batch 128 of 24x24 images. The rows alternate step
//!    by step, in an order that rotates each round, so all see the same machine state. One tower on the model's device must cost
//!    nothing extra; the `flex,flex` rows run two towers on the same CPU, so they show the
//!    threading and reduction overhead rather than a speed-up.
//! 2. Reduction of an Inception-v3-sized gradient set (192 tensors, 24.0M floats) over 2 and 4
//!    replicas on flex, against copying the same 96 MB once (`copy_from_slice` into memory
//!    already touched: the memory-bandwidth floor).

use std::time::{Duration, Instant};

mod bench_common;
use bench_common::{bench_device, cifar_batch, median, momentum_sgd, reps};

use burn::module::{Module, Param};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::pool::{MaxPool2d, MaxPool2dConfig};
use burn::nn::{Linear, LinearConfig, PaddingConfig2d};
use burn::optim::GradientsParams;
use burn::tensor::activation::relu;
use burn::tensor::{Device, Distribution, Int, Tensor};
use towers_multigpu::{Reduce, Towers, TowersConfig, all_reduce, parse_devices, reduce_to_device};

/// TF's CIFAR-10 net without local response normalization.
#[derive(Module, Debug)]
struct CifarNet {
    conv1: Conv2d,
    conv2: Conv2d,
    pool: MaxPool2d,
    fc1: Linear,
    fc2: Linear,
    fc3: Linear,
}

impl CifarNet {
    fn new(device: &Device) -> Self {
        let conv = |c_in| {
            Conv2dConfig::new([c_in, 64], [5, 5])
                .with_padding(PaddingConfig2d::Same)
                .init(device)
        };
        Self {
            conv1: conv(3),
            conv2: conv(64),
            pool: MaxPool2dConfig::new([3, 3])
                .with_strides([2, 2])
                .with_padding(PaddingConfig2d::Same)
                .init(),
            fc1: LinearConfig::new(64 * 6 * 6, 384).init(device),
            fc2: LinearConfig::new(384, 192).init(device),
            fc3: LinearConfig::new(192, 10).init(device),
        }
    }

    fn loss(&self, x: Tensor<4>, y: Tensor<1, Int>) -> Tensor<1> {
        let x = self.pool.forward(relu(self.conv1.forward(x)));
        let x = self.pool.forward(relu(self.conv2.forward(x)));
        let x = relu(self.fc1.forward(x.flatten::<2>(1, 3)));
        let logits = self.fc3.forward(relu(self.fc2.forward(x)));
        CrossEntropyLossConfig::new()
            .init(&logits.device())
            .forward(logits, y)
    }
}

fn main() -> anyhow::Result<()> {
    let reps = reps(15);
    let (entry, device) = bench_device();
    device.seed(0);
    let lr = 0.01;

    let n = 128;
    let batch = cifar_batch(n, &device);

    let model = CifarNet::new(&device);
    println!(
        "CIFAR-10 net: {} parameters, batch {n} of 3x24x24, {entry}, median of {reps} steps",
        model.num_params()
    );

    // Plain Burn: what a trainer without towers does each step.
    let mut plain = Some((model.clone(), momentum_sgd()));
    let mut plain_step = || {
        let (mut m, mut optim) = plain.take().expect("model between steps");
        let (x, y) = batch.as_slice().to_tensors(&device);
        let loss = m.loss(x, y);
        let grads = GradientsParams::from_grads(loss.backward(), &m);
        let _: f32 = loss.into_scalar();
        m = optim.step(lr, m, grads);
        plain = Some((m, optim));
    };
    let pair = format!("{entry},{entry}");
    let configs = [
        (
            format!("1 tower ({entry})"),
            entry.clone(),
            Reduce::ParameterDevice,
        ),
        (
            format!("2 towers {pair}, gather"),
            pair.clone(),
            Reduce::ParameterDevice,
        ),
        (
            format!("2 towers {pair}, ring"),
            pair.clone(),
            Reduce::AllReduce,
        ),
    ];
    let mut towers: Vec<Towers<CifarNet>> = configs
        .iter()
        .map(|(_, list, reduce)| {
            let config = TowersConfig::default().with_reduce(*reduce);
            Towers::new(model.clone(), momentum_sgd(), &parse_devices(list)?, config)
        })
        .collect::<Result<_, _>>()?;

    // Row 0 is the plain step, row i + 1 is towers[i]. The order rotates every round, so that
    // no row always runs right after another (allocator and cache state carry over).
    let rows = configs.len() + 1;
    let mut times = vec![Vec::new(); rows];
    for rep in 0..reps + 2 {
        for row in (0..rows).map(|r| (r + rep) % rows) {
            let start = Instant::now();
            match row {
                0 => plain_step(),
                i => {
                    towers[i - 1].step(&batch, lr, |m: &CifarNet, x, y| m.loss(x, y))?;
                }
            }
            // The first two rounds warm up allocators and caches.
            if rep >= 2 {
                times[row].push(start.elapsed());
            }
        }
    }
    let mut times = times.into_iter();
    let plain_times = times.next().expect("the plain row");
    let tower_times: Vec<_> = times.collect();
    let plain = median(plain_times);
    println!("\n{:<28} {:>10} {:>16}", "step", "ms/step", "vs plain step");
    println!(
        "{:<28} {:>10.1} {:>16.3}",
        "plain Burn step",
        plain * 1e3,
        1.0
    );
    for ((name, _, _), times) in configs.iter().zip(tower_times) {
        let t = median(times);
        println!("{name:<28} {:>10.1} {:>16.3}", t * 1e3, t / plain);
    }

    reduce_bench(reps.min(7))
}

/// A module whose only purpose is to name 192 gradient tensors.
#[derive(Module, Debug)]
struct GradSet {
    params: Vec<Param<Tensor<2>>>,
}

fn reduce_bench(reps: usize) -> anyhow::Result<()> {
    let flex = Device::flex();
    let shapes: Vec<[usize; 2]> = (0..96).flat_map(|_| [[500, 500], [1, 320]]).collect();
    let floats: usize = shapes.iter().map(|[a, b]| a * b).sum();
    let names = GradSet {
        params: shapes
            .iter()
            .map(|s| Param::from_tensor(Tensor::zeros(*s, &flex.clone().autodiff())))
            .collect(),
    };
    let replica_grads = |replicas: usize| -> Vec<GradientsParams> {
        (0..replicas)
            .map(|_| {
                let mut grads = GradientsParams::new();
                for (p, s) in names.params.iter().zip(&shapes) {
                    grads.register(p.id, Tensor::<2>::random(*s, Distribution::Default, &flex));
                }
                grads
            })
            .collect()
    };

    let src = vec![1.0f32; floats];
    let mut dst = vec![0.0f32; floats];
    let copies: Vec<Duration> = (0..reps)
        .map(|_| {
            let start = Instant::now();
            dst.copy_from_slice(&src);
            start.elapsed()
        })
        .collect();
    let copy = median(copies);
    println!(
        "\nreduce of {} tensors, {:.1}M floats ({:.0} MB) per replica, flex, median of {reps}",
        shapes.len(),
        floats as f64 / 1e6,
        floats as f64 * 4.0 / 1e6
    );
    println!("{:<34} {:>10} {:>14}", "", "ms", "vs one copy");
    println!(
        "{:<34} {:>10.1} {:>14.2}",
        "copy 96 MB once (floor)",
        copy * 1e3,
        1.0
    );
    for replicas in [2, 4] {
        let base = replica_grads(replicas);
        let mut gather = Vec::new();
        let mut ring = Vec::new();
        for _ in 0..reps {
            // Handles to the same data each time: the sums cannot reuse an input in place.
            let sets = || base.iter().map(clone_grads(&names)).collect::<Vec<_>>();
            let inputs = sets();
            let start = Instant::now();
            let _sum = reduce_to_device(&names, inputs, &flex);
            flex.sync()?;
            gather.push(start.elapsed());

            let inputs = sets().into_iter().map(|g| (g, flex.clone())).collect();
            let start = Instant::now();
            let _sums = all_reduce(&names, inputs);
            flex.sync()?;
            ring.push(start.elapsed());
        }
        for (name, times) in [("gather to one device", gather), ("ring all-reduce", ring)] {
            let t = median(times);
            println!(
                "{:<34} {:>10.1} {:>14.2}",
                format!("{replicas} replicas, {name}"),
                t * 1e3,
                t / copy
            );
        }
    }
    Ok(())
}

/// A gradient set holding handles to the same tensors as `grads`.
fn clone_grads(names: &GradSet) -> impl Fn(&GradientsParams) -> GradientsParams + '_ {
    move |grads| {
        let mut out = GradientsParams::new();
        for p in &names.params {
            if let Some(g) = grads.get::<2>(p.id) {
                out.register(p.id, g);
            }
        }
        out
    }
}
