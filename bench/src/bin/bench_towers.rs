//! What the tower strategy costs, measured in one run on the default CPU backend (flex), or on
//! the device `TOWERS_BENCH_DEVICE` names (`TOWERS_BENCH_DEVICE=cuda:0`).
//!
//! `cargo run --release -p towers-bench --bin bench_towers [REPS] [ROW]` (default 15 timed steps per row;
//! `ROW`: `plain`, `1`, `gather` or `ring` runs that row alone; `TOWERS_BENCH_BATCH` replaces
//! the batch of 128).
//!
//! 1. Step time of `Towers` against a plain Burn training step (forward, loss, backward,
//!    optimizer step, loss read back) on the same model and batch: a CIFAR-10-sized conv net
//!    (TF's, without LRN: 1.07M parameters), batch 128 of 24x24 images. The rows alternate step
//!    by step, in an order that rotates each round, so all see the same machine state. One tower on the model's device must cost
//!    nothing extra; the `flex,flex` rows run two towers on the same CPU, so they show the
//!    threading and reduction overhead rather than a speed-up.
//! 2. For the 2-tower rows, from a timeline of their steps: the towers' reduction (the ring's
//!    rounds; the gather's moves) and the update that follows (the gather's sum, the
//!    optimizer, the statistics). Each runs after backward, so in process the reduction is
//!    wholly exposed (exposed communication fraction 1).
//! 3. The reduction alone, with `bench_reduce`.

use std::time::Instant;

use towers_bench::cifar_net::CifarNet;
use towers_bench::{batch, bench_device, cifar_batch, median, momentum_sgd, reps};

use burn::module::Module;
use burn::optim::GradientsParams;
use towers_data::image_loss;
use towers_multigpu::{Reduce, Timeline, Towers, TowersConfig, Track, parse_devices};

fn main() -> anyhow::Result<()> {
    let reps = reps(15);
    let (entry, device) = bench_device();
    device.seed(0);
    let lr = 0.01;

    let n = batch(128);
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
    // `ROW`, the second argument (`plain`, `1`, `gather` or `ring`), runs that row alone in
    // this process: a check that the rows do not slow one another down.
    let only = std::env::args().nth(2);
    let pair = format!("{entry},{entry}");
    // (key, name, towers' device list and reduction: none for the plain step)
    type Row<'a> = (&'static str, String, Option<(&'a String, Reduce)>);
    let rows: Vec<Row> = [
        ("plain", "plain Burn step".to_string(), None),
        (
            "1",
            format!("1 tower ({entry})"),
            Some((&entry, Reduce::ParameterDevice)),
        ),
        (
            "gather",
            format!("2 towers {pair}, gather"),
            Some((&pair, Reduce::ParameterDevice)),
        ),
        (
            "ring",
            format!("2 towers {pair}, all-reduce"),
            Some((&pair, Reduce::AllReduce)),
        ),
    ]
    .into_iter()
    .filter(|(key, ..)| only.as_deref().is_none_or(|o| o == *key))
    .collect();
    // The timelines stream to files, read back below.
    let traces = tempfile::tempdir()?;
    let mut towers: Vec<Option<Towers<CifarNet>>> = rows
        .iter()
        .map(|(key, _, setup)| {
            setup
                .map(|(list, reduce)| {
                    let config = TowersConfig::default().with_reduce(reduce);
                    let devices = parse_devices(list)?;
                    let towers = Towers::new(model.clone(), momentum_sgd(), &devices, config)?;
                    let trace = traces.path().join(format!("{key}.json"));
                    anyhow::Ok(towers.with_timeline(Timeline::recording(0, &trace)?))
                })
                .transpose()
        })
        .collect::<Result<_, _>>()?;

    let mut times = vec![Vec::new(); rows.len()];
    for rep in 0..reps + 2 {
        for row in (0..rows.len()).map(|r| (r + rep) % rows.len()) {
            let start = Instant::now();
            match &mut towers[row] {
                None => plain_step(),
                Some(towers) => {
                    towers.step(&batch, lr, image_loss(|m: &CifarNet, x, y| m.loss(x, y)))?;
                }
            }
            if rep >= 2 {
                times[row].push(start.elapsed());
            }
        }
    }
    let medians: Vec<f64> = times.into_iter().map(median).collect();
    let plain = rows.iter().position(|(key, ..)| *key == "plain");
    println!("\n{:<32} {:>10} {:>16}", "step", "ms/step", "vs plain step");
    for ((_, name, _), t) in rows.iter().zip(&medians) {
        let ratio = plain.map_or("-".into(), |p| format!("{:.3}", t / medians[p]));
        println!("{name:<32} {:>10.1} {ratio:>16}", t * 1e3);
    }
    for ((key, name, _), towers) in rows.iter().zip(&towers) {
        let Some(towers) = towers.as_ref().filter(|t| t.devices().len() > 1) else {
            continue;
        };
        // Per step, the reduction of the tower that finished backward last (it waits for no
        // one: what the reduction itself costs) and of the other (which also waits for it).
        towers.timeline().finish()?;
        let spans = spans_of(&traces.path().join(format!("{key}.json")))?;
        let per_tower = |tower: usize| -> Vec<f64> {
            (spans.iter())
                .filter(|(n, track, _)| n == "reduce" && *track == Track::Tower(tower))
                .map(|(_, _, secs)| *secs)
                .collect()
        };
        let (a, b) = (per_tower(0), per_tower(1));
        let last: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x.min(*y)).collect();
        let first: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x.max(*y)).collect();
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
        let updates: Vec<f64> = (spans.iter())
            .filter(|(n, track, _)| n == "update" && *track == Track::Main)
            .map(|(_, _, secs)| *secs)
            .collect();
        println!(
            "{name}: towers' reduction {:.1} ms on the tower last out of backward ({:.1} ms on \
             the other, waiting for it), then the update (gathered sum, optimizer, statistics) \
             {:.1} ms per step; nothing overlaps backward in process: exposed communication \
             fraction 1",
            mean(&last) * 1e3,
            mean(&first) * 1e3,
            mean(&updates) * 1e3
        );
    }

    Ok(())
}

/// The complete events of the Chrome trace at `path`: `(name, track, seconds)`.
fn spans_of(path: &std::path::Path) -> anyhow::Result<Vec<(String, Track, f64)>> {
    let trace: serde_json::Value = serde_json::from_slice(&std::fs::read(path)?)?;
    let events = trace["traceEvents"].as_array().cloned().unwrap_or_default();
    let track = |tid: u64| match tid {
        0 => Track::Main,
        1000 => Track::Exchange,
        tower => Track::Tower(tower as usize - 1),
    };
    Ok((events.iter())
        .filter(|e| e["ph"] == "X")
        .map(|e| {
            let name = e["name"].as_str().unwrap_or_default().to_string();
            let tid = e["tid"].as_u64().unwrap_or_default();
            (
                name,
                track(tid),
                e["dur"].as_f64().unwrap_or_default() / 1e6,
            )
        })
        .collect())
}
