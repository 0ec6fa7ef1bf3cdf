//! Images/sec of the training input pipelines: the threaded pipeline with 1, 2 and 4 reader
//! threads against a synchronous loop (read, decode, distort, batch in the consumer), measured
//! in one process, for CIFAR-10 (batch 128, 24x24 distortions) and Inception (batch 32, JPEG
//! decode and the 299x299 distortions). Each row is the median of 3 rounds; its CPU ms per
//! image (all threads) is what other load on the machine barely changes.
//!
//! cargo run --release -p towers-bench --bin bench_input [-- --only cifar10|inception] [--stages|--decoders|--upload|--index FILE|--torchvision-eval FILE]
//!
//! `--stages` prints instead where one reader's time goes per Inception image (read, parse,
//! decode, crop and resize, colour, batch copy), in that thread's CPU time; `--decoders` the
//! CPU time per image of the JPEG decoders (ours, libjpeg-turbo's as TF's, against zune-jpeg);
//! `--upload` the time of handing a CIFAR-10 and an Inception batch to a tower's device
//! (`TOWERS_BENCH_DEVICE`, default flex) as a view of the batch, against a copy first;
//! `--index FILE` the time to index a TFRecord file of 2 million 100-byte records (written there
//! first when absent; its tf.data peer is `bench/peers/tf_count_records.py`);
//! `--torchvision-eval FILE` the time per image of torchvision's evaluation preprocessing on a
//! JPEG (its peer `bench/peers/torchvision_eval.py`, which writes one with `--make`).

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::{Parser, ValueEnum};
use rand::SeedableRng;

use burn_towers::data::cifar10::{self, BuiltinCifar10, Cifar10Format};
use burn_towers::data::inception::{self, BuiltinShards, BuiltinShardsConfig, TfExampleFormat};
use burn_towers::data::transforms::{CifarTrain, InceptionTrain, Rng, Transform};
use burn_towers::data::{Pipeline, PipelineConfig, RecordFormat};

use towers_bench::input_stages;

#[derive(Clone, Copy, PartialEq, ValueEnum)]
enum Input {
    Cifar10,
    Inception,
}

#[derive(Parser)]
struct Args {
    /// Measure one input only.
    #[arg(long)]
    only: Option<Input>,
    /// A cifar-10-batches-bin folder; built-in synthetic data when absent.
    #[arg(long)]
    cifar_dir: Option<PathBuf>,
    /// A folder of train-*-of-* shards; built-in synthetic JPEG shards when absent.
    #[arg(long)]
    shards_dir: Option<PathBuf>,
    /// Print the Inception input's time per image by stage (one thread) instead.
    #[arg(long)]
    stages: bool,
    /// Print the JPEG decoders' time per Inception image (one thread) instead.
    #[arg(long)]
    decoders: bool,
    /// Print the time of uploading a batch to `TOWERS_BENCH_DEVICE` instead.
    #[arg(long)]
    upload: bool,
    /// Print the time of indexing this TFRecord file of small records instead (written first
    /// when absent).
    #[arg(long)]
    index: Option<PathBuf>,
    /// Print the time per image of torchvision's evaluation preprocessing of this JPEG instead.
    #[arg(long)]
    torchvision_eval: Option<PathBuf>,
}

/// One input to measure: files, format, distortions and batch size.
struct Bench {
    files: Vec<PathBuf>,
    format: Arc<dyn RecordFormat>,
    transform: Arc<dyn Transform>,
    batch_size: usize,
    read_chunk: usize,
    batches: usize,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if args.upload {
        let (entry, device) = towers_bench::bench_device();
        towers_bench::upload::print(&entry, &device);
        return Ok(());
    }
    if let Some(file) = &args.index {
        return towers_bench::record_index::print(file);
    }
    if let Some(file) = &args.torchvision_eval {
        return towers_bench::torchvision_eval::print(file);
    }
    if args.only != Some(Input::Inception) && !args.stages && !args.decoders {
        let builtin;
        let dir = match &args.cifar_dir {
            Some(dir) => dir.clone(),
            None => {
                builtin = BuiltinCifar10::create(2000, 10, 1)?;
                builtin.dir().to_path_buf()
            }
        };
        println!(
            "\nCIFAR-10 training input (crop 24, flip, brightness, contrast, standardization), batch 128, {cores} cores"
        );
        report(&Bench {
            files: cifar10::train_files(&dir)?,
            format: Arc::new(Cifar10Format),
            transform: Arc::new(CifarTrain::default()),
            batch_size: 128,
            read_chunk: 16,
            batches: 300,
        })?;
    }
    if args.only != Some(Input::Cifar10) {
        let builtin;
        let dir = match &args.shards_dir {
            Some(dir) => dir.clone(),
            None => {
                // ImageNet's JPEGs average about 400x350 pixels.
                builtin = BuiltinShards::create(BuiltinShardsConfig::new(10, 380))?;
                builtin.dir().to_path_buf()
            }
        };
        let files = inception::train_files(&dir)?;
        if args.stages {
            return input_stages::print(&files, &InceptionTrain::new(299));
        }
        if args.decoders {
            return input_stages::decoders::print(&files);
        }
        println!(
            "\nInception training input (JPEG decode, distorted crop, resize to 299, flip, colour), batch 32, {cores} cores"
        );
        report(&Bench {
            files,
            format: Arc::new(TfExampleFormat::new(1001)),
            transform: Arc::new(InceptionTrain::new(299)),
            batch_size: 32,
            read_chunk: 2,
            batches: 25,
        })?;
    }
    Ok(())
}

