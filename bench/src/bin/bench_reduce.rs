//! What reducing an Inception-v3-sized gradient set costs, measured in one run on flex.
//!
//! `cargo run --release -p towers-bench --bin bench_reduce [REPS]` (default 7 timed reductions per row).
//!
//! 192 tensors, 24.0M floats per replica, reduced over 2 and 4 replicas, by gathering to one
//! device, by the all-reduce host-memory towers use (each replica sums a share of the
//! gradients, handed round by reference), and by the ring all-reduce (a chunk of every gradient
//! per round, and a chunk of each 25 MB bucket per round; what towers on GPUs use), against
//! copying the same 96 MB once (`copy_from_slice` into memory already touched: the
//! memory-bandwidth floor). "vs traffic" divides by the copies each
//! reduction must make at the least: a gather of N, (N + 1) / 2 (N - 1 sums read two sets and
//! write one, over N sets); the all-reduce, N.

use std::time::{Duration, Instant};

use towers_bench::{median, reps};

use burn::module::{Module, Param};
use burn::optim::GradientsParams;
use burn::tensor::{Device, Distribution, Tensor};
use towers_multigpu::{all_reduce, all_reduce_in_buckets, reduce_to_device};

fn main() -> anyhow::Result<()> {
    reduce_bench(reps(7))
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
    println!(
        "{:<44} {:>8} {:>12} {:>11}",
        "", "ms", "vs one copy", "vs traffic"
    );
    println!(
        "{:<44} {:>8.1} {:>12.2} {:>11.2}",
        "copy 96 MB once (floor)",
        copy * 1e3,
        1.0,
        1.0
    );
    for replicas in [2, 4] {
        let base = replica_grads(replicas);
        let mut gather = Vec::new();
        let mut shares = Vec::new();
        let mut per_tensor = Vec::new();
        let mut bucketed = Vec::new();
        for _ in 0..reps {
            // New gradients for each reduction, each tensor held once, as backward leaves them:
            // a sum may write into an input.
            let sets = || base.iter().map(copy_grads(&names)).collect::<Vec<_>>();
            let inputs = sets();
            let start = Instant::now();
            let _sum = reduce_to_device(&names, inputs, &flex);
            flex.sync()?;
            gather.push(start.elapsed());
            let inputs = sets().into_iter().map(|g| (g, flex.clone())).collect();
            let start = Instant::now();
            let _sums = all_reduce(&names, inputs);
            flex.sync()?;
            shares.push(start.elapsed());
            for (bytes, times) in [(0, &mut per_tensor), (25 << 20, &mut bucketed)] {
                let inputs = sets().into_iter().map(|g| (g, flex.clone())).collect();
                let start = Instant::now();
                let _sums = all_reduce_in_buckets(&names, inputs, bytes);
                flex.sync()?;
                times.push(start.elapsed());
            }
        }
        let n = replicas as f64;
        for (name, times, traffic) in [
            ("gather to one device", gather, (n + 1.0) / 2.0),
            ("all-reduce by shares", shares, n),
            ("ring all-reduce, per tensor", per_tensor, n),
            ("ring all-reduce, 25 MB buckets", bucketed, n),
        ] {
            let t = median(times);
            println!(
                "{:<44} {:>8.1} {:>12.2} {:>11.2}",
                format!("{replicas} replicas, {name}"),
                t * 1e3,
                t / copy,
                t / copy / traffic
            );
        }
    }
    Ok(())
}

/// A gradient set with copies of the tensors of `grads`.
fn copy_grads(names: &GradSet) -> impl Fn(&GradientsParams) -> GradientsParams + '_ {
    move |grads| {
        let mut out = GradientsParams::new();
        for p in &names.params {
            if let Some(g) = grads.get::<2>(p.id) {
                out.register(p.id, Tensor::<2>::from_data(g.to_data(), &g.device()));
            }
        }
        out
    }
}
