//! Towers across processes over a real MPI: each test launches `mpirun -np R` on loopback,
//! whose ranks are this test binary itself running [`rank`] (one flex tower per rank), and
//! compares rank 0's parameters after a few steps with an in-process computation.
//!
//! Without `mpirun` on the PATH the tests say so loudly and pass, except under CI, where they
//! fail (see [`towers_testing::mpirun`]).

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use burn::module::Module;
use burn::tensor::{Device, Int, Tensor};
use towers_data::{HostBatch, image_loss};
use towers_models::weight_decays;
use towers_multigpu::mpi::{Mpi, MpiConfig};
use towers_multigpu::{CrossProcess, Towers, TowersConfig, Wire, eprint_line, parse_devices};
use towers_testing::assert_error_names;
use towers_testing::batches::{batch, split};
use towers_testing::compare::{assert_close, values};
use towers_testing::mpirun::Run;
use towers_testing::nets::{BnNet, LR, Net, seeded, sgd};
use towers_testing::processes::SameRanks;
use towers_testing::reference::{self, flex};

/// Per-rank batch sizes of the global batches, step by step, per scenario.
const EVEN: [&[usize]; 3] = [&[8, 8], &[8, 8], &[8, 8]];
const UNEVEN: [&[usize]; 3] = [&[3, 13], &[11, 5], &[2, 6]];
const THREE_UNEVEN: [&[usize]; 3] = [&[3, 6, 7], &[5, 5, 2], &[9, 1, 4]];

/// Rounding only: ranks sum `n_r * mean_r` and divide by the global count, towers sum
/// `(n_i / B) * mean_i`, and a plain step takes one mean over the whole batch. The three differ
/// in the last bits of each f32 gradient (~1e-7 relative); SGD with momentum over three steps
/// keeps that below 1e-5 relative, while a wrong weight (a sum for a mean, equal weights for
/// unequal slices) moves the parameters by more than 1e-3.
const TOLERANCE: f32 = 1e-5;

/// The global batch of `step`: the same on every rank, which takes its own slice.
fn global_batch(step: usize, sizes: &[usize]) -> HostBatch {
    batch(sizes.iter().sum(), 100 + step)
}

fn sizes_of(scenario: &str) -> [&'static [usize]; 3] {
    match scenario {
        s if s.starts_with("three-uneven") => THREE_UNEVEN,
        s if s.starts_with("uneven") => UNEVEN,
        _ => EVEN,
    }
}

