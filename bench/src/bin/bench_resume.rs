//! Resume time at a small and a large step, alone or as every rank of an MPI job: the TF
//! CIFAR-10 trainer (the tutorial net, batch 128 per rank, built-in data of 10,000 images in 5
//! files, 4 readers) trained to step 60, then resumed from that checkpoint and from one of step
//! 100,060 made from it: every rank's input position moved on by the whole epochs of its share
//! in the records of 100,000 steps, and the examples seen by 100,000 global batches. A resume
//! here is the trainer's whole run to the next step (checkpoint load, pipeline start, one
//! training step), median of 3; then the input alone, from the pipeline's start at the rank's
//! position to its first batch, median of 9, on every rank.
//!
//! ```text
//! cargo run --release -p towers-bench --bin bench_resume
//! cargo build --release -p towers-bench --features mpi --bin bench_resume
//! mpirun --oversubscribe --mca btl tcp,self --mca btl_tcp_if_include lo -np 2 target/release/bench_resume
//! ```

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use burn_towers::data::{InputPosition, PipelineConfig, RecordAt, Share};
use burn_towers::models::{Cifar10Config, Cifar10Net};
use burn_towers::multigpu::{Processes, eprint_line};
use burn_towers::train::{Checkpoint, Input, TrainConfig, Trainer, builtin_cifar10, mpi_job};
use serde_json::Value;

const FILE_RECORDS: u64 = 2_000;
const BATCH: u64 = 128;
const FIRST: u64 = 60;
const LATER: u64 = 100_000;

fn config(train_dir: &Path, max_steps: u64) -> TrainConfig {
    let mut config = TrainConfig::cifar10();
    config.summaries.enabled = false;
    config
        .with_batch_size(BATCH as usize)
        .with_reader_threads(Some(4))
        .with_max_steps(max_steps)
        .with_checkpoint_every(1_000_000)
        .with_log_every(1_000_000)
        .with_train_dir(train_dir.to_path_buf())
}

/// This process alone, or one rank of the MPI job that launched it.
struct Job(Option<Processes>);

impl Job {
    fn rank(&self) -> usize {
        self.0.as_ref().map_or(0, |p| p.rank())
    }

    fn ranks(&self) -> usize {
        self.0.as_ref().map_or(1, |p| p.size())
    }

    /// Waits until every rank got here.
    fn barrier(&self) {
        if let Some(p) = &self.0 {
            p.any("bench_resume's barrier", false);
        }
    }

    /// `mine` of every rank, in rank order.
    fn gather(&self, mine: f64) -> Vec<f64> {
        let Some(p) = &self.0 else {
            return vec![mine];
        };
        let all = p.all_gather("bench_resume's figures", &mine.to_le_bytes());
        all.iter()
            .map(|b| f64::from_le_bytes(b[..8].try_into().expect("8 bytes")))
            .collect()
    }

    /// A fresh directory every rank sees, made by rank 0 with `fill` in it (its owner, which
    /// deletes it when dropped, on rank 0).
    fn shared_dir(
        &self,
        fill: impl FnOnce(&Path) -> anyhow::Result<()>,
    ) -> anyhow::Result<(Option<tempfile::TempDir>, PathBuf)> {
        let made = match self.rank() {
            0 => Some(tempfile::tempdir()?),
            _ => None,
        };
        if let Some(dir) = &made {
            fill(dir.path())?;
        }
        let mine = made
            .as_ref()
            .map_or(Vec::new(), |d| d.path().display().to_string().into());
        let path = match &self.0 {
            Some(p) => String::from_utf8(p.all_gather("a shared directory", &mine).swap_remove(0))?,
            None => String::from_utf8(mine)?,
        };
        self.barrier();
        Ok((made, path.into()))
    }
}

/// `position` moved on by `epochs` whole epochs of `records`: the same places in the files,
/// later in the run.
fn later_position(position: &InputPosition, epochs: u64, records: u64) -> InputPosition {
    let shift = |r: &RecordAt| RecordAt {
        seq: r.seq + epochs * records,
        epoch: r.epoch + epochs,
        ..*r
    };
    let mut moved = position.clone();
    moved.next.seq += epochs * records;
    moved.next.epoch += epochs;
    moved.skip = position.skip.iter().map(shift).collect();
    moved.buffer = position.buffer.iter().map(shift).collect();
    moved
}

/// A checkpoint's input section `LATER` steps on: every rank's position moved by the whole
/// epochs of its share in `LATER` steps' records, and the examples of `LATER` global batches.
fn later(input: &Value) -> anyhow::Result<Value> {
    let ranks = input["ranks"].as_u64().expect("the job's ranks") as usize;
    let mut moved = input.clone();
    for (rank, json) in (moved["rank_positions"].as_array_mut())
        .expect("every rank's position")
        .iter_mut()
        .enumerate()
    {
        let position: InputPosition = serde_json::from_value(json.clone())?;
        let records = Share::new(rank, ranks).count(position.files.len()) as u64 * FILE_RECORDS;
        let epochs = LATER * BATCH / records;
        *json = serde_json::to_value(later_position(&position, epochs, records))?;
    }
    let examples = input["examples"].as_u64().expect("examples seen");
    moved["examples"] = (examples + LATER * BATCH * ranks as u64).into();
    Ok(moved)
}

