//! Towers against independent computations: plain single-device Burn steps for the
//! parameters, fresh `BatchNorm` layers for the running statistics (towers-testing).

use std::sync::{Arc, Mutex};

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor};
use towers_data::image_loss;
use towers_multigpu::{
    BatchNormSync, Error, ErrorChain, Reduce, Towers, TowersConfig, parse_devices,
};
use towers_testing::assert_error_names;
use towers_testing::batches::{batch, concat, split, unequal_micro_batches};
use towers_testing::compare::{assert_close, values};
use towers_testing::nets::{BnNet, LR, Net, sgd};
use towers_testing::processes::SameRanks;
use towers_testing::reference::{expected_stats, flex, plain_training, stats_of};
use towers_testing::towers::assert_like_one_device;
use towers_testing::within;

/// CPU backends agree to float rounding: the towers only sum in another order.
const TOLERANCE: f32 = 1e-5;

#[test]
fn one_tower_on_the_model_device_is_a_plain_step() {
    let model = Net::new(&flex());
    let batches = [batch(8, 1), batch(8, 2)];
    let mut towers = Towers::new(
        model.clone(),
        sgd(),
        &parse_devices("flex").unwrap(),
        TowersConfig::default(),
    )
    .unwrap();
    for b in &batches {
        towers
            .step(b, LR, image_loss(|m: &Net, x, y| m.loss(x, y)))
            .unwrap();
    }
    let (expected, _) = plain_training(model, &batches);
    assert_eq!(
        values(towers.model()),
        values(&expected),
        "bitwise the same"
    );
}

#[test]
fn two_and_three_towers_train_like_one_device() {
    let model = Net::new(&flex());
    let updates = vec![vec![batch(12, 1)], vec![batch(12, 2)]];
    for reduce in [Reduce::ParameterDevice, Reduce::AllReduce] {
        let config = TowersConfig::default().with_reduce(reduce);
        // Equal slices (6 + 6, 4 + 4 + 4), then unequal ones (2 + 4 + 6).
        for list in ["flex,flex", "flex,flex,flex", "flex*1,flex*2,flex*3"] {
            let devices = parse_devices(list).unwrap();
            assert_like_one_device(&model, &devices, config.clone(), &updates, TOLERANCE);
        }
    }
}

#[test]
fn accumulated_micro_batches_train_like_one_larger_batch() {
    let model = Net::new(&flex());
    let updates = unequal_micro_batches();
    for reduce in [Reduce::ParameterDevice, Reduce::AllReduce] {
        let config = TowersConfig::default()
            .with_reduce(reduce)
            .with_accumulation(3);
        for list in ["flex", "flex,flex", "flex,flex*2"] {
            let devices = parse_devices(list).unwrap();
            assert_like_one_device(&model, &devices, config.clone(), &updates, TOLERANCE);
        }
    }
}

#[test]
fn a_cycle_ended_early_updates_with_the_micro_batches_it_holds() {
    let model = Net::new(&flex());
    // Cycles of 3 micro-batches; the second ended after 2, the third after 1.
    let updates = [
        vec![batch(4, 5), batch(6, 6), batch(4, 7)],
        vec![batch(6, 8), batch(4, 9)],
        vec![batch(4, 10)],
    ];
    let whole: Vec<_> = updates.iter().map(|u| concat(u)).collect();
    let (expected, _) = plain_training(model.clone(), &whole);
    for reduce in [Reduce::ParameterDevice, Reduce::AllReduce] {
        let config = TowersConfig::default()
            .with_reduce(reduce)
            .with_accumulation(3);
        for list in ["flex", "flex,flex"] {
            let devices = parse_devices(list).unwrap();
            let mut towers = Towers::new(model.clone(), sgd(), &devices, config.clone()).unwrap();
            for update in &updates[..] {
                for (i, micro) in update.iter().enumerate() {
                    let last = i + 1 == update.len();
                    if last && update.len() < 3 {
                        towers.end_cycle_early();
                    }
                    let loss = image_loss(|m: &Net, x, y| m.loss(x, y));
                    let output = towers.step(micro, LR, loss).unwrap();
                    assert_eq!(output.updated, last, "{list}, {reduce:?}: micro-batch {i}");
                }
            }
            let what = format!("{list}, {reduce:?}");
            assert_close(
                &values(towers.model()),
                &values(&expected),
                TOLERANCE,
                &what,
            );
        }
    }
}