/// One rank of a scenario: only runs under `mpirun` (launched by the tests below).
#[test]
#[ignore = "a rank of the MPI tests, launched by them under mpirun"]
fn rank() {
    let scenario = std::env::var("TOWERS_MPI_SCENARIO").expect("launched by the MPI tests");
    let out = std::env::var("TOWERS_MPI_OUT").expect("launched by the MPI tests");
    let timeout = std::env::var("TOWERS_MPI_TIMEOUT").map_or(60, |s| s.parse().unwrap());
    // Steps of 3 s on every rank, or a first step of 3 s on rank 0, under an exchange
    // deadline of 2 s; rank 1's third step of 3 s under one of 4 s.
    let slow = scenario == "slow-steps" || scenario.starts_with("slow-first-step");
    let timeout = match scenario.as_str() {
        _ if slow => 2,
        s if s.starts_with("stalled-step") => 4,
        _ => timeout,
    };
    // Tiny buckets, so that even these nets span several.
    let wire = match scenario.strip_prefix("wire-") {
        Some(wire) => wire.parse().unwrap(),
        None if scenario.starts_with("f16-") => Wire::F16,
        None => Wire::F32,
    };
    let config = MpiConfig::default()
        .with_bucket_bytes(256)
        .with_timeout(Duration::from_secs(timeout))
        .with_wire(wire);
    // Rank 1 set otherwise, in the scenarios where the ranks disagree.
    let rank_one = match scenario.as_str() {
        "mismatch-wire" => config.clone().with_wire(Wire::F16),
        "mismatch-bucket" => config.clone().with_bucket_bytes(512),
        _ => config.clone(),
    };
    // Before MPI starts, the rank is Open MPI's variable (the tests run under Open MPI).
    let rank_is_one = std::env::var("OMPI_COMM_WORLD_RANK").is_ok_and(|r| r == "1");
    let config = if rank_is_one { rank_one } else { config };
    let mpi = Arc::new(Mpi::init(config).expect("MPI starts"));
    let rank = mpi.rank();
    if scenario.starts_with("wire-") {
        let tensors = wire_gradients(rank).map(|v| Tensor::from_floats(v.as_slice(), &flex()));
        let weight = wire_weight(rank) as f64;
        let means = mpi.weighted_mean_of_gradients(tensors.to_vec(), weight, &flex());
        let values: Vec<f32> = means.into_iter().flat_map(values_of).collect();
        if rank == 0 {
            let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            std::fs::write(out, bytes).unwrap();
        }
        return;
    }
    if scenario == "wrong-length" {
        // Rank 1's bucket holds a value more than its size: posted, MPI would write past the
        // receive buffer.
        let extra = usize::from(rank == 1);
        let mut ready = |_| Some(vec![1.0; 1000 + extra]);
        mpi.sum_buckets("a bucket too long", &[1000], &mut ready, &mut |_, _| {});
        return;
    }
    if scenario == "panic-in-exchange" {
        // Rank 1 panics making its second bucket, while its first travels.
        let mut ready = |k| {
            if rank == 1 && k == 1 {
                panic!("rank 1 cannot make bucket 1");
            }
            Some(vec![1.0; 1000])
        };
        mpi.sum_buckets("two buckets", &[1000, 1000], &mut ready, &mut |_, _| {});
        return;
    }
    if scenario == "late" && rank == 1 {
        std::thread::sleep(Duration::from_secs(30));
    }
    // Each rank starts from other weights: rank 0's must reach every rank.
    let device = flex();
    // Two towers per rank: the hierarchical path (towers gather, then ranks exchange).
    let devices = parse_devices(if scenario.contains("two-towers") {
        "flex,flex"
    } else {
        "flex"
    })
    .unwrap();
    let config = config_of(&scenario);
    // A rank with another model must be refused before any step.
    let bn = scenario == "bn" || (scenario == "mismatch" && rank == 1);
    let seed = 1 + rank;
    let model_values = if bn {
        let net = seeded(BnNet::new(&device), seed);
        let towers = join(Towers::new(net, sgd(), &devices, config).unwrap(), &mpi);
        train(towers, &scenario, rank, |m, x, y| m.loss(x, y))
    } else if scenario.starts_with("spare") {
        let net = seeded(SpareNet::new(&device), seed);
        let towers = join(Towers::new(net, sgd(), &devices, config).unwrap(), &mpi);
        let calls = AtomicUsize::new(0);
        // The first step's calls: one per micro-batch.
        let first = config_of(&scenario).accumulation;
        train(towers, &scenario, rank, |m, x, y| {
            m.loss(x, y, &calls, first)
        })
    } else {
        let net = seeded(Net::new(&device), seed);
        let decays = match scenario == "mismatch-decay" && rank == 1 {
            true => weight_decays(&net, |path| 0.5 * f64::from(path == "fc.weight")),
            false => Vec::new(),
        };
        let towers = Towers::new(net, sgd(), &devices, config).unwrap();
        let towers = towers.with_weight_decay(decays.into_iter().map(Into::into));
        let towers = join(towers, &mpi);
        if scenario == "out-of-step" && rank == 1 {
            mpi.any("an exchange only rank 1 makes", false);
        }
        train(towers, &scenario, rank, |m, x, y| m.loss(x, y).loss)
    };
    if rank == 0 {
        let bytes: Vec<u8> = model_values.iter().flat_map(|v| v.to_le_bytes()).collect();
        std::fs::write(out, bytes).unwrap();
    }
}

/// `towers` joined to the job. A refusal is printed by every rank, which then wait for each
/// other, so that every rank has said it before the job ends.
fn join<M: Module>(towers: Towers<M>, mpi: &Arc<Mpi>) -> Towers<M> {
    match towers.across_processes(mpi.clone()) {
        Ok(towers) => towers,
        Err(error) => {
            eprint_line(&format!("rank {} refused: {error}", mpi.rank()));
            mpi.any("every refusal printed", true);
            panic!("refused");
        }
    }
}

