//! Resume time at a small and a large step: the TF CIFAR-10 trainer (the tutorial net, batch
//! 128, built-in data of 10,000 images, 4 readers) resumed from a checkpoint of step 10 and
//! from one of step 100,010, made from it by moving its input position 1,280 epochs on (the
//! records of 100,000 steps). Against them, the replay that checkpoints without a position
//! need, at steps 10 and 1,010. Each figure is the median of 3 resumes; a resume here is the
//! trainer's whole run to the next step: checkpoint load, pipeline start, one training step.
//! Then the input alone: from the pipeline's start to its first batch, median of 9.
//!
//! cargo run --release --example bench_resume

use std::path::Path;
use std::time::{Duration, Instant};

use burn_towers::data::{InputPosition, PipelineConfig, RecordAt};
use burn_towers::models::{Cifar10Config, Cifar10Net};
use burn_towers::train::{Checkpoint, Input, TrainConfig, Trainer, builtin_cifar10};

const EPOCH: u64 = 10_000;
const BATCH: u64 = 128;

fn config(train_dir: &Path, max_steps: u64) -> TrainConfig {
    let defaults = TrainConfig::cifar10();
    let mut summaries = defaults.summaries;
    summaries.enabled = false;
    TrainConfig {
        summaries,
        batch_size: BATCH as usize,
        reader_threads: Some(4),
        max_steps,
        checkpoint_every: 1_000_000,
        log_every: 1_000_000,
        train_dir: train_dir.to_path_buf(),
        ..defaults
    }
}

/// `position` moved on by `epochs` whole epochs: the same places in the files, later in the run.
fn later(position: &InputPosition, epochs: u64) -> InputPosition {
    let shift = |r: &RecordAt| RecordAt {
        seq: r.seq + epochs * EPOCH,
        epoch: r.epoch + epochs,
        ..*r
    };
    let mut moved = position.clone();
    moved.next.seq += epochs * EPOCH;
    moved.next.epoch += epochs;
    moved.skip = position.skip.iter().map(shift).collect();
    moved.buffer = position.buffer.iter().map(shift).collect();
    moved
}

/// A train directory whose only checkpoint is the one at `path`, made step `step` with `input`.
fn train_dir_at(
    path: &Path,
    step: u64,
    input: Option<InputPosition>,
) -> anyhow::Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    let ckpt = Checkpoint {
        step,
        input: input.map(|p| serde_json::to_value(p).expect("a position serializes")),
        ..Checkpoint::load(path)?
    };
    ckpt.save(&dir.path().join(format!("model.ckpt-{step}")))?;
    Ok(dir)
}

/// The median of `n` timings of `f`.
fn median(n: usize, mut f: impl FnMut() -> anyhow::Result<Duration>) -> anyhow::Result<Duration> {
    let mut times = (0..n).map(|_| f()).collect::<anyhow::Result<Vec<_>>>()?;
    times.sort();
    Ok(times[n / 2])
}

/// One resume from `dir`'s checkpoint at `step` to step `step + 1`.
fn resume(dir: &Path, step: u64, input: &Input) -> anyhow::Result<Duration> {
    let run_dir = tempfile::tempdir()?;
    let name = format!("model.ckpt-{step}");
    std::fs::copy(dir.join(&name), run_dir.path().join(&name))?;
    let c = TrainConfig {
        resume: true,
        ..config(run_dir.path(), step + 1)
    };
    let started = Instant::now();
    Trainer::new(c).run(|d| Cifar10Config::new().init(d), input)?;
    Ok(started.elapsed())
}

/// One start of the input at `position`, or from the start reading past `step` batches, to
/// the first batch of step `step + 1`.
fn first_batch(
    input: &Input,
    position: Option<&InputPosition>,
    step: u64,
) -> anyhow::Result<Duration> {
    let config = PipelineConfig {
        reader_threads: 4,
        ..PipelineConfig::train(BATCH as usize)
    };
    let started = Instant::now();
    let (mut pipeline, replay) = match position {
        Some(p) => (input.resume(config, p)?, 0),
        None => (input.start(config)?, step),
    };
    for _ in 0..=replay {
        pipeline.next_batch()?;
    }
    let took = started.elapsed();
    pipeline.stop()?;
    Ok(took)
}

fn main() -> anyhow::Result<()> {
    let data = builtin_cifar10()?;
    let input = Input::cifar10_train(data.dir())?;
    let first = tempfile::tempdir()?;
    Trainer::<Cifar10Net>::new(config(first.path(), 10))
        .run(|d| Cifar10Config::new().init(d), &input)?;
    let saved = first.path().join("model.ckpt-10");
    let position = (Checkpoint::load(&saved)?.input).expect("the trainer saves the input position");
    let position: InputPosition = serde_json::from_value(position)?;
    let far = later(&position, 100_000 * BATCH / EPOCH);

    let mut rows = Vec::new();
    for (how, step, at) in [
        ("input position", 10, Some(&position)),
        ("input position", 100_010, Some(&far)),
        ("replay (no position)", 10, None),
        ("replay (no position)", 1_010, None),
    ] {
        let dir = train_dir_at(&saved, step, at.cloned())?;
        let trainer = median(3, || resume(dir.path(), step, &input))?;
        let alone = median(9, || first_batch(&input, at, step))?;
        rows.push((how, step, trainer, alone));
    }
    println!(
        "\nresume of the CIFAR-10 trainer (batch {BATCH}, 4 readers): the trainer to the next step"
    );
    println!("(median of 3), the input alone to the resumed step's first batch (median of 9)");
    println!(
        "| resume | step | trainer, to the next step | input alone, first batch | vs step 10 |"
    );
    println!("|---|---:|---:|---:|---:|");
    for (how, step, trainer, alone) in &rows {
        let base = rows.iter().find(|r| r.0 == *how).expect("a first row").3;
        let ratio = alone.as_secs_f64() / base.as_secs_f64();
        let (trainer, alone) = (trainer.as_secs_f64(), alone.as_secs_f64() * 1e3);
        println!("| {how} | {step} | {trainer:.2} s | {alone:.1} ms | {ratio:.2} |");
    }
    Ok(())
}