#[test]
fn batch_norm_statistics_are_averaged_over_towers() {
    let device = flex();
    for reduce in [Reduce::ParameterDevice, Reduce::AllReduce] {
        for sync in [BatchNormSync::Average, BatchNormSync::FirstTower] {
            let config = TowersConfig::default()
                .with_reduce(reduce)
                .with_batch_norm(sync);
            // Slices of 2 and 6: an unweighted mean, or one tower's, would differ.
            let devices = parse_devices("flex,flex*3").unwrap();
            let mut towers = Towers::new(BnNet::new(&device), sgd(), &devices, config).unwrap();
            let mut expected = (vec![0.0; 3], vec![1.0; 3]);
            for seed in 0..2 {
                let b = batch(8, seed);
                towers
                    .step(&b, LR, image_loss(|m: &BnNet, x, y| m.loss(x, y)))
                    .unwrap();
                let slices = split(&b, &[2, 6]);
                expected = match sync {
                    BatchNormSync::Average => expected_stats(&expected, &slices),
                    BatchNormSync::FirstTower => expected_stats(&expected, &slices[..1]),
                    other => unreachable!("{other:?} is not among the tested syncs"),
                };
                let what = format!("{reduce:?}, {sync:?}, step {seed}");
                for (i, model) in std::iter::once(towers.model())
                    .chain(towers.replicas())
                    .enumerate()
                {
                    let (mean, var) = stats_of(model);
                    assert_close(
                        &mean,
                        &expected.0,
                        TOLERANCE,
                        &format!("{what}, copy {i}, mean"),
                    );
                    assert_close(
                        &var,
                        &expected.1,
                        TOLERANCE,
                        &format!("{what}, copy {i}, var"),
                    );
                }
            }
            assert!(expected.0[2] > 0.2, "the statistics moved: {expected:?}");
        }
    }
}

/// This thread's id in `/proc/self/task`.
fn thread_id() -> String {
    let link = std::fs::read_link("/proc/thread-self").unwrap();
    link.file_name().unwrap().to_string_lossy().into_owned()
}