/// The towers' config of a scenario: the exchange overlaps backward unless it is `blocking`;
/// `accumulate` scenarios take each rank's slice in two micro-batches.
fn config_of(scenario: &str) -> TowersConfig {
    let config = TowersConfig::default().with_overlap(!scenario.ends_with("blocking"));
    match scenario.contains("accumulate") {
        true => config.with_accumulation(2),
        false => config,
    }
}

/// Three steps on this rank's slices; the model's values after them.
fn train<M: Module>(
    mut towers: Towers<M>,
    scenario: &str,
    rank: usize,
    loss: impl Fn(&M, Tensor<4>, Tensor<1, Int>) -> Tensor<1> + Sync,
) -> Vec<f32> {
    for (step, sizes) in sizes_of(scenario).iter().enumerate() {
        if scenario == "killed" && rank == 1 && step == 1 {
            let me = std::process::id().to_string();
            let _ = Command::new("kill").args(["-KILL", &me]).status();
            std::thread::sleep(Duration::from_secs(30));
        }
        let mine = split(&global_batch(step, sizes), sizes).swap_remove(rank);
        let slow_here = match scenario {
            "slow-steps" => true,
            s if s.starts_with("slow-first-step") => rank == 0 && step == 0,
            s if s.starts_with("stalled-step") => rank == 1 && step == 2,
            _ => false,
        };
        if slow_here {
            let slow = |m: &M, x, y| {
                std::thread::sleep(Duration::from_secs(3));
                loss(m, x, y)
            };
            towers.step(&mine, LR, image_loss(slow)).unwrap();
            continue;
        }
        if step == 1 && scenario == "tower-fails" {
            fail_on_rank_one(&mut towers, &mine, rank, &loss);
        }
        if step == 1 && scenario.starts_with("f16-overflow") {
            // Gradients a million times larger: beyond f16's 65,504 on the wire.
            let huge = |m: &M, x, y| loss(m, x, y).mul_scalar(1e6);
            let before = values(towers.model());
            let output = towers.step(&mine, LR, image_loss(huge)).unwrap();
            let after = values(towers.model());
            assert!(
                output.skipped,
                "rank {rank}: the overflowing update was applied"
            );
            assert_eq!(
                after, before,
                "rank {rank}: a skipped update changed the model"
            );
            eprint_line(&format!("rank {rank}: skipped the overflowing update"));
            continue;
        }
        if scenario.contains("accumulate") {
            // Micro-batches of unequal sizes: each example must still weigh the same.
            let first = (mine.len() / 3).max(1);
            for part in split(&mine, &[first, mine.len() - first]) {
                towers.step(&part, LR, image_loss(&loss)).unwrap();
            }
        } else {
            towers.step(&mine, LR, image_loss(&loss)).unwrap();
        }
    }
    values(towers.model())
}

/// A step in which rank 1's tower panics: it fails on every rank, naming rank 1's tower on
/// rank 0, and leaves every rank's model as it was.
fn fail_on_rank_one<M: Module>(
    towers: &mut Towers<M>,
    batch: &HostBatch,
    rank: usize,
    loss: &(impl Fn(&M, Tensor<4>, Tensor<1, Int>) -> Tensor<1> + Sync),
) {
    let failing = |m: &M, x, y| {
        if rank == 1 {
            panic!("rank 1's tower fails");
        }
        loss(m, x, y)
    };
    let before = values(towers.model());
    let error = towers.step(batch, LR, image_loss(failing)).unwrap_err();
    assert_eq!(
        values(towers.model()),
        before,
        "rank {rank}: a failed step changed the model"
    );
    eprint_line(&format!("rank {rank}: the step failed: {error}"));
}

/// `mpirun` of [`rank`] in `scenario`, with rank 0's values written to `out`.
fn mpirun(ranks: usize, scenario: &str, timeout_s: u64, out: &Path) -> Option<Run> {
    let env = [
        ("TOWERS_MPI_SCENARIO", scenario.to_string()),
        ("TOWERS_MPI_OUT", out.display().to_string()),
        ("TOWERS_MPI_TIMEOUT", timeout_s.to_string()),
    ];
    towers_testing::mpirun::mpirun(ranks, &towers_testing::test_name!("rank"), &env)
}

/// Rank 0's values after `scenario` on `ranks` ranks.
fn ranks_train(ranks: usize, scenario: &str) -> Option<Vec<f32>> {
    ranks_train_saying(ranks, scenario).map(|(values, _)| values)
}

