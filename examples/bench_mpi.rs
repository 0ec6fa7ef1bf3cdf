//! What exchanging gradients across MPI ranks costs, measured on the ranks themselves.
//!
//! `mpirun --mca btl tcp,self --mca btl_tcp_if_include lo -np 2 target/release/examples/bench_mpi [REPS]`
//! (with `--features mpi`; as root add `--allow-run-as-root`; on fewer cores than ranks add
//! `--oversubscribe`). Rank 0 prints; REPS (default 5) timed exchanges or steps per row;
//! `-x TOWERS_BUCKET_MB=N` sets the bucket size (default 25 MB).
//!
//! - The gradient exchange of the TF CIFAR-10 net and of Inception v3 (their trainable
//!   parameters, as flat tensors on flex): time per exchange against copying the same bytes
//!   once in memory, and the bytes on the wire per rank per exchange as a multiple of the
//!   gradient, from the loopback interface's counters (`/proc/net/dev`: every byte the ranks
//!   send each other, TCP/IP headers included, and anything else on loopback meanwhile).
//! - A training step of the CIFAR-10 net (batch 128 per rank, momentum SGD, one flex tower)
//!   alone and as one rank of the job: the difference is what the exchange adds to a step.

use std::sync::Arc;
use std::time::{Duration, Instant};

mod bench_common;
use bench_common::cifar_net::CifarNet;
use bench_common::{cifar_batch, median, momentum_sgd, reps};

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::{Device, Tensor};
use towers_data::image_loss;
use towers_models::InceptionV3Config;
use towers_multigpu::mpi::{Mpi, MpiConfig};
use towers_multigpu::{CrossProcess, Towers, TowersConfig, parse_devices};

fn main() -> anyhow::Result<()> {
    let mut config = MpiConfig::default();
    if let Ok(mb) = std::env::var("TOWERS_BUCKET_MB") {
        config = config.with_bucket_bytes(mb.parse::<usize>()? << 20);
    }
    let mpi = Arc::new(Mpi::init(config)?);
    let reps = reps(5);
    let device = Device::flex().autodiff();
    let say = |line: String| {
        if mpi.rank() == 0 {
            println!("{line}");
        }
    };
    say(format!("{} ranks, {reps} repetitions per row", mpi.size()));
    say("| gradient | MB | exchange ms | copy ms | × copy | wire MB/rank | × gradient |".into());
    say("|---|---:|---:|---:|---:|---:|---:|".into());
    let nets = [
        ("TF CIFAR-10 net", trainable(&CifarNet::new(&device))),
        (
            "Inception v3",
            trainable(&InceptionV3Config::new(1001).init(&device)),
        ),
    ];
    for (name, tensors) in nets {
        say(exchange_row(&*mpi, name, tensors, reps));
    }
    say("| CIFAR-10 net step, batch 128 per rank | ms/step |".into());
    say("|---|---:|".into());
    let devices = parse_devices("flex")?;
    let towers = Towers::new(
        CifarNet::new(&device),
        momentum_sgd(),
        &devices,
        TowersConfig::default(),
    )?;
    let (towers, alone) = step_time(towers, reps);
    say(format!("| alone (no exchange) | {:.1} |", alone * 1e3));
    let (_, joined) = step_time(towers.across_processes(mpi.clone())?, reps);
    say(format!(
        "| one of {} ranks | {:.1} |",
        mpi.size(),
        joined * 1e3
    ));
    Ok(())
}

/// The trainable parameters of `model`, flattened: the shapes of its gradient.
fn trainable<M: Module>(model: &M) -> Vec<Tensor<1>> {
    struct Collect(Vec<Tensor<1>>);
    impl ModuleVisitor for Collect {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let value = param.val();
            if value.is_require_grad() {
                self.0.push(value.detach().flatten(0, D - 1));
            }
        }
    }
    let mut collect = Collect(Vec::new());
    model.visit(&mut collect);
    collect.0
}

/// One table row: the exchange of `tensors` against one copy of their bytes.
fn exchange_row(
    mpi: &dyn CrossProcess,
    name: &str,
    tensors: Vec<Tensor<1>>,
    reps: usize,
) -> String {
    let device = tensors[0].device();
    let floats: usize = tensors.iter().map(|t| t.dims()[0]).sum();
    let bytes = 4 * floats;
    mpi.weighted_mean("warm-up", tensors.clone(), 1.0, &device);
    // Every rank reads the counters between the same two exchanges.
    mpi.any("the counters' start", false);
    let wire_before = loopback_bytes();
    let exchanges: Vec<Duration> = (0..reps)
        .map(|_| {
            let started = Instant::now();
            mpi.weighted_mean("gradients", tensors.clone(), 1.0, &device);
            started.elapsed()
        })
        .collect();
    mpi.any("the counters' end", false);
    let wire = (loopback_bytes() - wire_before) as f64 / (reps * mpi.size()) as f64;
    let host = vec![1.0f32; floats];
    let mut target = vec![0.0f32; floats];
    target.copy_from_slice(&host); // touches the pages, so that no copy pays for mapping them
    let copies: Vec<Duration> = (0..reps)
        .map(|_| {
            let started = Instant::now();
            target.copy_from_slice(&host);
            started.elapsed()
        })
        .collect();
    let (exchange, copy) = (median(exchanges), median(copies));
    format!(
        "| {name} | {:.2} | {:.1} | {:.2} | {:.0} | {:.2} | {:.2} |",
        bytes as f64 / 1e6,
        exchange * 1e3,
        copy * 1e3,
        exchange / copy,
        wire / 1e6,
        wire / bytes as f64
    )
}

/// The median time of a training step, after one untimed step.
fn step_time(mut towers: Towers<CifarNet>, reps: usize) -> (Towers<CifarNet>, f64) {
    let batch = cifar_batch(128, &Device::flex());
    let mut step = || {
        let started = Instant::now();
        towers
            .step(&batch, 0.01, image_loss(|m: &CifarNet, x, y| m.loss(x, y)))
            .expect("a step");
        started.elapsed()
    };
    step();
    let times = (0..reps).map(|_| step()).collect();
    (towers, median(times))
}

/// Bytes sent on the loopback interface since boot, by every process.
fn loopback_bytes() -> u64 {
    let table = std::fs::read_to_string("/proc/net/dev").unwrap_or_default();
    table
        .lines()
        .find_map(|line| line.trim_start().strip_prefix("lo:"))
        // Receive: bytes packets errs drop fifo frame compressed multicast; then transmit bytes.
        .and_then(|fields| fields.split_whitespace().nth(8)?.parse().ok())
        .unwrap_or(0)
}