/// The median of `n` timings of `f`.
fn median(n: usize, mut f: impl FnMut() -> anyhow::Result<Duration>) -> anyhow::Result<Duration> {
    let mut times = (0..n).map(|_| f()).collect::<anyhow::Result<Vec<_>>>()?;
    times.sort();
    Ok(times[n / 2])
}

/// One resume of the job from `saved` (a checkpoint of `step`) to step `step + 1`, in a fresh
/// train directory.
fn resume(job: &Job, saved: &Path, step: u64, input: &Input) -> anyhow::Result<Duration> {
    let name = format!("model.ckpt-{step}");
    let (_owner, dir) =
        job.shared_dir(|dir| Ok(std::fs::copy(saved, dir.join(&name)).map(drop)?))?;
    let mut c = config(&dir, step + 1);
    c.resume = true;
    let started = Instant::now();
    Trainer::new(c)
        .with_processes(job.0.clone())
        .run(|d| Cifar10Config::new().init(d), input)?;
    let took = started.elapsed();
    job.barrier();
    Ok(took)
}

/// One start of `share`'s input at `position`, to its first batch.
fn first_batch(input: &Input, position: &InputPosition, share: Share) -> anyhow::Result<Duration> {
    let config = PipelineConfig::train(BATCH as usize)
        .with_reader_threads(4)
        .with_share(share);
    let started = Instant::now();
    let mut pipeline = input.resume(config, position)?;
    pipeline.next_batch()?;
    let took = started.elapsed();
    pipeline.stop()?;
    Ok(took)
}

fn main() -> anyhow::Result<()> {
    let job = Job(mpi_job(&config(Path::new("."), 0))?);
    if let Err(error) = measure(&job) {
        // Said and ended here: a rank that returned its error would first wait in MPI's
        // finalize for the ranks still waiting for it, saying nothing until their deadline.
        eprint_line(&format!("rank {}: {error:#}", job.rank()));
        std::process::exit(1);
    }
    Ok(())
}

/// The resumes this process (or rank) times, and the table rank 0 prints.
fn measure(job: &Job) -> anyhow::Result<()> {
    let data = builtin_cifar10()?;
    let input = Input::cifar10_train(data.dir())?;
    let (_first_owner, first) = job.shared_dir(|_| Ok(()))?;
    Trainer::<Cifar10Net>::new(config(&first, FIRST))
        .with_processes(job.0.clone())
        .run(|d| Cifar10Config::new().init(d), &input)?;
    let saved = first.join(format!("model.ckpt-{FIRST}"));
    let near = (Checkpoint::load(&saved)?.input).expect("the trainer saves the input");
    let far = later(&near)?;
    let share = Share::new(job.rank(), job.ranks());
    let mut rows = Vec::new();
    for (step, input_json) in [(FIRST, near), (FIRST + LATER, far)] {
        let name = format!("model.ckpt-{step}");
        let ckpt_input = input_json.clone();
        let (_owner, dir) = job.shared_dir(|dir| {
            let ckpt = Checkpoint {
                step,
                input: Some(ckpt_input),
                ..Checkpoint::load(&saved)?
            };
            Ok(ckpt.save(&dir.join(&name))?)
        })?;
        let trainer = median(3, || resume(job, &dir.join(&name), step, &input))?;
        let position = serde_json::from_value(input_json["rank_positions"][job.rank()].clone())?;
        let alone = median(9, || first_batch(&input, &position, share))?;
        rows.push((
            step,
            job.gather(trainer.as_secs_f64()),
            job.gather(alone.as_secs_f64()),
        ));
    }
    if job.rank() == 0 {
        print_rows(job.ranks(), &rows);
    }
    Ok(())
}

fn print_rows(ranks: usize, rows: &[(u64, Vec<f64>, Vec<f64>)]) {
    println!(
        "\nresume of the CIFAR-10 trainer on {ranks} rank(s) (batch {BATCH} per rank, 4 readers): \
         the trainer to the next step (median of 3; slowest rank), the input alone to the \
         resumed step's first batch (median of 9; each rank)"
    );
    println!("| step | trainer, to the next step | input alone, first batch | vs step {FIRST} |");
    println!("|---:|---:|---:|---:|");
    let slowest = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    let base = slowest(&rows[0].2);
    for (step, trainer, alone) in rows {
        let each: Vec<String> = alone.iter().map(|s| format!("{:.1} ms", s * 1e3)).collect();
        println!(
            "| {step} | {:.2} s | {} | {:.2} |",
            slowest(trainer),
            each.join(" / "),
            slowest(alone) / base
        );
    }
}