/// Rank 0's values after `scenario` on `ranks` ranks, and what the job printed.
fn ranks_train_saying(ranks: usize, scenario: &str) -> Option<(Vec<f32>, String)> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("values");
    let run = mpirun(ranks, scenario, 60, &out)?;
    assert!(run.success, "mpirun ({scenario}) failed:\n{}", run.output);
    let bytes = std::fs::read(&out).unwrap();
    let values = (bytes.chunks_exact(4))
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    Some((values, run.output))
}

/// One process with two flex towers, on the same global batches.
fn two_towers_train<M: Module>(
    model: M,
    scenario: &str,
    loss: impl Fn(&M, Tensor<4>, Tensor<1, Int>) -> Tensor<1> + Sync,
) -> Vec<f32> {
    let devices = parse_devices("flex,flex").unwrap();
    let mut towers = Towers::new(model, sgd(), &devices, TowersConfig::default()).unwrap();
    for (step, sizes) in sizes_of(scenario).iter().enumerate() {
        towers
            .step(&global_batch(step, sizes), LR, image_loss(&loss))
            .unwrap();
    }
    values(towers.model())
}

/// What `init` builds, with rank 0's weights ([`seeded`]: not from the device's generator,
/// which the tests running beside this one draw from too).
fn from_rank_zero_seed<T: Module>(init: impl FnOnce(&Device) -> T) -> T {
    seeded(init(&flex()), 1)
}

fn rank_zero_net() -> Net {
    from_rank_zero_seed(Net::new)
}

/// [`Net`] and a layer its loss uses in the first step only (a term `0.1 · spare(mean x)`, linear
/// in the examples, so micro-batches and ranks add up to the global batch's): from then on
/// backward gives that layer no gradient, and an optimizer with momentum leaves it where the
/// first step put it.
#[derive(Module, Debug)]
struct SpareNet {
    net: Net,
    spare: burn::nn::Linear,
}

impl SpareNet {
    fn new(device: &Device) -> Self {
        Self {
            net: Net::new(device),
            spare: burn::nn::LinearConfig::new(1, 1).init(device),
        }
    }

    /// The loss; `calls` counts the calls, of which the first step makes `first` (one tower:
    /// one per micro-batch).
    fn loss(
        &self,
        x: Tensor<4>,
        y: Tensor<1, Int>,
        calls: &AtomicUsize,
        first: usize,
    ) -> Tensor<1> {
        let loss = self.net.loss(x.clone(), y).loss;
        match calls.fetch_add(1, Ordering::Relaxed) < first {
            true => {
                loss + self
                    .spare
                    .forward(x.mean().reshape([1, 1]))
                    .sum()
                    .mul_scalar(0.1)
            }
            false => loss,
        }
    }
}

/// [`SpareNet`] trained on one device on the global batches of `scenario`.
fn spare_net_on_one_device(scenario: &str) -> Vec<f32> {
    let model = from_rank_zero_seed(SpareNet::new);
    let devices = parse_devices("flex").unwrap();
    let mut towers = Towers::new(model, sgd(), &devices, TowersConfig::default()).unwrap();
    let calls = AtomicUsize::new(0);
    let loss = |m: &SpareNet, x, y| m.loss(x, y, &calls, 1);
    for (step, sizes) in sizes_of(scenario).iter().enumerate() {
        (towers.step(&global_batch(step, sizes), LR, image_loss(&loss))).unwrap();
    }
    values(towers.model())
}

/// A layer that no rank's loss uses after the first step gets no gradient from the exchange
/// (not zeros, which momentum would move it by), as on one device: the ranks end with one
/// device's parameters, the exchange overlapped with backward or after it, and with two
/// micro-batches a step (the earlier one's gradients kept for the overlapped exchange).
#[test]
fn a_parameter_no_rank_used_is_left_as_one_device_leaves_it() {
    for scenario in ["spare", "spare-blocking", "spare-accumulate"] {
        let Some(got) = ranks_train(2, scenario) else {
            return;
        };
        let expected = spare_net_on_one_device(scenario);
        assert_close(&got, &expected, TOLERANCE, scenario);
    }
}

