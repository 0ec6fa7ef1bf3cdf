//! Evaluates a CIFAR-10 checkpoint once, as TF's `cifar10_eval.py --run_once`: precision@1 on
//! every image of `test_batch.bin`, with the moving averages of the weights when the checkpoint
//! has them.
//!
//! ```text
//! cargo run --release --example cifar10_eval                  # newest checkpoint of the default train dir
//! cargo run --release --example cifar10_eval -- --train-dir /tmp/cifar10_train --data-dir cifar-10-batches-bin
//! ```

use std::path::PathBuf;

use clap::Parser;

use burn_towers::models::Cifar10Config;
use burn_towers::multigpu::parse_devices;
use burn_towers::train::summary::write_precision;
use burn_towers::train::{
    Checkpoint, CheckpointDir, Input, TrainConfig, builtin_cifar10, evaluate, load_into, parse_args,
};

#[derive(Parser)]
#[command(about = "Evaluate a CIFAR-10 checkpoint on the test set")]
struct Args {
    /// A cifar-10-batches-bin folder; the built-in synthetic data (the `cifar10` example's) when absent.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The train directory whose newest checkpoint is evaluated.
    #[arg(long, default_value_os_t = TrainConfig::cifar10().train_dir)]
    train_dir: PathBuf,
    /// A checkpoint file to evaluate instead of the newest.
    #[arg(long)]
    checkpoint: Option<PathBuf>,
    /// The device to evaluate on (the first of the list).
    #[arg(long, default_value = "flex")]
    devices: String,
    /// Examples per batch.
    #[arg(long, default_value_t = 128)]
    batch_size: usize,
    /// Input reader threads.
    #[arg(long, default_value_t = 4)]
    reader_threads: usize,
    /// Evaluate the trained weights, not their moving averages.
    #[arg(long)]
    raw_weights: bool,
    /// Where precision_at_1 goes for TensorBoard (an event file per evaluation), as TF's eval_dir.
    #[arg(long, default_value_os_t = std::env::temp_dir().join("cifar10_eval"))]
    eval_dir: PathBuf,
}

fn main() -> anyhow::Result<()> {
    let args: Args = parse_args();
    let path = match &args.checkpoint {
        Some(path) => path.clone(),
        None => CheckpointDir::new(&args.train_dir, 1)
            .latest()?
            .map(|(_, path)| path)
            .ok_or_else(|| anyhow::anyhow!("no checkpoint in {}", args.train_dir.display()))?,
    };
    let checkpoint = Checkpoint::load(&path)?;
    let step = checkpoint.step;
    let (record, which) = match checkpoint.averages {
        Some(averages) if !args.raw_weights => (averages, "moving averages"),
        _ => (checkpoint.model, "trained weights"),
    };
    let device = parse_devices(&args.devices)?[0].device().clone();
    let model = load_into(Cifar10Config::new().init(&device), record, &path)?;

    let builtin;
    let dir = match &args.data_dir {
        Some(dir) => dir.clone(),
        None => {
            builtin = builtin_cifar10()?;
            builtin.dir().to_path_buf()
        }
    };
    let precision = evaluate(
        &model,
        &Input::cifar10_test(&dir)?,
        args.batch_size,
        args.reader_threads,
    )?;
    println!("{} (step {step}), {which}: {precision}", path.display());
    let events = write_precision(&args.eval_dir, step, &precision)?;
    println!("summary: {}", events.display());
    Ok(())
}
