//! Resume time at a small and a large step: the TF CIFAR-10 trainer (the tutorial net, batch
//! 128, built-in data of 10,000 images, 4 readers) resumed from a checkpoint of step 10 and
//! from one of step 100,010, made from it by moving its input position 1,280 epochs on (the
//! records of 100,000 steps). Against them, the replay that checkpoints without a position
//! need, at steps 10 and 1,010. Each figure is the median of 3 resumes; a resume here is the
//! trainer's whole run to the next step: checkpoint load, pipeline start, one training step.
//! Then the input alone: from the pipeline's start to its first batch, median of 5.
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
        input,
        ..Checkpoint::load(path)?
    };
    ckpt.save(&dir.path().join(format!("model.ckpt-{step}")))?;
    Ok(dir)
}

/// The median time of 3 resumes from `dir`'s checkpoint at `step` to step `step + 1`.
fn resume(dir: &Path, step: u64, input: &Input) -> anyhow::Result<Duration> {
    let mut times = Vec::new();
    for _ in 0..3 {
        let run_dir = tempfile::tempdir()?;
        let name = format!("model.ckpt-{step}");
        std::fs::copy(dir.join(&name), run_dir.path().join(&name))?;
        let c = TrainConfig {
            resume: true,
            ..config(run_dir.path(), step + 1)
        };
        let started = Instant::now();
        Trainer::new(c).run(|d| Cifar10Config::new().init(d), input)?;
        times.push(started.elapsed());
    }
    times.sort();
    Ok(times[1])
}

/// The median time of 5 starts of the input, at `position` or replaying `replay` batches, to
/// the first batch after.
fn first_batch(
    input: &Input,
    position: Option<&InputPosition>,
    replay: u64,
) -> anyhow::Result<Duration> {
    let config = PipelineConfig {
        reader_threads: 4,
        ..PipelineConfig::train(BATCH as usize)
    };
    let mut times = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let mut pipeline = match position {
            Some(p) => input.resume(config.clone(), p)?,
            None => input.start(config.clone())?,
        };
        for _ in 0..=replay {
            pipeline.next_batch()?;
        }
        times.push(started.elapsed());
        pipeline.stop()?;
    }
    times.sort();
    Ok(times[2])
}

fn main() -> anyhow::Result<()> {
    let data = builtin_cifar10()?;
    let input = Input::cifar10_train(data.dir())?;
    let first = tempfile::tempdir()?;
    Trainer::<Cifar10Net>::new(config(first.path(), 10))
        .run(|d| Cifar10Config::new().init(d), &input)?;
    let saved = first.path().join("model.ckpt-10");
    let position = (Checkpoint::load(&saved)?.input).expect("the trainer saves the input position");

    println!(
        "\nresume of the CIFAR-10 trainer (batch {BATCH}, 4 readers), median of 3, to the next step"
    );
    println!("| checkpoint | step | resume to the next step | vs step 10 |");
    println!("|---|---:|---:|---:|");
    let mut rows = Vec::new();
    let far = 100_000 * BATCH / EPOCH;
    for (how, step, input_at) in [
        ("with input position", 10, Some(position.clone())),
        (
            "with input position",
            10 + 100_000,
            Some(later(&position, far)),
        ),
        ("without (replay)", 10, None),
        ("without (replay)", 1_010, None),
    ] {
        let dir = train_dir_at(&saved, step, input_at)?;
        let took = resume(dir.path(), step, &input)?;
        rows.push((how, step, took));
    }
    let base = |how: &str| rows.iter().find(|r| r.0 == how).expect("a first row").2;
    for (how, step, took) in &rows {
        let ratio = took.as_secs_f64() / base(how).as_secs_f64();
        println!(
            "| {how} | {step} | {:.2} s | {ratio:.2} |",
            took.as_secs_f64()
        );
    }
    let replay = rows[3].2.saturating_sub(rows[2].2).as_secs_f64() / 1000.0;
    println!(
        "\nreplay costs {:.1} ms per step: about {:.0} s at step 100,010",
        replay * 1000.0,
        replay * 100_000.0 + rows[2].2.as_secs_f64()
    );

    println!(
        "\nthe input alone: pipeline start to the first batch of the resumed step, median of 5"
    );
    println!("| start | step | first batch | vs position at step 10 |");
    println!("|---|---:|---:|---:|");
    let near = first_batch(&input, Some(&position), 0)?;
    for (how, step, took) in [
        ("input position", 10, near),
        (
            "input position",
            100_010,
            first_batch(&input, Some(&later(&position, far)), 0)?,
        ),
        ("replay", 10, first_batch(&input, None, 10)?),
        ("replay", 1_010, first_batch(&input, None, 1_010)?),
    ] {
        let ratio = took.as_secs_f64() / near.as_secs_f64();
        println!(
            "| {how} | {step} | {:.1} ms | {ratio:.2} |",
            took.as_secs_f64() * 1e3
        );
    }
    Ok(())
}