/// `ranks` ranks in `scenario` end with the parameters of one device trained on the global
/// batches.
fn assert_ranks_like_one_device(ranks: usize, scenario: &str) {
    let Some(got) = ranks_train(ranks, scenario) else {
        return;
    };
    let batches: Vec<HostBatch> = (sizes_of(scenario).iter().enumerate())
        .map(|(step, sizes)| global_batch(step, sizes))
        .collect();
    let (expected, _) = reference::plain_training(rank_zero_net(), &batches);
    let what = format!("{ranks} ranks ({scenario}) vs one device");
    assert_close(&got, &values(&expected), TOLERANCE, &what);
}

#[test]
fn two_ranks_train_like_one_device_on_the_global_batch() {
    assert_ranks_like_one_device(2, "even");
}

#[test]
fn two_ranks_of_two_towers_train_like_one_device() {
    assert_ranks_like_one_device(2, "two-towers");
}

#[test]
fn the_exchange_after_backward_trains_like_one_device() {
    assert_ranks_like_one_device(2, "even-blocking");
    assert_ranks_like_one_device(2, "two-towers-blocking");
}

#[test]
fn ranks_accumulating_micro_batches_train_like_one_device() {
    assert_ranks_like_one_device(2, "uneven-accumulate");
    assert_ranks_like_one_device(2, "two-towers-accumulate");
}

#[test]
fn the_ring_between_towers_is_refused_across_processes() {
    let config = TowersConfig::default().with_reduce(towers_multigpu::Reduce::AllReduce);
    let devices = parse_devices("flex,flex").unwrap();
    let towers = Towers::new(rank_zero_net(), sgd(), &devices, config).unwrap();
    let error = towers
        // One process alone: enough to reach the check, which comes before any exchange.
        .across_processes(Arc::new(SameRanks::new(1)))
        .unwrap_err()
        .to_string();
    assert_error_names(&error, &["ring all-reduce"]);
}

#[test]
fn uneven_rank_batches_weigh_each_example_the_same() {
    assert_ranks_like_one_device(2, "uneven");
}

#[test]
fn three_uneven_ranks_train_like_one_device() {
    assert_ranks_like_one_device(3, "three-uneven");
}

#[test]
fn two_ranks_with_batch_norm_train_like_two_towers() {
    let Some(got) = ranks_train(2, "bn") else {
        return;
    };
    let expected = two_towers_train(from_rank_zero_seed(BnNet::new), "bn", |m, x, y| {
        m.loss(x, y)
    });
    // Weights and running statistics: BnNet's values include both.
    assert_close(
        &got,
        &expected,
        TOLERANCE,
        "2 ranks vs 2 towers, batch norm",
    );
}

#[test]
fn a_late_rank_ends_the_job_with_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let Some(run) = mpirun(2, "late", 3, &dir.path().join("values")) else {
        return;
    };
    run.assert_failed_fast_saying(&["rank 1 never reached it"]);
}

#[test]
fn a_killed_rank_ends_the_job_with_its_name() {
    let dir = tempfile::tempdir().unwrap();
    // A long exchange timeout: the launcher, not the timeout, must end the job.
    let Some(run) = mpirun(2, "killed", 60, &dir.path().join("values")) else {
        return;
    };
    // Open MPI's words for it.
    run.assert_failed_fast_saying(&["process rank 1 with PID", "signal 9"]);
}

/// `scenario` on 2 ranks ends the job within seconds, its output holding each of `words`.
fn assert_job_ends_saying(scenario: &str, words: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let Some(run) = mpirun(2, scenario, 60, &dir.path().join("values")) else {
        return;
    };
    run.assert_failed_fast_saying(words);
}

#[test]
fn ranks_with_different_models_are_refused() {
    assert_job_ends_saying(
        "mismatch",
        &[
            "rank 0 refused",
            "rank 1 refused",
            "rank 1's model has 6 tensors of 977 values, rank 0's 4 of 837",
        ],
    );
}

#[test]
fn ranks_with_different_wire_formats_are_refused() {
    assert_job_ends_saying(
        "mismatch-wire",
        &[
            "rank 0 refused",
            "rank 1 refused",
            "wire format: rank 0 F32, rank 1 F16",
        ],
    );
}

#[test]
fn ranks_with_different_bucket_sizes_are_refused() {
    assert_job_ends_saying(
        "mismatch-bucket",
        &[
            "rank 0 refused",
            "rank 1 refused",
            "bucket bytes: rank 0 256, rank 1 512",
        ],
    );
}