/// A tower that panics fails the step by name and leaves the model as it was; its worker
/// thread serves the next step, and every worker ends when the towers drop. Tower 0 on the
/// model's device runs on the calling thread under the parameter device, on a worker under
/// the ring.
#[test]
fn a_failing_tower_ends_the_step_with_its_device_and_its_worker_serves_on() {
    let model = Net::new(&flex());
    let good = batch(8, 11);
    let failing = batch(8, 12);
    for reduce in [Reduce::ParameterDevice, Reduce::AllReduce] {
        // Slices of 2, 4 and 2 examples: the loss function tells tower 1 by its slice.
        let devices = parse_devices("flex,flex*2,flex").unwrap();
        let config = TowersConfig::default().with_reduce(reduce);
        let mut towers = Towers::new(model.clone(), sgd(), &devices, config).unwrap();
        let threads = Arc::new(Mutex::new(Vec::new()));
        let seen = threads.clone();
        let failing = failing.clone();
        let (towers, result, caller) = within(60, move || {
            let loss = image_loss(|m: &Net, x: Tensor<4>, y| {
                seen.lock().unwrap().push(thread_id());
                // A shape error on one tower only: the linear layer gets the wrong width.
                let x = if x.dims()[0] == 4 {
                    x.narrow(3, 0, 7)
                } else {
                    x
                };
                m.loss(x, y)
            });
            let result = towers.step(&failing, LR, loss);
            (towers, result, thread_id())
        });
        match result {
            Err(Error::TowerPanicked { tower, device, .. }) => {
                assert_eq!((tower, device.as_str()), (1, "flex"), "{reduce:?}")
            }
            other => panic!("{reduce:?}: expected tower 1 to panic, got {other:?}"),
        }
        let mut failed_on = std::mem::take(&mut *threads.lock().unwrap());
        assert_eq!(failed_on.len(), 3, "every tower ran");
        let on_caller = usize::from(reduce == Reduce::ParameterDevice);
        failed_on.retain(|id| id != &caller);
        assert_eq!(failed_on.len(), 3 - on_caller, "{reduce:?}: workers");

        // Nothing of the failed step was kept: the next one is one plain step, on the same
        // workers.
        let mut towers = towers;
        towers
            .step(
                &good,
                LR,
                image_loss(|m: &Net, x, y| {
                    threads.lock().unwrap().push(thread_id());
                    m.loss(x, y)
                }),
            )
            .unwrap();
        let (expected, _) = plain_training(model.clone(), std::slice::from_ref(&good));
        assert_close(
            &values(towers.model()),
            &values(&expected),
            TOLERANCE,
            "after a failure",
        );
        let mut served = threads.lock().unwrap().clone();
        served.retain(|id| id != &thread_id());
        failed_on.sort();
        served.sort();
        assert_eq!(served, failed_on, "{reduce:?}: the same worker threads");
        drop(towers);
        for id in &served {
            // `drop` joined the thread; the kernel lists an exited thread in /proc until it
            // has reaped it, a moment later (seen once in ten runs of the whole suite).
            let task = format!("/proc/self/task/{id}");
            let gone = (0..100).any(|_| {
                let gone = !std::path::Path::new(&task).exists();
                if !gone {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                gone
            });
            assert!(gone, "{reduce:?}: tower thread {id} outlived the towers");
        }
    }
}

/// Tower 0, on the model's device, runs on the calling thread under the parameter device: a
/// panic there fails the step by name as a worker's does, leaves the model as it was, and the
/// next step runs.
#[test]
fn a_panic_in_tower_0_on_the_calling_thread_fails_the_step_by_name() {
    let devices = parse_devices("flex,flex").unwrap();
    let config = TowersConfig::default();
    let mut towers = Towers::new(Net::new(&flex()), sgd(), &devices, config).unwrap();
    let before = values(towers.model());
    let here = std::thread::current().id();
    let failing = image_loss(|m: &Net, x, y| {
        if towers_multigpu::current_tower() == Some(0) {
            assert_ne!(std::thread::current().id(), here, "tower 0 fails here");
        }
        m.loss(x, y)
    });
    let err = towers.step(&batch(8, 1), LR, failing).unwrap_err();
    assert!(
        matches!(&err, Error::TowerPanicked { tower: 0, message, .. }
            if message.contains("tower 0 fails here")),
        "{err}"
    );
    assert_eq!(values(towers.model()), before, "no update");
    let out = towers.step(&batch(8, 2), LR, image_loss(|m: &Net, x, y| m.loss(x, y)));
    assert!(out.unwrap().updated);
}

/// The loss function's own error comes back as the step's `source()`, as the value it was: the
/// caller can match its kind.
#[test]
fn a_loss_function_error_ends_the_step_with_its_device() {
    let model = Net::new(&flex());
    for reduce in [Reduce::ParameterDevice, Reduce::AllReduce] {
        // Slices of 2, 2 and 4 examples: the loss function tells tower 2 by its slice.
        let devices = parse_devices("flex,flex,flex*2").unwrap();
        let config = TowersConfig::default().with_reduce(reduce);
        let mut towers = Towers::new(model.clone(), sgd(), &devices, config).unwrap();
        let result = within(60, move || {
            let loss = image_loss(|m: &Net, x: Tensor<4>, y| {
                if x.dims()[0] == 4 {
                    Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        "labels out of range",
                    ))
                } else {
                    Ok(m.loss(x, y).loss)
                }
            });
            towers.step(&batch(8, 13), LR, loss)
        });
        match result {
            Err(Error::TowerFailed {
                tower,
                device,
                error,
            }) => {
                assert_eq!((tower, device.as_str()), (2, "flex"));
                let kind = error.downcast_ref::<std::io::Error>().map(|e| e.kind());
                assert_eq!(kind, Some(std::io::ErrorKind::InvalidData), "{error}");
                assert_eq!(error.to_string(), "labels out of range");
            }
            other => panic!("{reduce:?}: expected tower 2 to fail, got {other:?}"),
        }
    }
}

