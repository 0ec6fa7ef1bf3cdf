//! Images/sec of the CIFAR-10 training input: the threaded pipeline with 1, 2 and 4 reader
//! threads against a synchronous loop (read, distort, batch in the consumer), in one process.
//!
//! cargo run --release --example bench_input [-- --data-dir cifar-10-batches-bin --batches 300]

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::Parser;
use rand::SeedableRng;

use burn_towers::data::cifar10::{self, BuiltinCifar10, Cifar10Format};
use burn_towers::data::transforms::{CifarTrain, Rng, Transform};
use burn_towers::data::{HostBatch, Pipeline, PipelineConfig, RecordFormat};

#[derive(Parser)]
struct Args {
    /// A cifar-10-batches-bin folder; built-in synthetic data when absent.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Batches timed per configuration (after 10 warm-up batches).
    #[arg(long, default_value_t = 300)]
    batches: usize,
    /// Examples per batch.
    #[arg(long, default_value_t = 128)]
    batch_size: usize,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let builtin;
    let dir = match &args.data_dir {
        Some(dir) => dir.clone(),
        None => {
            builtin = BuiltinCifar10::create(2000, 10, 1)?;
            builtin.dir().to_path_buf()
        }
    };
    let files = cifar10::train_files(&dir)?;
    println!(
        "CIFAR-10 training input (crop 24, flip, brightness, contrast, standardization), batch {}, {} batches timed, {} cores",
        args.batch_size,
        args.batches,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!("| input | images/sec | vs synchronous |");
    println!("|---|---:|---:|");
    let base = synchronous(&files, &args)?;
    println!("| synchronous loop (1 thread, no queues) | {base:.0} | 1.00 |");
    for (readers, deterministic) in [(1, true), (2, true), (4, true), (4, false)] {
        let rate = pipelined(&files, &args, readers, deterministic)?;
        let mode = if deterministic { "" } else { ", nondeterministic" };
        println!("| pipeline, {readers} reader(s){mode} | {rate:.0} | {:.2} |", rate / base);
    }
    Ok(())
}

fn pipelined(files: &[PathBuf], args: &Args, readers: usize, deterministic: bool) -> anyhow::Result<f64> {
    let config = PipelineConfig {
        reader_threads: readers,
        deterministic,
        ..PipelineConfig::train(args.batch_size)
    };
    let mut pipeline = Pipeline::start(config, Arc::new(Cifar10Format), files.to_vec(), Arc::new(CifarTrain::default()))?;
    for _ in 0..10 {
        pipeline.next_batch()?;
    }
    let start = Instant::now();
    let mut images = 0;
    for _ in 0..args.batches {
        images += pipeline.next_batch()?.map_or(0, |b| b.len());
    }
    let rate = images as f64 / start.elapsed().as_secs_f64();
    pipeline.stop()?;
    Ok(rate)
}

/// The same work as the pipeline without threads or queues: read a record, decode, distort,
/// append to the batch, in file order.
fn synchronous(files: &[PathBuf], args: &Args) -> anyhow::Result<f64> {
    let transform = CifarTrain::default();
    let mut records = files
        .iter()
        .map(|path| Ok((path.clone(), Cifar10Format.index(path)?)))
        .collect::<anyhow::Result<Vec<_>>>()?
        .into_iter()
        .flat_map(|(path, spans)| spans.into_iter().enumerate().map(move |(i, s)| (path.clone(), i, s)))
        .cycle();
    let mut open: Option<(PathBuf, File)> = None;
    let mut bytes = vec![0u8; cifar10::RECORD_BYTES];
    let mut seq = 0u64;
    let mut next_batch = || -> anyhow::Result<HostBatch> {
        let mut images = Vec::new();
        let mut labels = Vec::new();
        for _ in 0..args.batch_size {
            let (path, record, span) = records.next().expect("cycle");
            if open.as_ref().is_none_or(|(p, _)| *p != path) {
                open = Some((path.clone(), File::open(&path)?));
            }
            let file = &mut open.as_mut().expect("opened").1;
            file.seek(SeekFrom::Start(span.offset))?;
            file.read_exact(&mut bytes)?;
            let example = Cifar10Format.decode(&path, record, &bytes)?;
            let image = transform
                .apply(example.image, &example.boxes, &mut Rng::seed_from_u64(seq))
                .map_err(anyhow::Error::msg)?;
            seq += 1;
            images.extend(image.into_chw());
            labels.push(example.label);
        }
        Ok(HostBatch::new(images, labels, [3, 24, 24]))
    };
    for _ in 0..10 {
        next_batch()?;
    }
    let start = Instant::now();
    let mut images = 0;
    for _ in 0..args.batches {
        images += next_batch()?.len();
    }
    Ok(images as f64 / start.elapsed().as_secs_f64())
}
