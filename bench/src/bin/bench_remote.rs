//! What Burn's remote backend costs the towers, measured on loopback in one run.
//!
//! `cargo run --release -p towers-bench --features remote --bin bench_remote [REPS]` (default 10 timed steps
//! per row).
//!
//! The TF CIFAR-10 net (1.07M parameters) at batch 128, momentum SGD, on flex:
//!
//! 1. Step time of 2 towers on 2 loopback remote devices (two `RemoteServer`s in this process,
//!    each serving flex) against 2 local towers (`flex,flex`), under both reductions. The
//!    parameters stay on the local flex device (TF's variables on `/cpu:0`); under the ring they
//!    live on the towers. Rows alternate step by step, in an order that rotates each round.
//! 2. Bytes on the wire per step: the same remote rows once more through a counting TCP relay
//!    in front of each server, against the size of one gradient (4 bytes a parameter).
//!
//! Client and servers share this machine's cores, so the ratio bounds the protocol's cost from
//! above: on separate machines the server's compute would not compete with the client's.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use towers_bench::loopback::{counting_relay, serve_flex};
use towers_bench::{cifar_batch, median, momentum_sgd, reps};

use burn::module::Module;
use burn::tensor::Device;
use towers_data::image_loss;
use towers_models::{Cifar10Config, Cifar10Net, ImageClassifier};
use towers_multigpu::{Reduce, Towers, TowersConfig, parse_devices};

fn main() -> anyhow::Result<()> {
    let reps = reps(10);
    let device = Device::flex().autodiff();
    device.seed(0);
    let lr = 0.01;

    let n = 128;
    let batch = cifar_batch(n, &device);
    let model = Cifar10Config::new().init(&device);
    let gradient_bytes = model.num_params() as u64 * 4;
    println!(
        "CIFAR-10 net: {} parameters ({:.2} MB of gradient), batch {n} of 3x24x24, flex, \
         median of {reps} steps",
        model.num_params(),
        gradient_bytes as f64 / 1e6
    );

    let servers = [serve_flex()?, serve_flex()?];
    let remote = format!("ws://{}/0,ws://{}/0", servers[0], servers[1]);
    let rows = [
        (
            "2 local towers, gather",
            "flex,flex",
            Reduce::ParameterDevice,
        ),
        (
            "2 remote towers, gather",
            remote.as_str(),
            Reduce::ParameterDevice,
        ),
        ("2 local towers, all-reduce", "flex,flex", Reduce::AllReduce),
        ("2 remote towers, ring", remote.as_str(), Reduce::AllReduce),
    ];
    let towers_for = |list: &str, reduce: Reduce| -> anyhow::Result<Towers<Cifar10Net>> {
        let config = TowersConfig::default().with_reduce(reduce);
        Ok(Towers::new(
            model.clone(),
            momentum_sgd(),
            &parse_devices(list)?,
            config,
        )?)
    };
    let mut towers: Vec<_> = rows
        .iter()
        .map(|(_, list, reduce)| towers_for(list, *reduce))
        .collect::<anyhow::Result<_>>()?;
    let loss = image_loss(|m: &Cifar10Net, x, y| m.loss(x, y).loss);

    let mut times = vec![Vec::new(); rows.len()];
    for rep in 0..reps + 2 {
        for row in (0..rows.len()).map(|r| (r + rep) % rows.len()) {
            let start = Instant::now();
            towers[row].step(&batch, lr, &loss)?;
            // The first two rounds warm up allocators, caches and the servers' sessions.
            if rep >= 2 {
                times[row].push(start.elapsed());
            }
        }
    }
    let medians: Vec<f64> = times.into_iter().map(median).collect();
    println!(
        "\n{:<26} {:>10} {:>10} {:>12}",
        "towers", "ms/step", "ex/s", "vs local"
    );
    for (i, (name, _, _)) in rows.iter().enumerate() {
        let local = medians[i - i % 2];
        println!(
            "{name:<26} {:>10.1} {:>10.0} {:>12.3}",
            medians[i] * 1e3,
            n as f64 / medians[i],
            medians[i] / local
        );
    }

    let bytes = Arc::new(AtomicU64::new(0));
    let relays = [
        counting_relay(servers[0].clone(), bytes.clone())?,
        counting_relay(servers[1].clone(), bytes.clone())?,
    ];
    // New sessions on the relays' ports: the same servers, but other devices to Burn's client.
    let relayed = format!("ws://{}/0,ws://{}/0", relays[0], relays[1]);
    println!(
        "\n{:<26} {:>12} {:>16}",
        "bytes on the wire", "MB/step", "x gradient size"
    );
    for (name, reduce) in [
        ("2 remote towers, gather", Reduce::ParameterDevice),
        ("2 remote towers, ring", Reduce::AllReduce),
    ] {
        let mut towers = towers_for(&relayed, reduce)?;
        for _ in 0..2 {
            towers.step(&batch, lr, &loss)?;
        }
        let before = bytes.load(Ordering::Relaxed);
        for _ in 0..reps {
            towers.step(&batch, lr, &loss)?;
        }
        let per_step = (bytes.load(Ordering::Relaxed) - before) / reps as u64;
        println!(
            "{name:<26} {:>12.2} {:>16.2}",
            per_step as f64 / 1e6,
            per_step as f64 / gradient_bytes as f64
        );
    }
    Ok(())
}
