//! The trainer as ranks of an MPI job (`mpirun -np 2` on loopback, one flex tower per rank; see
//! [`towers_testing::mpirun`]): the ranks stay in step, rank 0 alone writes, a resumed job
//! continues exactly like one that ran straight through, from every rank's own input
//! position, and resumes on another world size (the epoch in progress re-cut: every record read
//! once, counted from record ids) or past a corrupt checkpoint.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use burn::tensor::{Int, Tensor};
use std::sync::atomic::{AtomicUsize, Ordering};
use towers_data::cifar10::{self, BuiltinCifar10, Cifar10Format};
use towers_data::transforms::CifarTrain;
use towers_data::{Example, RecordFormat, RecordSpan};
use towers_testing::compare::values;

use std::sync::Arc;
use towers_models::{Cifar10Net, ImageClassifier};
use towers_multigpu::mpi::{Mpi, MpiConfig};
use towers_multigpu::{Processes, TowerLoss, Wire};
use towers_testing::mpirun::{Run, mpirun};
use towers_testing::training::{cifar_net, quick_cifar_config};
use towers_train::{Input, LrScheduleConfig, StopFlag, Trainer, mpi_job, read_log};

/// One rank: trains `TOWERS_MPI_STEPS` steps in `TOWERS_MPI_TRAIN_DIR` on the CIFAR-10 files of
/// `TOWERS_MPI_DATA`, and writes its model's values to `TOWERS_MPI_OUT/rank-R`. Under
/// `TOWERS_MPI_SCENARIO` `stop`, rank 1 asks to stop during step 3 (under
/// `stop-at-checkpoint`, step 4, whose checkpoint is written anyway); under `fail`, rank 1's
/// device list is wrong; under `hang`, rank 1's second forward pass sleeps past the job's
/// 4-second exchange deadline; under `count`, the input is FIFO with record ids for labels
/// (see [`IdLabels`]), which each rank appends to `TOWERS_MPI_OUT/ids-rank-R`, a line a step,
/// from its own copy of the files (as ranks on a cluster's nodes may read);
/// under `decay`, the learning rate halves every 512 examples (continuously; epochs of 1000).
#[test]
#[ignore = "a rank of the MPI tests, launched by them under mpirun"]
fn rank() {
    let var = |name: &str| std::env::var(name).expect("launched by the MPI tests");
    let scenario = var("TOWERS_MPI_SCENARIO");
    let train_dir = var("TOWERS_MPI_TRAIN_DIR");
    let steps = var("TOWERS_MPI_STEPS").parse().unwrap();
    let mut exchange = quick_cifar_config(Path::new(&train_dir), "flex", steps);
    if scenario == "bf16" {
        exchange.towers.allreduce_dtype = Wire::Bf16;
    }
    let job: Processes = match scenario.as_str() {
        "hang" => {
            let config = MpiConfig::default().with_timeout(Duration::from_secs(4));
            Arc::new(Mpi::init(config).unwrap())
        }
        _ => mpi_job(&exchange).unwrap().expect("launched by mpirun"),
    };
    let rank = job.rank();
    let devices = if scenario == "fail" && rank == 1 {
        "nonsense"
    } else {
        "flex"
    };
    let counts = scenario == "count";
    let mut config = quick_cifar_config(Path::new(&train_dir), devices, steps);
    config.resume = var("TOWERS_MPI_RESUME") == "1";
    if scenario == "other-schedule" && rank == 1 {
        config.max_steps += 1;
        config.learning_rate = LrScheduleConfig::Constant { value: 0.05 };
    }
    config.shuffle_queue = !counts;
    if scenario == "decay" {
        config.examples_per_epoch = Some(1000);
        config.learning_rate = LrScheduleConfig::ExponentialDecay {
            initial: 0.01,
            decay_rate: 0.5,
            decay_epochs: 0.512,
            staircase: false,
        };
    }
    let data = PathBuf::from(var("TOWERS_MPI_DATA"));
    // Only where it is read: the scenarios that fail end their ranks by `MPI_Abort`, which
    // runs no destructor, and each left an empty folder in `TMPDIR` behind.
    let copy = counts.then(|| tempfile::tempdir().unwrap());
    let input = match &copy {
        Some(copy) => Input::new(IdLabels, copied(&data, copy.path()), CifarTrain::default()),
        None => Input::cifar10_train(&data).unwrap(),
    };
    let ids_file = Path::new(&var("TOWERS_MPI_OUT")).join(format!("ids-rank-{rank}"));
    let stop = StopFlag::new();
    let (flag, passes) = (stop.clone(), AtomicUsize::new(0));
    // The pass (a step each: one tower) during which rank 1 asks to stop.
    let asks_to_stop = match scenario.as_str() {
        "stop" if rank == 1 => Some(2),
        "stop-at-checkpoint" if rank == 1 => Some(3),
        _ => None,
    };
    let hangs = scenario == "hang" && rank == 1;
    let trained = Trainer::new(config)
        .with_loss(move |m: &Cifar10Net, x, y| {
            let pass = passes.fetch_add(1, Ordering::SeqCst);
            if asks_to_stop == Some(pass) {
                flag.request();
            }
            if hangs && pass == 1 {
                std::thread::sleep(Duration::from_secs(30));
            }
            if counts {
                append_ids(&ids_file, &y);
                return TowerLoss::new(m.loss(x, y.remainder_scalar(10)).loss);
            }
            TowerLoss::new(m.loss(x, y).loss)
        })
        .with_stop(stop)
        .with_processes(Some(job))
        .run(cifar_net, &input)
        .unwrap();
    // Every rank returns after rank 0 wrote the last checkpoint, so any rank may read it next.
    let last = Path::new(&train_dir).join(format!("model.ckpt-{}", trained.report.step));
    assert!(
        last.exists(),
        "rank {rank} returned before {} was written",
        last.display()
    );
    let bytes: Vec<u8> = values(&trained.model)
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    std::fs::write(
        Path::new(&var("TOWERS_MPI_OUT")).join(format!("rank-{rank}")),
        bytes,
    )
    .unwrap();
}

