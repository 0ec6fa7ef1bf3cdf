//! Trains the TF CIFAR-10 tutorial network (`cifar10_multi_gpu_train.py`) on one or more
//! towers, then reports precision@1 on the test set.
//!
//! ```text
//! cargo run --release --example cifar10                       # built-in data, 1000 steps
//! cargo run --release --features cuda --example cifar10 -- --data-dir cifar-10-batches-bin --devices cuda:0,cuda:1
//! cargo run --release --example cifar10 -- --resume           # continue the last run
//! cargo run --release --example cifar10 -- --pretrained /tmp/tf_cifar10_train   # from a TF checkpoint
//! cargo run --release --example cifar10 -- --data-dir data --cifar100 fine   # CIFAR-100, 100 classes
//! ```
//!
//! The TF trainer's settings (batch 128, SGD at 0.1 decayed tenfold every 350 epochs, weight
//! decay 0.004, moving averages at 0.9999) unless `--config FILE` or a flag says otherwise.
//! Ctrl-C stops after a checkpoint.

use std::path::Path;

use clap::Parser;

use burn_towers::data::cifar100::Cifar100Labels;
use burn_towers::models::Cifar10Config;
use burn_towers::train::{
    Input, StopFlag, TrainArgs, TrainConfig, Trainer, builtin_cifar10, evaluate_first_until,
    mpi_job, parse_args,
};

#[derive(Parser)]
#[command(about = "Train the TF CIFAR-10 network on towers")]
struct Args {
    #[command(flatten)]
    train: TrainArgs,
    /// Test images to evaluate at the end (TF's cifar10_eval `--num_examples`); all when absent.
    #[arg(long)]
    eval_examples: Option<u64>,
    /// CIFAR-100 in `--data-dir` instead (`cifar-100-binary`, `cifar-100-python` or TFDS's
    /// `cifar100`), with its fine labels (100 classes) or its coarse ones (20).
    #[arg(long, value_name = "fine|coarse")]
    cifar100: Option<Cifar100Labels>,
}

/// The training and test inputs of `dir` and the classes of their labels: CIFAR-10's, or
/// CIFAR-100's with `cifar100`.
fn inputs(dir: &Path, cifar100: Option<Cifar100Labels>) -> anyhow::Result<(Input, Input, usize)> {
    Ok(match cifar100 {
        Some(labels) => (
            Input::cifar100_train(dir, labels)?,
            Input::cifar100_test(dir, labels)?,
            labels.num_classes(),
        ),
        None => (Input::cifar10_train(dir)?, Input::cifar10_test(dir)?, 10),
    })
}

fn main() -> anyhow::Result<()> {
    let args: Args = parse_args();
    let builtin;
    let (dir, config) = match &args.train.data_dir {
        Some(dir) => (dir.clone(), args.train.config(TrainConfig::cifar10())?),
        None => {
            builtin = builtin_cifar10()?;
            println!(
                "no --data-dir: built-in synthetic CIFAR-10 data in {}",
                builtin.dir().display()
            );
            if args.cifar100.is_some() {
                anyhow::bail!("--cifar100 needs --data-dir: the built-in data is CIFAR-10's");
            }
            let config = args.train.builtin_config(TrainConfig::cifar10_builtin())?;
            (builtin.dir().to_path_buf(), config)
        }
    };
    let (train, test, num_classes) = inputs(&dir, args.cifar100)?;
    let weight_decay = config.weight_decay;
    let readers = config.reader_threads.unwrap_or(4);
    // Under mpirun: one rank of the job; rank 0 alone writes, reports and evaluates.
    let job = mpi_job(&config)?;
    let rank_zero = job.as_ref().is_none_or(|p| p.rank() == 0);
    let stop = StopFlag::ctrl_c()?;
    let trained = Trainer::new(config.clone())
        .with_processes(job)
        .with_stop(stop.clone())
        .with_prepare(args.train.fine_tuning())
        .with_tf_resume()
        .run(
            |device| {
                Cifar10Config::new()
                    .with_num_classes(num_classes)
                    .with_weight_decay(weight_decay)
                    .init(device)
            },
            &train,
        )?;
    if !rank_zero {
        return Ok(());
    }
    args.train.report(&trained)?;

    // TF's cifar10_eval, once: the moving averages when kept, on the first tower's device;
    // not after a stop asked for by a signal, and cut short by one.
    let name = test.files[0]
        .file_name()
        .unwrap_or_default()
        .to_string_lossy();
    if trained.report.interrupted {
        println!(
            "{name}: not evaluated, the run was stopped (`cifar10_eval --train-dir {}` \
             evaluates its checkpoint)",
            trained.report.checkpoint_dir.display()
        );
        return Ok(args.train.end_tuning()?);
    }
    let (weights, which) = trained.eval_weights();
    let examples = args.eval_examples.unwrap_or(u64::MAX);
    let precision = evaluate_first_until(weights, &test, examples, 128, readers, &stop)?;
    let cut_short = match stop.is_requested() {
        true => ", cut short by a signal",
        false => "",
    };
    println!("{name}, {which}: {precision}{cut_short}");
    // Last: the evaluation's kernels are tuned too.
    Ok(args.train.end_tuning()?)
}
