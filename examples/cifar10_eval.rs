//! Evaluates CIFAR-10 weights once, as TF's `cifar10_eval.py --run_once`: precision@1 on
//! every image of the test batch (`test_batch.bin`, or torchvision's `test_batch`), with the
//! moving averages of the weights when the checkpoint has them. The weights may be ours or a
//! TF tutorial checkpoint.
//!
//! ```text
//! cargo run --release --example cifar10_eval                  # newest checkpoint of the default train dir
//! cargo run --release --example cifar10_eval -- --train-dir /tmp/cifar10_train --data-dir cifar-10-batches-bin
//! cargo run --release --example cifar10_eval -- --checkpoint /tmp/tf_cifar10_train/model.ckpt-100000
//! cargo run --release --example cifar10_eval -- --data-dir data --cifar100 fine   # a CIFAR-100 run's
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Parser;

use burn_towers::data::cifar100::Cifar100Labels;
use burn_towers::data::transforms::CifarEval;
use burn_towers::models::Cifar10Config;
use burn_towers::train::summary::write_precision;
use burn_towers::train::{
    Input, TrainConfig, WeightsArgs, builtin_cifar10, evaluate, load_weights, parse_args,
};

#[derive(Parser)]
#[command(about = "Evaluate CIFAR-10 weights on the test set")]
struct Args {
    #[command(flatten)]
    weights: WeightsArgs,
    /// A cifar-10-batches-bin or cifar-10-batches-py folder, or the folder holding one, or
    /// TFDS's data_dir holding cifar10; the built-in synthetic data (the `cifar10` example's)
    /// when absent.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// CIFAR-100's test file in `--data-dir` instead, with its fine labels (100 classes) or its
    /// coarse ones (20), for weights of a `cifar10 --cifar100` run.
    #[arg(long, value_name = "fine|coarse")]
    cifar100: Option<Cifar100Labels>,
    /// The train directory whose newest checkpoint is evaluated.
    #[arg(long, default_value_os_t = TrainConfig::cifar10().train_dir)]
    train_dir: PathBuf,
    /// Weights to evaluate instead: a checkpoint of ours, a TF checkpoint (prefix, `.index` or
    /// directory) or a `.safetensors` export.
    #[arg(long)]
    checkpoint: Option<PathBuf>,
    /// Side of the central crop the network takes (the tutorial's 24).
    #[arg(long, default_value_t = 24)]
    image_size: usize,
    /// Examples per batch.
    #[arg(long, default_value_t = 128)]
    batch_size: usize,
    /// Input reader threads.
    #[arg(long, default_value_t = 4)]
    reader_threads: usize,
    /// Where precision_at_1 goes for TensorBoard (an event file per evaluation), as TF's eval_dir.
    #[arg(long, default_value_os_t = std::env::temp_dir().join("cifar10_eval"))]
    eval_dir: PathBuf,
}

fn main() -> anyhow::Result<()> {
    let args: Args = parse_args();
    let path = args.checkpoint.as_ref().unwrap_or(&args.train_dir);
    let device = args.weights.device()?;
    let num_classes = args.cifar100.map_or(10, Cifar100Labels::num_classes);
    let model = Cifar10Config::new()
        .with_num_classes(num_classes)
        .with_image_size(args.image_size)
        .init(&device);
    let options = args.weights.load_options();
    let (model, report) = load_weights(model, path, options)?;
    println!("{report}");

    let builtin;
    let dir = match &args.data_dir {
        Some(dir) => dir.clone(),
        None if args.cifar100.is_some() => {
            anyhow::bail!("--cifar100 needs --data-dir: the built-in data is CIFAR-10's")
        }
        None => {
            builtin = builtin_cifar10()?;
            builtin.dir().to_path_buf()
        }
    };
    let eval = CifarEval {
        size: args.image_size,
    };
    let test = match args.cifar100 {
        Some(labels) => Input::cifar100_test(&dir, labels)?,
        None => Input::cifar10_test(&dir)?,
    };
    let input = Input {
        transform: Arc::new(eval),
        ..test
    };
    let precision = evaluate(&model, &input, args.batch_size, args.reader_threads)?;
    let which = match args.weights.raw_weights {
        true => "trained weights",
        false => "moving averages where kept",
    };
    let step = step_of(&report.source);
    let at = match step {
        0 => String::new(),
        step => format!(" (step {step})"),
    };
    println!("{}{at}, {which}: {precision}", path.display());
    let events = write_precision(&args.eval_dir, step, &precision)?;
    println!("summary: {}", events.display());
    Ok(())
}

/// The step in a checkpoint file's name (`model.ckpt-1000`, `model.ckpt-1000.index`), 0 when
/// it has none (a `.safetensors` export).
fn step_of(file: &Path) -> u64 {
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let after = name.rsplit_once("ckpt-").map_or("", |(_, s)| s);
    after
        .split('.')
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}
