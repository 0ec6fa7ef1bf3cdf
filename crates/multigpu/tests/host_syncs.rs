//! A step's host syncs (`towers_multigpu::host_syncs`): one read per tower, whatever the loss
//! reports beside the loss (the count of correct predictions, metrics), one more per replica
//! when the replicas are compared, and no flush of a device that computes in host memory, nor,
//! on a GPU, of the model's device when tower 0 runs there. The counts are process-wide, so
//! each case runs in a child process (this test binary again) where no other test runs.

use burn::tensor::{Device, Tensor};
use towers_data::image_loss;
use towers_multigpu::{HostSyncs, Reduce, Towers, TowersConfig, host_syncs, parse_devices};
use towers_testing::batches::batch;
use towers_testing::nets::{LR, Net, sgd};
use towers_testing::reference::flex;

/// The reads and flushes of 3 steps (after one uncounted) on `list` with `config`, the model
/// on `main`; the loss reports accuracy and one metric, so three values per tower are read.
fn syncs_of_three_steps(list: &str, config: TowersConfig, main: &Device) -> HostSyncs {
    let devices = parse_devices(list).unwrap();
    let mut towers = Towers::new(Net::new(main), sgd(), &devices, config).unwrap();
    let loss = image_loss(|m: &Net, x, y| {
        let out = m.loss(x, y);
        let doubled: Tensor<1> = out.loss.clone().detach().mul_scalar(2.0);
        out.with_metric("doubled", doubled)
    });
    let out = towers.step(&batch(8, 0), LR, &loss).unwrap();
    assert_eq!(
        out.metrics[0].1,
        2.0 * out.loss,
        "the metric read beside the loss"
    );
    let before = host_syncs();
    for seed in 1..=3 {
        towers.step(&batch(8, seed), LR, &loss).unwrap();
    }
    host_syncs().since(before)
}

#[test]
fn one_read_per_tower_and_step() {
    if towers_testing::child::role().is_some() {
        let all_reduce = TowersConfig::default().with_reduce(Reduce::AllReduce);
        // (devices, config, reads per step)
        let cases = [
            ("flex", TowersConfig::default(), 1),
            ("flex,flex", TowersConfig::default(), 2),
            ("flex,flex", all_reduce.clone(), 2),
            // The replicas compared after each update: each read once more, whole.
            ("flex,flex", all_reduce.with_replica_check(1), 4),
        ];
        for (list, config, reads) in cases {
            let what = format!("{list}, {:?}, 3 steps", config.reduce);
            let syncs = syncs_of_three_steps(list, config, &flex());
            assert_eq!(syncs.reads, 3 * reads, "{what}: {syncs:?}");
            assert_eq!(syncs.flushes, 0, "{what}: flex queues nothing: {syncs:?}");
        }
        return;
    }
    passes_in_a_child(&towers_testing::test_name!("one_read_per_tower_and_step"));
}

/// On a GPU, where each thread queues its own work (Burn's fusion) and a tensor one thread
/// made must be handed over before another uses it: with the model on the GPU, tower 0 runs
/// on the calling thread and reads its values last, after the update, so that read hands the
/// update over too and no step flushes (the one sync per tower and step).
#[cfg(feature = "gpu")]
#[test]
fn on_a_gpu_with_the_model_there_one_read_per_tower_and_no_flush() {
    let test = "gpu_one_read_per_tower";
    if towers_testing::child::role().is_some() {
        let Some(gpu) = towers_testing::gpu::gpu_or_skip(test) else {
            return;
        };
        for (list, reads) in [("GPU", 1), ("GPU,GPU", 2), ("GPU,GPU,GPU", 3)] {
            let list = gpu.list(list);
            let syncs = syncs_of_three_steps(&list, TowersConfig::default(), &gpu.device);
            assert_eq!(syncs.reads, 3 * reads, "{list}: {syncs:?}");
            assert_eq!(syncs.flushes, 0, "{list}: {syncs:?}");
        }
        return;
    }
    passes_in_a_child(&towers_testing::test_name!(
        "on_a_gpu_with_the_model_there_one_read_per_tower_and_no_flush"
    ));
}

/// Runs test `name` again in a child process, where no other test counts, and checks that it
/// passed; a skip's message is passed on.
fn passes_in_a_child(name: &str) {
    let child = towers_testing::child::child(name, "counts", &[], "")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&child.stdout);
    let err = String::from_utf8_lossy(&child.stderr);
    assert!(child.status.success(), "{out}\n{err}");
    if err.contains("SKIPPED") {
        eprintln!("{err}");
    }
}