#[test]
fn misuse_is_an_error() {
    let model = Net::new(&flex());
    let three = parse_devices("flex,flex,flex").unwrap();
    let mut towers = Towers::new(model.clone(), sgd(), &three, TowersConfig::default()).unwrap();
    let err = towers
        .step(&batch(2, 0), LR, image_loss(|m: &Net, x, y| m.loss(x, y)))
        .unwrap_err();
    assert!(matches!(err, Error::Batch(_)), "{err}");

    // Per-example values instead of the mean loss.
    let err = towers
        .step(
            &batch(6, 0),
            LR,
            image_loss(|m: &Net, x, y| {
                let (logits, _) = m.loss(x, y).predictions.unwrap();
                logits.flatten::<1>(0, 1)
            }),
        )
        .unwrap_err();
    assert!(
        matches!(&err, Error::TowerFailed { error, .. } if error.to_string().contains("shape [1]")),
        "{err}"
    );

    // A metric that is not a mean fails the step before its update, tower 0's too, whose
    // values (on the model's device, its thread the caller's) are read after the update.
    let before = values(towers.model());
    let err = towers
        .step(
            &batch(6, 0),
            LR,
            image_loss(|m: &Net, x, y| {
                let out = m.loss(x, y);
                let loss = out.loss.clone().detach();
                out.with_metric("pair", Tensor::cat(vec![loss.clone(), loss], 0))
            }),
        )
        .unwrap_err();
    assert!(
        matches!(&err, Error::TowerFailed { tower: 0, error, .. }
            if error.to_string().contains("metric `pair` has shape [2]")),
        "{err}"
    );
    assert_eq!(values(towers.model()), before, "no update");

    let plain = Net::new(&Device::flex());
    let err = Towers::new(plain, sgd(), &three, TowersConfig::default()).unwrap_err();
    assert!(matches!(err, Error::Config(_)), "{err}");
    let err = Towers::new(
        model,
        sgd(),
        &three,
        TowersConfig::default().with_accumulation(0),
    )
    .unwrap_err();
    assert!(matches!(err, Error::Config(_)), "{err}");
}

/// The gradients of `grads` for the parameters of `module`, flattened in visiting order.
fn gradient_values<M: Module>(module: &M, grads: &GradientsParams) -> Vec<f32> {
    struct Values<'a>(&'a GradientsParams, Vec<f32>);
    impl ModuleVisitor for Values<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let g = self.0.get::<D>(param.id).expect("a gradient per parameter");
            self.1.extend(g.to_data().iter::<f32>());
        }
    }
    let mut v = Values(grads, Vec::new());
    module.visit(&mut v);
    v.1
}

#[test]
fn towers_report_each_towers_loss_and_keep_the_applied_gradient_when_asked() {
    let model = Net::new(&flex());
    let b = batch(12, 1);
    let (x, y) = b.as_slice().to_tensors(&flex());
    let loss = model.loss(x, y).loss;
    let full = loss.clone().into_scalar::<f32>() as f64;
    let want = gradient_values(
        &model,
        &GradientsParams::from_grads(loss.backward(), &model),
    );
    let halves: Vec<f64> = split(&b, &[6, 6])
        .iter()
        .map(|h| {
            let (x, y) = h.as_slice().to_tensors(&flex());
            model.loss(x, y).loss.into_scalar::<f32>() as f64
        })
        .collect();
    for list in ["flex", "flex,flex"] {
        let mut towers = Towers::new(
            model.clone(),
            sgd(),
            &parse_devices(list).unwrap(),
            TowersConfig::default(),
        )
        .unwrap();
        towers.keep_gradients();
        let out = towers
            .step(&b, LR, image_loss(|m: &Net, x, y| m.loss(x, y)))
            .unwrap();
        let kept = towers.take_gradients().expect("kept");
        assert_close(&gradient_values(&model, &kept), &want, TOLERANCE, list);
        let expected_losses = if list == "flex" {
            vec![full]
        } else {
            halves.clone()
        };
        assert_close(
            &out.tower_losses
                .iter()
                .map(|&l| l as f32)
                .collect::<Vec<_>>(),
            &expected_losses
                .iter()
                .map(|&l| l as f32)
                .collect::<Vec<_>>(),
            TOLERANCE,
            "tower losses",
        );
        towers
            .step(&b, LR, image_loss(|m: &Net, x, y| m.loss(x, y)))
            .unwrap();
        assert!(towers.take_gradients().is_none(), "kept once, when asked");
    }
}