/// CIFAR-10 records labelled with their id instead of their class: 1000 x the file's number
/// (`data_batch_N.bin`, from 0) + the record's index in it.
struct IdLabels;

impl RecordFormat for IdLabels {
    fn index(&self, path: &Path) -> towers_data::Result<Vec<RecordSpan>> {
        Cifar10Format.index(path)
    }

    fn decode(&self, path: &Path, record: usize, bytes: &[u8]) -> towers_data::Result<Example> {
        let name = path.file_stem().unwrap().to_string_lossy();
        let file: i64 = name.trim_start_matches("data_batch_").parse().unwrap();
        let example = Cifar10Format.decode(path, record, bytes)?;
        Ok(Example {
            label: 1000 * (file - 1) + record as i64,
            ..example
        })
    }
}

/// Copies of the CIFAR-10 training files of `data` in `dir`.
fn copied(data: &Path, dir: &Path) -> Vec<PathBuf> {
    let files = cifar10::train_files(data).unwrap();
    (files.iter())
        .map(|file| {
            let copy = dir.join(file.file_name().unwrap());
            std::fs::copy(file, &copy).unwrap();
            copy
        })
        .collect()
}

/// Appends the step's record ids (`labels` under [`IdLabels`]) to `file` as one line.
fn append_ids(file: &Path, labels: &Tensor<1, Int>) {
    let ids: Vec<String> = labels
        .to_data()
        .iter::<i64>()
        .map(|i| i.to_string())
        .collect();
    let mut out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .unwrap();
    writeln!(out, "{}", ids.join(" ")).unwrap();
}

/// The record ids each rank read under `count`, in order, from the files in `out`.
fn read_ids(out: &Path, ranks: usize) -> Vec<Vec<i64>> {
    (0..ranks)
        .map(|rank| {
            let text = std::fs::read_to_string(out.join(format!("ids-rank-{rank}"))).unwrap();
            text.split_whitespace()
                .map(|id| id.parse().unwrap())
                .collect()
        })
        .collect()
}