#[test]
fn ranks_with_different_weight_decays_are_refused() {
    assert_job_ends_saying(
        "mismatch-decay",
        &[
            "rank 0 refused",
            "rank 1 refused",
            "weight decay: rank 0 none, rank 1 (tensor, decay) [(2, 0.5)]",
        ],
    );
}

/// Steps whose forward pass takes 3 s on every rank, under an exchange deadline of 2 s and
/// the exchange overlapped with backward (started before forward): the time each rank spends
/// making its own buckets does not count, and the ranks train like one device.
#[test]
fn a_ranks_own_slow_step_does_not_count_against_the_exchange_deadline() {
    assert_ranks_like_one_device(2, "slow-steps");
}

/// A first step of 3 s on rank 0 alone (its kernels compiled and tuned, the other rank's found
/// in its cache), under an exchange deadline of 2 s: the first exchange of each kind waits four
/// times the deadline, and the ranks train like one device, the exchange overlapped with
/// backward or after it.
#[test]
fn one_ranks_slow_first_step_does_not_time_out_the_others() {
    assert_ranks_like_one_device(2, "slow-first-step");
    assert_ranks_like_one_device(2, "slow-first-step-blocking");
}

/// Rank 1's third step takes 3 s, under an exchange deadline of 4 s: rank 0, waiting on it,
/// says so half-way (as Horovod's stall warnings), naming it and where it is, and the job trains
/// on like one device: under the overlapped exchange rank 1 has reached it (its header posted
/// before its loss), after backward it has not.
#[test]
fn a_rank_waited_on_for_half_the_deadline_is_named() {
    for (scenario, where_it_is) in [
        (
            "stalled-step",
            "rank 1 reached it but has not had all its buckets ready",
        ),
        ("stalled-step-blocking", "rank 1 has not reached it"),
    ] {
        let Some((got, output)) = ranks_train_saying(2, scenario) else {
            return;
        };
        for words in [
            // Of the gradients, or of whether each rank's step failed (after backward).
            "warning: rank 0: the exchange of ",
            &format!("has waited 2s: {where_it_is}"),
            "the job ends if it waits 4s",
        ] {
            assert!(output.contains(words), "{words:?} in {output}");
        }
        assert_eq!(output.matches("has waited").count(), 1, "{output}");
        let batches: Vec<HostBatch> = (sizes_of(scenario).iter().enumerate())
            .map(|(step, sizes)| global_batch(step, sizes))
            .collect();
        let (expected, _) = reference::plain_training(rank_zero_net(), &batches);
        assert_close(&got, &values(&expected), TOLERANCE, scenario);
    }
}

/// A bucket longer than its size (a caller's bug) ends the job naming it, before MPI would
/// write past the receive buffer.
#[test]
fn a_bucket_longer_than_its_size_ends_the_job() {
    assert_job_ends_saying(
        "wrong-length",
        &[
            "rank 1",
            "bucket 0 holds 1001 values, where its size is 1000",
        ],
    );
}

/// Rank 1 makes an exchange rank 0 does not: both post their next exchange's header, and the
/// job ends before either posts a collective the other would pair with another.
#[test]
fn ranks_out_of_step_end_the_job_naming_the_exchange() {
    assert_job_ends_saying(
        "out-of-step",
        &["does not match rank", "buckets of", "models differ"],
    );
}

/// Rank 1's tower fails at the second step, under the overlapped exchange (its weights'
/// bucket already posted): the step fails on both ranks, rank 0's error names rank 1's tower,
/// neither model changes, and the job goes on to train like one device.
#[test]
fn a_failed_tower_fails_the_step_on_every_rank() {
    let Some((got, output)) = ranks_train_saying(2, "tower-fails") else {
        return;
    };
    for words in [
        "rank 0: the step failed: across processes: another rank's step failed, so no rank \
         updated: rank 1: tower 0 on `flex` panicked: rank 1's tower fails",
        "rank 1: the step failed: tower 0 on `flex` panicked",
    ] {
        assert!(output.contains(words), "no `{words}` in:\n{output}");
    }
    let batches: Vec<HostBatch> = (EVEN.iter().enumerate())
        .map(|(step, sizes)| global_batch(step, sizes))
        .collect();
    let (expected, _) = reference::plain_training(rank_zero_net(), &batches);
    assert_close(&got, &values(&expected), TOLERANCE, "after a failed step");
}