/// Images/sec and the CPU time they took (all threads), over one timed round.
struct Rate {
    per_sec: f64,
    cpu_ms_per_image: f64,
}

/// Times three rounds of `batches` calls of `next_batch` (each returning its image count) and
/// gives the median round, as the tf.data peer does.
fn measure(
    batches: usize,
    mut next_batch: impl FnMut() -> anyhow::Result<usize>,
) -> anyhow::Result<Rate> {
    let mut rounds = Vec::new();
    for _ in 0..3 {
        let (start, cpu) = (Instant::now(), input_stages::process_cpu_time());
        let mut images = 0;
        for _ in 0..batches {
            images += next_batch()?;
        }
        let cpu = (input_stages::process_cpu_time() - cpu).as_secs_f64();
        rounds.push(Rate {
            per_sec: images as f64 / start.elapsed().as_secs_f64(),
            cpu_ms_per_image: cpu * 1e3 / images as f64,
        });
    }
    rounds.sort_by(|a, b| a.per_sec.total_cmp(&b.per_sec));
    Ok(rounds.swap_remove(1))
}

fn report(bench: &Bench) -> anyhow::Result<()> {
    println!("| input | images/sec | vs synchronous | CPU ms/image |");
    println!("|---|---:|---:|---:|");
    let base = synchronous(bench)?;
    let row = |name: &str, rate: &Rate| {
        let (per_sec, cpu) = (rate.per_sec, rate.cpu_ms_per_image);
        println!(
            "| {name} | {per_sec:.0} | {:.2} | {cpu:.2} |",
            per_sec / base.per_sec
        );
    };
    row("synchronous loop (1 thread, no queues)", &base);
    for (readers, deterministic) in [(1, true), (2, true), (4, true), (4, false)] {
        let rate = pipelined(bench, readers, deterministic)?;
        let mode = if deterministic {
            ""
        } else {
            ", nondeterministic"
        };
        row(&format!("pipeline, {readers} reader(s){mode}"), &rate);
    }
    Ok(())
}

fn pipelined(bench: &Bench, readers: usize, deterministic: bool) -> anyhow::Result<Rate> {
    let config = PipelineConfig::train(bench.batch_size)
        .with_reader_threads(readers)
        .with_read_chunk(bench.read_chunk)
        .with_deterministic(deterministic);
    let mut pipeline = Pipeline::start(
        config,
        Arc::clone(&bench.format),
        bench.files.clone(),
        Arc::clone(&bench.transform),
    )?;
    // Warm up past the shuffle queue's initial fill (min_after_dequeue = 10 batches).
    for _ in 0..12 {
        pipeline.next_batch()?;
    }
    let rate = measure(bench.batches, || {
        Ok(pipeline.next_batch()?.map_or(0, |b| b.len()))
    })?;
    pipeline.stop()?;
    Ok(rate)
}

/// The same work without threads or queues: read a record, decode and distort it
/// ([`RecordFormat::prepare`], as a reader thread does), append it to the batch, in file order.
/// The batch's memory is reused, as the pipeline's batch pool does.
fn synchronous(bench: &Bench) -> anyhow::Result<Rate> {
    let mut records = bench
        .files
        .iter()
        .map(|path| Ok((path.clone(), bench.format.index(path)?)))
        .collect::<anyhow::Result<Vec<_>>>()?
        .into_iter()
        .flat_map(|(path, spans)| {
            spans
                .into_iter()
                .enumerate()
                .map(move |(i, s)| (path.clone(), i, s))
        })
        .cycle();
    let mut files = HashMap::new();
    let (mut seq, mut bytes, mut images, mut labels) = (0u64, Vec::new(), Vec::new(), Vec::new());
    let mut next_batch = || -> anyhow::Result<usize> {
        images.clear();
        labels.clear();
        for _ in 0..bench.batch_size {
            let (path, record, span) = records.next().expect("cycle");
            let file = match files.entry(path.clone()) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(e) => e.insert(File::open(&path)?),
            };
            bytes.resize(span.len, 0);
            file.seek(SeekFrom::Start(span.offset))?;
            file.read_exact(&mut bytes)?;
            let mut rng = Rng::seed_from_u64(seq);
            let prepared =
                bench
                    .format
                    .prepare(&path, record, &bytes, bench.transform.as_ref(), &mut rng)?;
            seq += 1;
            images.extend_from_slice(prepared.planes.data());
            labels.push(prepared.label);
        }
        Ok(labels.len())
    };
    next_batch()?;
    measure(bench.batches, next_batch)
}