/// Two ranks train `steps` in `train_dir`; mpirun's output and each rank's values, or `None`
/// without mpirun.
fn job(data: &Path, train_dir: &Path, steps: u64, resume: bool) -> Option<(String, [Vec<f32>; 2])> {
    job_in("plain", data, train_dir, steps, resume)
}

fn job_in(
    scenario: &str,
    data: &Path,
    train_dir: &Path,
    steps: u64,
    resume: bool,
) -> Option<(String, [Vec<f32>; 2])> {
    let out = tempfile::tempdir().unwrap();
    let run = launch(2, scenario, data, train_dir, steps, resume, out.path())?;
    assert!(run.success, "mpirun failed:\n{}", run.output);
    assert!(run.elapsed < Duration::from_secs(60));
    let read = |rank: usize| {
        let bytes = std::fs::read(out.path().join(format!("rank-{rank}"))).unwrap();
        (bytes.chunks_exact(4))
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect()
    };
    Some((run.output, [read(0), read(1)]))
}

fn launch(
    ranks: usize,
    scenario: &str,
    data: &Path,
    train_dir: &Path,
    steps: u64,
    resume: bool,
    out: &Path,
) -> Option<Run> {
    let env = [
        ("TOWERS_MPI_SCENARIO", scenario.to_string()),
        ("TOWERS_MPI_DATA", data.display().to_string()),
        ("TOWERS_MPI_TRAIN_DIR", train_dir.display().to_string()),
        ("TOWERS_MPI_STEPS", steps.to_string()),
        ("TOWERS_MPI_RESUME", u8::from(resume).to_string()),
        ("TOWERS_MPI_OUT", out.display().to_string()),
    ];
    mpirun(ranks, &towers_testing::test_name!("rank"), &env)
}

/// 5 x 200 training images: five files, three for rank 0 and two for rank 1.
fn data() -> BuiltinCifar10 {
    BuiltinCifar10::create(200, 10, 3).unwrap()
}

#[test]
fn two_ranks_stay_in_step_and_rank_zero_alone_writes() {
    let data = data();
    let dir = tempfile::tempdir().unwrap();
    let Some((output, [rank0, rank1])) = job(data.dir(), dir.path(), 4, false) else {
        return;
    };
    // The same updates on the same weights: bit for bit.
    assert!(rank0 == rank1, "the ranks' models differ after 4 steps");
    let note = "global batch 32 = 2 ranks x 16 per rank; this rank reads 3 of the 5 input files";
    assert_eq!(
        output.matches(note).count(),
        1,
        "rank 0 alone logs:\n{output}"
    );
    let steps: Vec<u64> = read_log(&dir.path().join(towers_train::LOG_FILE))
        .unwrap()
        .iter()
        .map(|e| e.step)
        .collect();
    assert_eq!(steps, [1, 2, 3, 4], "one log line per step, from one rank");
    let events = std::fs::read_dir(dir.path()).unwrap().filter(|e| {
        e.as_ref()
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with("events.out.tfevents")
    });
    assert!(events.count() <= 1, "more than one rank wrote summaries");
}

