//! Load tests of the pipeline, run by hand (ignored by default; minutes each):
//!
//! ```text
//! cargo test -p towers-data --test integration load:: -- --ignored --nocapture --test-threads 1
//! LOAD_RECORDS=10000000 LOAD_STOPS=1000 cargo test -p towers-data --test integration load:: -- --ignored --nocapture --test-threads 1
//! ```
//!
//! Many shards and reader threads for a long run, with the process's peak memory read from
//! the kernel; and stops requested at random moments, each of which must join every thread.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use rand::{RngExt, SeedableRng};
use towers_data::cifar10::{self, BuiltinCifar10, Cifar10Format};
use towers_data::transforms::{CifarTrain, Rng};
use towers_data::{Pipeline, PipelineConfig};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).map_or(default, |v| v.parse().expect("a number"))
}

/// A line of `/proc/self/status` (`VmRSS`, `VmHWM`), in MiB.
fn memory_mib(key: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with(key)).unwrap();
    let kib: f64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib / 1024.0
}

/// `copies` copies of the five built-in CIFAR-10 training files (1000 records each): many
/// shards from the same real-format bytes.
fn shards(data: &BuiltinCifar10, dir: &std::path::Path, copies: usize) -> Vec<PathBuf> {
    let originals = cifar10::train_files(data.dir()).unwrap();
    (0..copies)
        .flat_map(|c| originals.iter().map(move |f| (c, f.clone())))
        .map(|(c, original)| {
            let copy = dir.join(format!(
                "{c}-{}",
                original.file_name().unwrap().to_string_lossy()
            ));
            std::fs::copy(&original, &copy).unwrap();
            copy
        })
        .collect()
}

fn start(files: Vec<PathBuf>, readers: usize, seed: u64) -> Pipeline {
    let config = PipelineConfig::train(128)
        .with_reader_threads(readers)
        .with_seed(seed);
    Pipeline::start(
        config,
        Arc::new(Cifar10Format),
        files,
        Arc::new(CifarTrain::default()),
    )
    .unwrap()
}

#[test]
#[ignore = "a load test: minutes; run by hand"]
fn a_long_run_over_many_shards_keeps_memory_steady() {
    let records = env("LOAD_RECORDS", 1_000_000);
    let readers = env("LOAD_READERS", 16) as usize;
    let data = BuiltinCifar10::create(1000, 1, 1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let files = shards(&data, dir.path(), 20);
    let mut pipeline = start(files.clone(), readers, 1);
    let started = Instant::now();
    let mut seen = 0u64;
    // The resident memory after each tenth of the run.
    let mut rss = Vec::new();
    while seen < records {
        let batch = pipeline.next_batch().unwrap().expect("endless");
        seen += batch.len() as u64;
        if seen >= records / 10 * (rss.len() as u64 + 1) {
            rss.push(memory_mib("VmRSS"));
        }
    }
    pipeline.stop().unwrap();
    let secs = started.elapsed().as_secs_f64();
    println!(
        "load: {seen} records from {} shards, {readers} readers, {secs:.1} s ({:.0} records/s); \
         peak RSS {:.1} MiB; RSS (MiB) after each tenth: {:?}",
        files.len(),
        seen as f64 / secs,
        memory_mib("VmHWM"),
        rss.iter().map(|m| format!("{m:.0}")).collect::<Vec<_>>()
    );
    let growth = rss.last().unwrap() - rss[0];
    assert!(
        growth < 64.0,
        "memory grew by {growth:.1} MiB after the first 10%"
    );
}

#[test]
#[ignore = "a load test: minutes; run by hand"]
fn stops_at_random_moments_never_deadlock() {
    let stops = env("LOAD_STOPS", 200);
    let data = BuiltinCifar10::create(200, 1, 2).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let files = shards(&data, dir.path(), 4);
    let mut rng = Rng::seed_from_u64(env("LOAD_SEED", 0));
    let mut slowest = Duration::ZERO;
    for i in 0..stops {
        let (batches, readers) = (rng.random_range(0..6), rng.random_range(1..12));
        let wait = Duration::from_micros(rng.random_range(0..3000));
        let by_drop = rng.random_bool(0.3);
        let files = files.clone();
        let (done, finished) = channel();
        std::thread::spawn(move || {
            let mut pipeline = start(files, readers, i);
            for _ in 0..batches {
                pipeline.next_batch().unwrap();
            }
            std::thread::sleep(wait);
            let started = Instant::now();
            if by_drop {
                drop(pipeline);
            } else {
                pipeline.stop().unwrap();
            }
            done.send(started.elapsed()).unwrap();
        });
        let took = finished
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("stop {i} hung ({readers} readers, {batches} batches)"));
        slowest = slowest.max(took);
    }
    println!(
        "load: {stops} stops at random moments, none hung; slowest stop-and-join {:.1} ms",
        slowest.as_secs_f64() * 1e3
    );
}