/// One step of `Net` on batch `seed` of 8.
fn net_step(towers: &mut Towers<Net>, seed: usize) -> towers_multigpu::StepOutput {
    let loss = image_loss(|m: &Net, x, y| m.loss(x, y));
    towers.step(&batch(8, seed), LR, loss).unwrap()
}

/// Adds `delta` to the first value of the first trainable tensor it maps.
struct Nudge {
    delta: f32,
    done: bool,
}

impl burn::module::ModuleMapper for Nudge {
    fn map_float<const D: usize>(
        &mut self,
        param: burn::module::Param<burn::tensor::Tensor<D>>,
    ) -> burn::module::Param<burn::tensor::Tensor<D>> {
        if self.done || !param.val().is_require_grad() {
            return param;
        }
        self.done = true;
        let (id, value, mapper) = param.consume();
        let mut bump = vec![0.0; value.shape().num_elements()];
        bump[0] = self.delta;
        let bump = burn::tensor::Tensor::<1>::from_floats(bump.as_slice(), &value.device());
        let nudged = (value.clone().detach() + bump.reshape(value.dims())).detach();
        let nudged = nudged.require_grad();
        burn::module::Param::from_mapped_value(id, nudged, mapper)
    }
}

/// Under the ring, replicas on one backend stay equal bit for bit. A replica forced apart (one
/// value of replica 1 nudged) is seen by the check, which gives it replica 0's weights, after
/// which the replicas agree exactly and train on together. (Replicas on two backends, which
/// may drift by rounding: `gpu::two_hundred_mixed_steps_under_the_ring_match_flex`.)
#[test]
fn replicas_are_checked_and_resynced() {
    let config = TowersConfig::default()
        .with_reduce(Reduce::AllReduce)
        .with_replica_check(0);
    let devices = parse_devices("flex,flex").unwrap();
    let mut towers = Towers::new(Net::new(&flex()), sgd(), &devices, config.clone()).unwrap();
    for step in 0..30 {
        let out = net_step(&mut towers, step);
        assert_eq!(out.replica_check, None, "checks are off");
    }
    let first = towers.check_replicas().unwrap();
    assert_eq!(first.max_difference, 0.0, "after 30 updates");
    assert!(!first.rebroadcast);
    assert_eq!(values(&towers.replicas()[1]), values(&towers.replicas()[0]));

    towers.map_replica(1, |replica| {
        replica.map(&mut Nudge {
            delta: 0.25,
            done: false,
        })
    });
    assert_ne!(values(&towers.replicas()[1]), values(&towers.replicas()[0]));
    let forced = towers.check_replicas().unwrap();
    assert!(forced.rebroadcast, "{forced:?}");
    assert!(forced.max_difference >= 0.24, "{forced:?}");
    assert_eq!(
        values(&towers.replicas()[1]),
        values(&towers.replicas()[0]),
        "replica 1 re-synced"
    );
    assert_eq!(towers.check_replicas().unwrap().max_difference, 0.0);
    // The re-synced replicas train on together.
    net_step(&mut towers, 30);
    assert_eq!(towers.check_replicas().unwrap().max_difference, 0.0);

    // Every n-th update checks by itself.
    let config = config.with_replica_check(2);
    let mut towers = Towers::new(Net::new(&flex()), sgd(), &devices, config).unwrap();
    let checked: Vec<bool> = (0..4)
        .map(|step| net_step(&mut towers, step).replica_check.is_some())
        .collect();
    assert_eq!(checked, [false, true, false, true]);
}