/// Gradients beyond f16's range on the f16 wire, overlapped with backward and after it: both
/// ranks skip that update (checked on each rank), say so, and keep finite weights.
#[test]
fn an_overflowing_f16_wire_skips_the_update_on_every_rank() {
    for scenario in ["f16-overflow", "f16-overflow-blocking"] {
        let Some((got, output)) = ranks_train_saying(2, scenario) else {
            return;
        };
        for words in [
            "rank 0: skipped the overflowing update",
            "rank 1: skipped the overflowing update",
            "this update is skipped on every rank",
        ] {
            assert!(
                output.contains(words),
                "{scenario}: no `{words}` in:\n{output}"
            );
        }
        assert!(
            got.iter().all(|v| v.is_finite()),
            "{scenario}: weights not finite"
        );
    }
}

/// Rank `rank`'s gradients in the wire scenarios: two tensors over several 64-value buckets,
/// neither a multiple of the rank count, of magnitudes from 0.01 to 100.
fn wire_gradients(rank: usize) -> [Vec<f32>; 2] {
    let value = |i: usize| ((i as f32 * 0.37 + rank as f32).sin()) * 10f32.powi(i as i32 % 5 - 2);
    [(0..37).map(value).collect(), (37..337).map(value).collect()]
}

fn wire_weight(rank: usize) -> f32 {
    (rank + 2) as f32
}

fn values_of(t: Tensor<1>) -> Vec<f32> {
    t.into_data().try_to_vec().unwrap()
}

/// `x` rounded to bfloat16 (to nearest, ties to even), as f32.
fn bf16(x: f32) -> f32 {
    let bits = x.to_bits();
    f32::from_bits(bits.wrapping_add(0x7fff + ((bits >> 16) & 1)) & 0xffff_0000)
}

#[test]
fn bf16_gradients_travel_rounded_and_are_summed_in_f32() {
    let Some(got) = ranks_train(2, "wire-bf16") else {
        return;
    };
    let (a, b) = (wire_gradients(0).concat(), wire_gradients(1).concat());
    let (wa, wb) = (wire_weight(0), wire_weight(1));
    // Each rank's weighted values rounded, the sum in f32 rounded again, then the mean.
    let expected: Vec<f32> = (a.iter().zip(&b))
        .map(|(x, y)| bf16(bf16(wa * x) + bf16(wb * y)) / (wa + wb))
        .collect();
    assert_eq!(got, expected, "bf16 wire vs its formula");
    let worst = worst_error(&got, 8);
    assert!(
        worst > 0.1 && worst <= 2.0,
        "bf16 keeps 8 bits, rounded twice: {worst}"
    );
}

/// The largest error of the exchanged means `got` against the exact ones, in units of
/// `2^-bits` of the weighted values' magnitude: two roundings to `bits` bits of significand
/// (each rank's values, then their sum), each within half a unit in the last place, stay
/// within 2.
fn worst_error(got: &[f32], bits: i32) -> f64 {
    let (a, b) = (wire_gradients(0).concat(), wire_gradients(1).concat());
    let (wa, wb) = (wire_weight(0) as f64, wire_weight(1) as f64);
    (got.iter().zip(a.iter().zip(&b)))
        .map(|(&g, (&x, &y))| {
            let (x, y) = (wa * x as f64, wb * y as f64);
            let exact = (x + y) / (wa + wb);
            let unit = (x.abs() + y.abs()) / (wa + wb) * 2f64.powi(-bits);
            (g as f64 - exact).abs() / unit
        })
        .fold(0.0, f64::max)
}

#[test]
fn f16_gradients_keep_11_bits() {
    let Some(got) = ranks_train(2, "wire-f16") else {
        return;
    };
    let worst = worst_error(&got, 11);
    assert!(
        worst > 0.1 && worst <= 2.0,
        "f16 keeps 11 bits, rounded twice: {worst}"
    );
}

/// A panic on one rank while its buckets travel (making one of them) ends the job at once,
/// saying which rank, which exchange and the panic's message.
#[test]
fn a_panic_in_the_exchange_ends_the_job_saying_so() {
    assert_job_ends_saying(
        "panic-in-exchange",
        &[
            "rank 1: the exchange of two buckets (exchange 1) failed making bucket 1",
            "rank 1 cannot make bucket 1",
        ],
    );
}
