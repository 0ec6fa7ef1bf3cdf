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
//! 2. The reduction alone, with `bench_reduce`.

use std::time::Instant;

mod bench_common;
use bench_common::cifar_net::CifarNet;
use bench_common::{bench_device, cifar_batch, median, momentum_sgd, reps};

use burn::module::Module;
use burn::optim::GradientsParams;
use towers_multigpu::{Reduce, Towers, TowersConfig, parse_devices};

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

    Ok(())
}