/// A replica whose read fails (its device lost: here, a parameter whose lazy initialisation
/// panics) ends the replica check with an error naming its tower and the panic, not with the
/// panic itself; the caller that cannot go on without the check gets a panic saying as much.
#[test]
fn a_replica_check_whose_read_fails_names_the_tower() {
    struct LoseDevice;
    impl burn::module::ModuleMapper for LoseDevice {
        fn map_float<const D: usize>(
            &mut self,
            param: burn::module::Param<burn::tensor::Tensor<D>>,
        ) -> burn::module::Param<burn::tensor::Tensor<D>> {
            let (id, value, _) = param.consume();
            let lost = |_: &burn::tensor::Device, _: bool| -> burn::tensor::Tensor<D> {
                panic!("device lost")
            };
            burn::module::Param::uninitialized(id, lost, value.device(), true, value.shape())
        }
    }
    let config = TowersConfig::default().with_reduce(Reduce::AllReduce);
    let devices = parse_devices("flex,flex").unwrap();
    let mut towers = Towers::new(Net::new(&flex()), sgd(), &devices, config).unwrap();
    net_step(&mut towers, 0);
    towers.map_replica(1, |replica| replica.map(&mut LoseDevice));
    let error = towers.try_check_replicas().unwrap_err();
    let message = ErrorChain(&error).to_string();
    assert!(
        matches!(error, Error::TowerFailed { tower: 1, .. }),
        "{message}"
    );
    assert_error_names(&message, &["replica check", "device lost"]);
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| towers.check_replicas()));
    let panic = panic.expect_err("a panic without the check");
    let said = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    // (The parameter's initialisation is spent: its second read panics with Burn's words.)
    assert_error_names(&said, &["tower 1", "replica check"]);
}

/// The exchange overlapped with backward, in process: 1 and 2 towers, with and without
/// accumulation, train like one device; a tower that panics mid-step ends the step with its
/// device and leaves the model as it was, without waiting forever for its buckets.
#[test]
fn the_overlapped_exchange_trains_like_one_device_and_survives_a_failing_tower() {
    let model = Net::new(&flex());
    let updates = vec![vec![batch(12, 1)], vec![batch(12, 2)]];
    let (expected, _) = plain_training(model.clone(), &updates.concat());
    for (list, accumulation) in [("flex", 1), ("flex,flex", 1), ("flex*1,flex*2", 2)] {
        let config = TowersConfig::default()
            .with_overlap(true)
            .with_accumulation(accumulation);
        let devices = parse_devices(list).unwrap();
        // A second rank holding this one's gradients: the mean is this rank's own.
        let ranks = Arc::new(SameRanks::new(2));
        let mut towers = Towers::new(model.clone(), sgd(), &devices, config)
            .unwrap()
            .across_processes(ranks.clone())
            .unwrap();
        for update in &updates {
            let parts = if accumulation == 1 {
                update.clone()
            } else {
                split(&update[0], &[5, 7])
            };
            for part in &parts {
                towers
                    .step(part, LR, image_loss(|m: &Net, x, y| m.loss(x, y)))
                    .unwrap();
            }
        }
        let what = format!("{list}, accumulation {accumulation}, overlapped");
        assert_close(
            &values(towers.model()),
            &values(&expected),
            TOLERANCE,
            &what,
        );
        // Two updates: each the weights' bucket and at least one of gradients.
        let buckets = ranks.buckets();
        assert!(
            buckets >= 4,
            "{what}: {buckets} buckets through the exchange"
        );
        // Tower 0 panics in its forward pass: the step fails, naming it; nothing changed.
        let before = values(towers.model());
        let failing = |m: &Net, x, y| {
            if towers_multigpu::current_tower() == Some(0) {
                panic!("tower 0 fails");
            }
            m.loss(x, y)
        };
        for _ in 0..accumulation {
            let error = towers.step(&batch(12, 3), LR, image_loss(failing));
            match error {
                Err(Error::TowerPanicked { tower: 0, .. }) => {}
                other => panic!("{what}: {other:?}"),
            }
        }
        assert_eq!(
            values(towers.model()),
            before,
            "{what}: the model is unchanged"
        );
    }
}

/// The gradient an exchange across ranks hands the update holds plain tensors, as backward's
/// does (`GradientsParams::from_grads`), not tensors of the model's autodiff device: the fused
/// optimizer updates take only plain ones (Inception v3's update ran through Burn's ops
/// instead: 32-38 ms a step against 21-27, `bench_mpi`, 2026-11-29). Exchanged after
/// backward and overlapped, on one tower and two.
#[test]
fn gradients_exchanged_across_ranks_are_plain_tensors_as_backwards_are() {
    for (list, overlap) in [
        ("flex", false),
        ("flex", true),
        ("flex,flex", false),
        ("flex,flex", true),
    ] {
        let devices = parse_devices(list).unwrap();
        let config = TowersConfig::default().with_overlap(overlap);
        let mut towers = Towers::new(Net::new(&flex()), sgd(), &devices, config)
            .unwrap()
            .across_processes(Arc::new(SameRanks::new(2)))
            .unwrap();
        let mut autodiff = Vec::new();
        let loss = image_loss(|m: &Net, x, y| m.loss(x, y));
        let note = |model: Net, grads: GradientsParams| {
            struct Autodiff<'a>(&'a GradientsParams, &'a mut Vec<String>);
            impl ModuleVisitor for Autodiff<'_> {
                fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
                    let g = self.0.get::<D>(param.id).expect("a gradient per parameter");
                    if g.device().is_autodiff() {
                        self.1.push(format!("{:?}", g.dims()));
                    }
                }
            }
            model.visit(&mut Autodiff(&grads, &mut autodiff));
            model
        };
        towers.step_with_update(&batch(12, 1), loss, note).unwrap();
        assert!(
            autodiff.is_empty(),
            "{list}, overlap {overlap}: gradients on the autodiff device: {autodiff:?}"
        );
    }
}

