//! The input pipeline on its own: reader threads, shuffle queue, batcher, prefetch.
//!
//! cargo run --release --example queues [-- --data-dir cifar-10-batches-bin --readers 4]
//!
//! Without `--data-dir` it writes a small synthetic CIFAR-10 set to a temporary directory
//! and reads it back through the same reader.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::Parser;

use burn_towers::data::cifar10::{self, BuiltinCifar10, Cifar10Format};
use burn_towers::data::transforms::CifarTrain;
use burn_towers::data::{Pipeline, PipelineConfig};

#[derive(Parser)]
struct Args {
    /// A cifar-10-batches-bin folder; built-in synthetic data when absent.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Reader threads.
    #[arg(long, default_value_t = 4)]
    readers: usize,
    /// Examples per batch.
    #[arg(long, default_value_t = 128)]
    batch_size: usize,
    /// Batches to read.
    #[arg(long, default_value_t = 200)]
    batches: usize,
    /// Seed of file order, distortions and shuffling.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let builtin;
    let dir = match &args.data_dir {
        Some(dir) => dir.clone(),
        None => {
            builtin = BuiltinCifar10::create(1000, 100, args.seed)?;
            println!(
                "built-in synthetic CIFAR-10 data in {}",
                builtin.dir().display()
            );
            builtin.dir().to_path_buf()
        }
    };
    let config = PipelineConfig::train(args.batch_size)
        .with_reader_threads(args.readers)
        .with_seed(args.seed);
    println!("{config:#?}");
    let files = cifar10::train_files(&dir)?;
    let mut pipeline = Pipeline::start(
        config,
        Arc::new(Cifar10Format),
        files,
        Arc::new(CifarTrain::default()),
    )?;
    let start = Instant::now();
    let mut counts = [0usize; cifar10::NUM_CLASSES];
    for step in 1..=args.batches {
        let Some(batch) = pipeline.next_batch()? else {
            break;
        };
        batch.labels().iter().for_each(|&l| counts[l as usize] += 1);
        if step % 50 == 0 {
            let fill = pipeline.fill();
            println!(
                "batch {step}: {} images {:?}, example queue {:.0}% full, prefetch {:.0}% full",
                batch.len(),
                batch.image_shape(),
                fill.examples * 100.0,
                fill.batches * 100.0
            );
        }
    }
    let images: usize = counts.iter().sum();
    println!(
        "{images} images in {:.2} s ({:.0} images/sec); per class: {counts:?}",
        start.elapsed().as_secs_f64(),
        images as f64 / start.elapsed().as_secs_f64()
    );
    pipeline.stop()?;
    Ok(())
}