#[test]
fn bf16_gradients_between_ranks_train_close_to_f32() {
    let data = data();
    let (f32_dir, bf16_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let Some((_, [f32_model, _])) = job(data.dir(), f32_dir.path(), 4, false) else {
        return;
    };
    let (_, [rank0, rank1]) = job_in("bf16", data.dir(), bf16_dir.path(), 4, false).unwrap();
    assert!(
        rank0 == rank1,
        "the ranks' models differ after 4 bf16 steps"
    );
    let change = |a: &[f32], b: &[f32]| {
        let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
        let diff: Vec<f32> = a.iter().zip(b).map(|(x, y)| x - y).collect();
        norm(&diff) / norm(b)
    };
    let apart = change(&rank0, &f32_model);
    // Rounded to 8 bits: not the f32 updates, but within their rounding.
    assert!(apart > 0.0 && apart < 1e-2, "bf16 vs f32 models: {apart}");
}

#[test]
fn a_resumed_job_continues_like_one_that_ran_through() {
    let data = data();
    let (straight, resumed) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let Some((_, [expected, _])) = job(data.dir(), straight.path(), 6, false) else {
        return;
    };
    job(data.dir(), resumed.path(), 4, false);
    let (output, [got0, got1]) = job(data.dir(), resumed.path(), 6, true).unwrap();
    assert!(got0 == got1, "the resumed ranks' models differ");
    // Every rank's own position, not a replay of the input.
    let resumed_at = "resuming the input at step 4 from the checkpoint's input position";
    assert!(output.contains(resumed_at), "{output}");
    assert!(!output.contains("reading past"), "{output}");
    towers_testing::compare::assert_close(&got0, &expected, 1e-6, "resumed vs straight");
}

/// Rank 1 asks to stop during step 3, or during step 4, a checkpoint step (whose end every
/// rank must agree on, rank 0 having written the checkpoint): every rank stops after it, and
/// the checkpoint of that step is there.
#[test]
fn a_stop_on_one_rank_stops_every_rank_after_the_same_step() {
    let data = data();
    for (scenario, stopped_at) in [("stop", 3), ("stop-at-checkpoint", 4)] {
        let dir = tempfile::tempdir().unwrap();
        let Some((_, [rank0, rank1])) = job_in(scenario, data.dir(), dir.path(), 6, false) else {
            return;
        };
        assert!(
            rank0 == rank1,
            "{scenario}: the ranks stopped at different steps"
        );
        let log = read_log(&dir.path().join(towers_train::LOG_FILE)).unwrap();
        assert_eq!(log.last().map(|e| e.step), Some(stopped_at), "{scenario}");
        let names: Vec<String> = (std::fs::read_dir(dir.path()).unwrap())
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        let checkpoint = format!("model.ckpt-{stopped_at}");
        assert!(
            names.iter().any(|n| n.starts_with(&checkpoint)),
            "{scenario}: no {checkpoint} in {names:?}"
        );
    }
}

#[test]
fn an_error_on_one_rank_ends_the_job_with_its_message() {
    let data = data();
    let (dir, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let Some(run) = launch(2, "fail", data.dir(), dir.path(), 6, false, out.path()) else {
        return;
    };
    run.assert_failed_fast_saying(&["rank 1: towers: device list entry `nonsense`"]);
}

/// Rank 1 on another schedule and step count: the job ends before the first step, naming
/// both settings and each rank's value (it would have drifted from rank 0 in silence, then
/// made an exchange rank 0 does not).
#[test]
fn ranks_training_otherwise_are_refused_naming_the_settings() {
    let data = data();
    let (dir, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let Some(run) = launch(
        2,
        "other-schedule",
        data.dir(),
        dir.path(),
        6,
        false,
        out.path(),
    ) else {
        return;
    };
    run.assert_failed_fast_saying(&[
        "the ranks disagree: max_steps: rank 0 6, rank 1 7",
        "learning_rate: rank 0",
        "rank 1 Constant { value: 0.05 }",
    ]);
}

/// The checkpoint of 2 ranks after 4 steps resumes on 1 rank and on 3: the log says the world
/// size changed, and every record of the epoch is read exactly once across the old and new
/// ranks, counted from the record ids the ranks trained on (FIFO input, so that each new rank
/// reads its block of what was left first): the 1000 records less the 128 read before are
/// dealt in even blocks, in rank order, each new rank reading its block first.
#[test]
fn a_job_resumed_on_another_world_size_reads_every_record_of_the_epoch_once() {
    let data = data();
    let (first, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let Some(run) = launch(2, "count", data.dir(), first.path(), 4, false, out.path()) else {
        return;
    };
    assert!(run.success, "mpirun failed:\n{}", run.output);
    let before: Vec<i64> = read_ids(out.path(), 2).concat();
    assert_eq!(before.len(), 4 * 2 * 16);
    for ranks in [1, 3] {
        let (dir, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        for entry in std::fs::read_dir(first.path()).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
        }
        let left = 1000 - before.len();
        let steps = 4 + left.div_ceil(16 * ranks) as u64;
        let run = launch(
            ranks,
            "count",
            data.dir(),
            dir.path(),
            steps,
            true,
            out.path(),
        )
        .unwrap();
        assert!(run.success, "mpirun failed:\n{}", run.output);
        let said = format!("world size changed: 2 ranks -> {ranks} rank");
        assert!(run.output.contains(&said), "{}", run.output);
        let after = read_ids(out.path(), ranks);
        let mut reads: HashMap<i64, usize> = HashMap::new();
        for id in &before {
            *reads.entry(*id).or_default() += 1;
        }
        for (rank, ids) in after.iter().enumerate() {
            let block = (rank + 1) * left / ranks - rank * left / ranks;
            for id in &ids[..block] {
                *reads.entry(*id).or_default() += 1;
            }
        }
        let every: Vec<i64> = (0..5)
            .flat_map(|f| (0..200).map(move |r| 1000 * f + r))
            .collect();
        let wrong: Vec<(i64, usize)> = (every.iter())
            .map(|id| (*id, reads.get(id).copied().unwrap_or(0)))
            .filter(|(_, n)| *n != 1)
            .collect();
        assert!(
            wrong.is_empty(),
            "{ranks} ranks: (id, reads) not once: {wrong:?}"
        );
        assert_eq!(reads.len(), every.len(), "{ranks} ranks: ids of no record");
    }
}

/// The learning rate follows the examples seen, not the steps: 4 steps of 2 ranks (32 examples
/// each), then, resumed on 1 rank, 4 steps of 16. Each logged rate is the one its update used,
/// computed here from the examples before it: 0.01 x 0.5^(examples / 512).
#[test]
fn the_learning_rate_follows_the_examples_seen_on_another_world_size() {
    let data = data();
    let (dir, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let Some(run) = launch(2, "decay", data.dir(), dir.path(), 4, false, out.path()) else {
        return;
    };
    assert!(run.success, "mpirun failed:\n{}", run.output);
    let run = launch(1, "decay", data.dir(), dir.path(), 8, true, out.path()).unwrap();
    assert!(run.success, "mpirun failed:\n{}", run.output);
    let log = read_log(&dir.path().join(towers_train::LOG_FILE)).unwrap();
    let examples_before = [0, 32, 64, 96, 128, 144, 160, 176];
    assert_eq!(log.len(), examples_before.len());
    for (entry, examples) in log.iter().zip(examples_before) {
        let want = 0.01 * 0.5f64.powf(examples as f64 / 512.0);
        let close = (entry.lr - want).abs() <= 1e-12;
        assert!(close, "step {}: rate {} vs {want}", entry.step, entry.lr);
    }
}

/// The newest checkpoint corrupt in the directory both ranks share: both resume from the one
/// before, which rank 0 chose; rank 0 alone renamed the corrupt one, and nothing aborted.
#[test]
fn ranks_resume_past_a_corrupt_checkpoint_together() {
    let data = data();
    let dir = tempfile::tempdir().unwrap();
    if job(data.dir(), dir.path(), 4, false).is_none() {
        return;
    }
    let newest = dir.path().join("model.ckpt-4");
    let mut bytes = std::fs::read(&newest).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&newest, bytes).unwrap();
    let (output, [rank0, rank1]) = job(data.dir(), dir.path(), 6, true).unwrap();
    assert!(
        rank0 == rank1,
        "the ranks resumed from different checkpoints"
    );
    assert!(
        output.contains("resuming from the newest valid checkpoint"),
        "{output}"
    );
    let renamed: Vec<String> = (std::fs::read_dir(dir.path()).unwrap())
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".corrupt"))
        .collect();
    assert_eq!(renamed, ["model.ckpt-4.corrupt"]);
}

/// A rank stuck in its step: the other rank's exchange deadline ends the job naming it (under
/// the overlapped exchange, the default, the stuck rank has reached the exchange before its
/// towers ran, but never posts its buckets), and the stuck rank's own watchdog, at half that
/// deadline, names the phase it is in.
#[test]
fn a_stuck_rank_is_named_with_its_phase() {
    let data = data();
    let (dir, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let Some(run) = launch(2, "hang", data.dir(), dir.path(), 6, false, out.path()) else {
        return;
    };
    run.assert_failed_fast_saying(&[
        "rank 1 reached it but never had all its buckets ready",
        "warning: rank 1: still in `towers` after",
    ]);
}