/// A tower slower than the deadline is named on stderr (`... still running its step after
/// ...`) and waited for: the step still completes, with both towers' results. The step runs in
/// a child process (this test binary again), whose stderr is read.
#[test]
fn a_tower_past_the_deadline_is_named_and_waited_for() {
    if let Some(role) = towers_testing::child::role() {
        let slow_tower: usize = role.trim_start_matches("slow tower ").parse().unwrap();
        let config =
            TowersConfig::default().with_tower_deadline(std::time::Duration::from_millis(10));
        let devices = parse_devices("flex,flex").unwrap();
        let mut towers = Towers::new(Net::new(&flex()), sgd(), &devices, config).unwrap();
        let slow = |m: &Net, x, y| {
            if towers_multigpu::current_tower() == Some(slow_tower) {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            m.loss(x, y)
        };
        let out = towers.step(&batch(8, 1), LR, image_loss(slow)).unwrap();
        assert_eq!(out.tower_losses.len(), 2);
        assert!(out.updated);
        return;
    }
    let name = towers_testing::test_name!("a_tower_past_the_deadline_is_named_and_waited_for");
    // Tower 0, on the model's device, runs on the calling thread, watched from its worker.
    for (slow, fast) in [(1, 0), (0, 1)] {
        let child = towers_testing::child::child(&name, &format!("slow tower {slow}"), &[], "")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&child.stderr);
        assert!(child.status.success(), "{stderr}");
        assert!(
            stderr.contains(&format!(
                "warning: towers: tower {slow} (flex) still running its step after"
            )),
            "{stderr}"
        );
        assert!(
            !stderr.contains(&format!("tower {fast} (flex) still running")),
            "only the slow one: {stderr}"
        );
    }
}

/// Past `tower_timeout`, a tower that never finishes ends the process with an error naming it
/// instead of hanging it. The hanging step runs in a child process: this test binary again.
#[test]
fn a_tower_past_the_timeout_ends_the_process_naming_it() {
    const CHILD: &str = "TOWERS_TEST_HANGING_TOWER";
    let name = "a_tower_past_the_timeout_ends_the_process_naming_it";
    if std::env::var_os(CHILD).is_some() {
        let config = TowersConfig::default()
            .with_tower_deadline(std::time::Duration::from_millis(50))
            .with_tower_timeout(Some(std::time::Duration::from_millis(300)));
        let devices = parse_devices("flex,flex").unwrap();
        let mut towers = Towers::new(Net::new(&flex()), sgd(), &devices, config).unwrap();
        let hanging = |m: &Net, x, y| {
            if towers_multigpu::current_tower() == Some(1) {
                std::thread::sleep(std::time::Duration::from_secs(600));
            }
            m.loss(x, y)
        };
        let _ = towers.step(&batch(8, 1), LR, image_loss(hanging));
        unreachable!("the step never returns");
    }
    let started = std::time::Instant::now();
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            &towers_testing::test_name!(name),
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&child.stderr);
    assert_eq!(
        child.status.code(),
        Some(towers_multigpu::HUNG_TOWER_EXIT_CODE),
        "{stderr}"
    );
    assert!(
        stderr.contains("warning: towers: tower 1 (flex) still running its step"),
        "{stderr}"
    );
    assert!(
        stderr.contains("error: towers: tower 1 (flex) still running its step")
            && stderr.contains("tower_timeout"),
        "{stderr}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(300));
}
