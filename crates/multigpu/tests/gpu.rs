//! Towers on a real GPU backend: `wgpu` (Mesa's lavapipe, a software Vulkan device, in CI; a GPU
//! wherever there is one), or the entry `TOWERS_GPU_DEVICE` names (`cuda:0`). Each result is compared with computations on flex: plain steps on
//! the whole batch, or, with batch norm, the same towers on flex.
//!
//! Tolerance: 1e-4 relative (to the larger of the value and 1). A GPU backend computes the same
//! f32 arithmetic with other kernels (convolution and matrix products tile and sum in their own
//! order), so each op differs from flex by a few ulps; two SGD steps with momentum at rate 0.1
//! carry those differences into the weights at about 1e-6..1e-5. Between CPU backends the
//! towers tests hold 1e-5.
//!
//! Run with `cargo test -p towers-multigpu --features wgpu,towers-kernels/wgpu --test
//! integration gpu::` (`--features cuda,towers-kernels/cuda` and `TOWERS_GPU_DEVICE=cuda:0` for
//! CUDA); without a device the tests print `SKIPPED` and pass, except under CI.
#![cfg(feature = "gpu")]

use burn::module::{Module, RunningState};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{Linear, LinearConfig, PaddingConfig2d};
use burn::tensor::{Device, Int, Tensor};
use towers_data::image_loss;
use towers_kernels::{Precision, with_precision};
use towers_models::{BasicConv, BasicConvConfig};
use towers_multigpu::{
    BatchNormSync, Error, Reduce, TowerDevice, TowerLoss, Towers, TowersConfig, parse_devices,
};
use towers_testing::batches::{batch, unequal_micro_batches};
use towers_testing::compare::{assert_close, max_abs_diff, values};
use towers_testing::gpu::gpu_or_skip;
use towers_testing::nets::{BnNet, LR, Net, sgd};
use towers_testing::reference::flex;
use towers_testing::towers::assert_like_one_device;
use towers_testing::within;

const TOLERANCE: f32 = 1e-4;

fn devices(list: &str) -> Vec<TowerDevice> {
    parse_devices(list).unwrap()
}

#[test]
fn one_and_two_gpu_towers_train_like_one_flex_device() {
    let Some(gpu) = gpu_or_skip("one_and_two_gpu_towers") else {
        return;
    };
    let model = Net::new(&flex());
    let updates = vec![vec![batch(12, 1)], vec![batch(12, 2)]];
    // The parameters live on the GPU: the update runs there.
    let on_gpu = model.clone().fork(&gpu.device);
    let towers = assert_like_one_device(
        &on_gpu,
        &devices(&gpu.list("GPU")),
        TowersConfig::default(),
        &updates,
        TOLERANCE,
    );
    assert_eq!(towers.model().devices(), vec![gpu.device.clone()]);
    for reduce in [Reduce::ParameterDevice, Reduce::AllReduce] {
        let config = TowersConfig::default().with_reduce(reduce);
        let list = devices(&gpu.list("GPU,GPU*2"));
        let towers = assert_like_one_device(&on_gpu, &list, config, &updates, TOLERANCE);
        assert_eq!(
            towers.model().devices(),
            vec![gpu.device.clone()],
            "{reduce:?}"
        );
    }
}

/// A tower tells whether it runs on Burn's fusion backend (then the ring passes its chunks
/// through host memory: chunk tensors handed between threads get lost there).
#[test]
fn a_gpu_tower_knows_whether_it_runs_on_burns_fusion_backend() {
    let Some(gpu) = gpu_or_skip("fusion_detected") else {
        return;
    };
    assert_eq!(devices(&gpu.entry)[0].is_fused(), cfg!(feature = "fusion"));
    assert!(!devices("flex")[0].is_fused());
}

#[test]
fn mixed_flex_and_gpu_towers_train_like_one_flex_device() {
    let Some(gpu) = gpu_or_skip("mixed_flex_and_gpu_towers") else {
        return;
    };
    let model = Net::new(&flex());
    let updates = vec![vec![batch(10, 3)], vec![batch(10, 4)]];
    for reduce in [Reduce::ParameterDevice, Reduce::AllReduce] {
        let config = TowersConfig::default().with_reduce(reduce);
        let list = devices(&gpu.list("flex*2,GPU*3"));
        let towers = assert_like_one_device(&model, &list, config, &updates, TOLERANCE);
        // Gradients computed on the GPU were moved to the model's device before the update.
        assert_eq!(towers.model().devices(), vec![flex()], "{reduce:?}");
    }
    // The parameter device need not be a tower.
    let list = devices(&gpu.list("GPU,GPU"));
    let towers =
        assert_like_one_device(&model, &list, TowersConfig::default(), &updates, TOLERANCE);
    assert_eq!(towers.model().devices(), vec![flex()]);
}

/// Gradients kept on a wgpu tower across micro-batches equal the reference. Before the towers
/// flushed each thread's queued work (see "Threads" in `towers`), they came out up to 13% off,
/// differently from run to run, on lavapipe.
#[test]
fn accumulated_micro_batches_on_a_gpu_train_like_one_larger_batch() {
    let Some(gpu) = gpu_or_skip("accumulated_micro_batches_on_a_gpu") else {
        return;
    };
    let model = Net::new(&flex());
    let updates = unequal_micro_batches();
    for reduce in [Reduce::ParameterDevice, Reduce::AllReduce] {
        let config = TowersConfig::default()
            .with_reduce(reduce)
            .with_accumulation(3);
        let list = devices(&gpu.list("GPU,flex"));
        assert_like_one_device(&model, &list, config, &updates, TOLERANCE);
    }
}

/// Inception's conv unit (conv, TF-slim's offset-only batch norm, ReLU) and a linear head.
#[derive(Module, Debug)]
struct InceptionUnit {
    conv: BasicConv,
    fc: Linear,
}

impl InceptionUnit {
    fn new(device: &Device) -> Self {
        // Momentum 0.1 instead of slim's 0.0003, so that two steps move the statistics visibly.
        // SAME: the GPU convolution's weight gradient reads windows over the padding (and in
        // CI's unfused run, by the windows kernel of `towers_kernels` itself, not deferred).
        let conv = BasicConvConfig::new([3, 4], [3, 3])
            .with_padding(PaddingConfig2d::Same)
            .with_momentum(0.1)
            .init(device);
        Self {
            conv,
            fc: LinearConfig::new(4 * 8 * 8, 5).init(device),
        }
    }

    fn loss(&self, x: Tensor<4>, y: Tensor<1, Int>) -> Tensor<1> {
        let logits = self.fc.forward(self.conv.forward(x).flatten::<2>(1, 3));
        CrossEntropyLossConfig::new()
            .init(&logits.device())
            .forward(logits, y)
    }

    fn running_stats(&self) -> Vec<f32> {
        let read = |s: &RunningState<Tensor<1>>| -> Vec<f32> {
            s.value().into_data().iter::<f32>().collect()
        };
        [
            read(&self.conv.bn.running_mean),
            read(&self.conv.bn.running_var),
        ]
        .concat()
    }
}

/// Two steps of a copy of `base` on towers over `list`; returns every copy's parameters and
/// running statistics (the model's first).
fn train_unit(
    base: &InceptionUnit,
    list: &str,
    model_device: &Device,
    config: TowersConfig,
) -> Vec<(Vec<f32>, Vec<f32>)> {
    // Clones share batch-norm buffers (see the Burn notes): `valid().train()` makes new ones.
    let model = base.clone().valid().train().fork(model_device);
    let mut towers = Towers::new(model, sgd(), &devices(list), config).unwrap();
    for seed in 0..2 {
        towers
            .step(
                &batch(8, seed),
                LR,
                image_loss(|m: &InceptionUnit, x, y| m.loss(x, y)),
            )
            .unwrap();
    }
    std::iter::once(towers.model())
        .chain(towers.replicas())
        .map(|m| (values(m), m.running_stats()))
        .collect()
}

#[test]
fn inception_batch_norm_statistics_sync_across_gpu_and_flex() {
    check_batch_norm_sync(
        "inception_batch_norm_statistics_sync",
        Reduce::ParameterDevice,
    );
}

/// The same under the ring, with the model on the GPU. Before the caller's thread flushed the
/// statistics it writes into the replicas, the next step read them late (5e-4 off on lavapipe).
#[test]
fn inception_batch_norm_statistics_sync_under_the_ring_across_gpu_and_flex() {
    check_batch_norm_sync("inception_batch_norm_under_the_ring", Reduce::AllReduce);
}

/// Two steps of an Inception conv unit on `GPU,flex*3` equal the same towers on flex, running
/// statistics included, under both batch-norm syncs.
fn check_batch_norm_sync(test: &str, reduce: Reduce) {
    let Some(gpu) = gpu_or_skip(test) else {
        return;
    };
    let base = InceptionUnit::new(&flex());
    for sync in [BatchNormSync::Average, BatchNormSync::FirstTower] {
        let config = TowersConfig::default()
            .with_reduce(reduce)
            .with_batch_norm(sync);
        // Slices of 2 and 6, as the flex towers test against fresh layers.
        let want = train_unit(&base, "flex,flex*3", &flex(), config.clone());
        let got = train_unit(&base, &gpu.list("GPU,flex*3"), &gpu.device, config);
        let what = format!("{reduce:?}, {sync:?}");
        let (start_params, start_stats) = (&want[0].0, &want[0].1);
        for (i, (params, stats)) in got.iter().enumerate() {
            let copy = format!("{what}, copy {i}");
            assert_close(params, start_params, TOLERANCE, &format!("{copy}, params"));
            assert_close(stats, start_stats, TOLERANCE, &format!("{copy}, stats"));
        }
        let fresh = [vec![0.0; 4], vec![1.0; 4]].concat();
        let moved = max_abs_diff(start_stats, &fresh);
        assert!(moved > 1e-2, "{what}: the statistics moved ({moved})");
    }
}

#[test]
fn a_failing_gpu_tower_is_named_and_the_towers_recover() {
    let Some(gpu) = gpu_or_skip("a_failing_gpu_tower") else {
        return;
    };
    let model = Net::new(&flex());
    for reduce in [Reduce::ParameterDevice, Reduce::AllReduce] {
        let config = TowersConfig::default().with_reduce(reduce);
        let list = devices(&gpu.list("flex,GPU"));
        let mut towers = Towers::new(model.clone(), sgd(), &list, config).unwrap();
        let (towers, result) = within(120, move || {
            let loss = image_loss(|m: &Net, x: Tensor<4>, y| {
                // A shape error on the GPU tower only.
                let x = if x.device() == flex() {
                    x
                } else {
                    x.narrow(3, 0, 7)
                };
                m.loss(x, y)
            });
            let result = towers.step(&batch(8, 11), LR, loss);
            (towers, result)
        });
        match result {
            Err(Error::TowerPanicked { tower, device, .. }) => {
                assert_eq!(
                    (tower, device.as_str()),
                    (1, gpu.entry.as_str()),
                    "{reduce:?}"
                )
            }
            other => panic!("{reduce:?}: expected tower 1 on the GPU to panic, got {other:?}"),
        }
        let mut towers = towers;
        let good = batch(8, 12);
        towers
            .step(&good, LR, image_loss(|m: &Net, x, y| m.loss(x, y)))
            .unwrap();
        let (expected, _) =
            towers_testing::reference::plain_training(model.clone(), std::slice::from_ref(&good));
        assert_close(
            &values(towers.model()),
            &values(&expected),
            TOLERANCE,
            "after the failure",
        );
    }
}

/// 200 micro-batches (100 updates, 2 micro-batches each) of a batch-norm net under the ring on
/// `GPU,flex` and `flex,GPU` end where the same towers on flex end: every tensor a tower's
/// thread hands to another (ring chunks, gathered statistics, kept gradients) is handed over
/// first. Prints how far the replicas drifted apart (the GPU rounds its update otherwise).
///
/// At rate 0.01 the runs differ by rounding only (~1e-7 after 200 steps on lavapipe). At the
/// tests' usual 0.1 with momentum 0.9 this net on random labels is chaotic past ~100 updates:
/// flex,flex and flex,ndarray then end 3.4 apart, GPU or not.
#[test]
fn two_hundred_mixed_steps_under_the_ring_match_flex() {
    let Some(gpu) = gpu_or_skip("two_hundred_mixed_steps") else {
        return;
    };
    let config = TowersConfig::default()
        .with_reduce(Reduce::AllReduce)
        .with_accumulation(2)
        .with_replica_check(0);
    let base = BnNet::new(&flex());
    let run = |list: &str| {
        // `valid().train()`: batch-norm buffers of its own (clones share them).
        let model = base.clone().valid().train();
        let mut towers = Towers::new(model, sgd(), &devices(list), config.clone()).unwrap();
        for step in 0..200 {
            let loss = image_loss(|m: &BnNet, x, y| m.loss(x, y));
            towers.step(&batch(8, step), 0.01, loss).unwrap();
        }
        let check = towers.check_replicas().unwrap();
        (values(towers.model()), check)
    };
    let (want, _) = run("flex,flex");
    for list in [gpu.list("GPU,flex"), gpu.list("flex,GPU")] {
        let (got, check) = run(&list);
        println!("{list}: after 100 updates the replicas differ by {check:?}");
        assert_close(&got, &want, TOLERANCE, &list);
    }
}

/// A conv net whose convolution and dense layer go through `towers_models`' products, so that
/// they follow the thread's precision: images `[n, 3, 8, 8]`, 5 classes.
#[derive(Module, Debug)]
struct MixedNet {
    conv: burn::nn::conv::Conv2d,
    fc: Linear,
}

impl MixedNet {
    fn new(device: &Device) -> Self {
        Self {
            conv: burn::nn::conv::Conv2dConfig::new([3, 8], [3, 3]).init(device),
            fc: LinearConfig::new(8 * 6 * 6, 5).init(device),
        }
    }

    /// The loss in f32 from products in `precision`, times `factor`.
    fn loss(
        &self,
        x: Tensor<4>,
        y: Tensor<1, Int>,
        precision: Precision,
        factor: f32,
    ) -> Tensor<1> {
        let logits = self.logits(x, precision);
        let loss = CrossEntropyLossConfig::new().init(&logits.device());
        loss.forward(logits, y) * factor
    }

    /// The logits in f32 from products in `precision`.
    fn logits(&self, x: Tensor<4>, precision: Precision) -> Tensor<2> {
        with_precision(precision, || {
            let x = burn::tensor::activation::relu(towers_kernels::conv2d(&self.conv, x));
            towers_kernels::linear(&self.fc, x.flatten::<2>(1, 3))
        })
    }
}

/// The largest difference between the logits of `a` in f16 and of `b` in f32 on `images`,
/// relative to the largest logit.
fn f16_logits_gap(a: &MixedNet, b: &MixedNet, images: &towers_data::HostBatch) -> f32 {
    let logits = |m: &MixedNet, precision| -> Vec<f32> {
        let (x, _) = images.as_slice().to_tensors(&m.fc.weight.val().device());
        let logits = m.logits(x, precision).into_data();
        logits.try_to_vec::<f32>().unwrap()
    };
    let (half, full) = (logits(a, Precision::F16), logits(b, Precision::F32));
    let largest = full.iter().fold(0f32, |m, v| m.max(v.abs()));
    max_abs_diff(&half, &full) / largest
}

/// f16 products with dynamic loss scaling on two GPU towers: the first loss is f32's on flex
/// to f16's rounding; on one batch, repeated, the loss falls as f32's does; a step whose loss is
/// forced to overflow is skipped on both replicas, halving the scale.
#[test]
fn f16_training_with_loss_scaling_on_gpu_towers_follows_f32() {
    let Some(gpu) = gpu_or_skip("f16_training_with_loss_scaling") else {
        return;
    };
    let model = MixedNet::new(&flex());
    // Not f16's default of 65536: this net's inputs reach 5 and its random start varies from
    // run to run, so at 65536 a fully-connected weight's gradient (16 items × up to 65536/16 ×
    // an activation of several units) can pass f16's 65504 and skip a step, as it should.
    // At 1024 the margin is 64x.
    let scaling = towers_multigpu::LossScaling::new()
        .with_initial(1024.0)
        .with_growth_interval(1000);
    let config = TowersConfig::default().with_loss_scaling(Some(scaling));
    let on_gpu = model.clone().fork(&gpu.device);
    let mut half = Towers::new(on_gpu, sgd(), &devices(&gpu.list("GPU,GPU")), config).unwrap();
    let mut full = Towers::new(model, sgd(), &devices("flex"), TowersConfig::default()).unwrap();
    let step = |towers: &mut Towers<MixedNet>, precision, factor: f32| {
        let loss = move |m: &MixedNet, x, y| m.loss(x, y, precision, factor);
        towers.step(&batch(16, 5), LR, image_loss(loss)).unwrap()
    };
    let losses = |towers: &mut Towers<MixedNet>, precision| -> Vec<f64> {
        (0..15)
            .map(|_| step(towers, precision, 1.0))
            .inspect(|o| assert!(!o.skipped))
            .map(|o| o.loss)
            .collect()
    };
    // f16's 11-bit significand shows in the logits (80 of them, unlike the mean loss, whose
    // rounding errors may cancel): the products do run in f16, and only to its rounding.
    let gap = f16_logits_gap(half.model(), full.model(), &batch(16, 5));
    assert!(gap > 1e-5 && gap < 1e-2, "logits: f16 off f32 by {gap}");
    let (h, f) = (
        losses(&mut half, Precision::F16),
        losses(&mut full, Precision::F32),
    );
    assert!(
        (h[0] - f[0]).abs() < 1e-2 * f[0],
        "first loss: f16 {} against f32 {}",
        h[0],
        f[0]
    );
    assert!(
        h[14] < 0.5 * h[0] && f[14] < 0.5 * f[0],
        "f16 {h:?}, f32 {f:?}"
    );
    let before: Vec<_> = half.replicas().iter().map(values).collect();
    let out = step(&mut half, Precision::F16, f32::INFINITY);
    assert!(out.skipped);
    assert_eq!(half.loss_scale(), Some(512.0));
    let after: Vec<_> = half.replicas().iter().map(values).collect();
    assert_eq!(after, before, "both replicas as they were");
}

/// One wide layer: a weight of 600 x 1000 values, past what one of Burn's reductions sums on
/// lavapipe, whose kernels stop their loops after 65,535 iterations (see `loss_scale.rs`,
/// `finite_probe`).
#[derive(Module, Debug)]
struct Wide {
    layer: Linear,
}

/// Under loss scaling on a GPU, a gradient that overflows only in the last place of a wide
/// weight skips the update and leaves the weights as they were. With the overflow check's sum
/// taken by one of Burn's reductions, lavapipe left that place out, and the infinity reached
/// the weights.
#[test]
fn an_overflow_in_the_last_place_of_a_wide_gradient_skips_the_update() {
    let Some(gpu) = gpu_or_skip("an_overflow_in_the_last_place") else {
        return;
    };
    let model = Wide {
        layer: LinearConfig::new(600, 1000)
            .with_bias(false)
            .init(&gpu.device),
    };
    let before = values(&model);
    let scaling = towers_multigpu::LossScaling::new().with_initial(1024.0);
    let config = TowersConfig::default().with_loss_scaling(Some(scaling));
    let mut towers = Towers::new(model, sgd(), &devices(&gpu.entry), config).unwrap();
    // The last weight times a factor whose gradient, scaled, is infinite; the loss stays finite.
    let loss = |m: &Wide, _: &[u8], _: &Device| {
        let last = m
            .layer
            .weight
            .val()
            .slice([599..600, 999..1000])
            .reshape([1]);
        TowerLoss::new(last.mul_scalar(1e36))
    };
    let out = towers.step(&vec![0u8; 2], LR, loss).unwrap();
    assert!(out.skipped, "the overflow went unseen: {out:?}");
    assert_eq!(values(towers.model()), before, "the weights as they were");
}

/// A machine on which wgpu finds no Vulkan driver is refused when its device list is parsed,
/// and `--list-devices` says why: wgpu then falls back to OpenGL (Mesa's llvmpipe here), on which
/// Burn's kernels do not compile and the first step used to hang for good. Without OpenGL
/// either, no adapter is left: refused too. Each in a child process (this test binary again)
/// whose Vulkan loader finds no driver file, as it reads them when the process starts; the
/// second also without EGL's vendor libraries, where libglvnd provides EGL.
#[cfg(feature = "wgpu")]
#[test]
fn a_machine_without_a_vulkan_driver_is_refused_when_its_devices_are_parsed() {
    let name = "a_machine_without_a_vulkan_driver_is_refused_when_its_devices_are_parsed";
    if towers_testing::child::role().is_some() {
        let listed = towers_multigpu::list_devices();
        let wgpu = listed.iter().find(|l| l.backend == "wgpu").unwrap();
        println!("LISTED: {:?}", wgpu.devices);
        match parse_devices("wgpu") {
            Ok(_) => println!("OPENED"),
            Err(e) => println!("REFUSED: {e}"),
        }
        return;
    }
    let none = "/nonexistent/driver.json";
    let run = |egl: Option<&str>| {
        let mut command = towers_testing::child::child(
            &towers_testing::test_name!(name),
            "without-vulkan",
            &[],
            "",
        );
        command
            .env("VK_ICD_FILENAMES", none)
            .env("VK_DRIVER_FILES", none);
        if let Some(egl) = egl {
            command.env("__EGL_VENDOR_LIBRARY_FILENAMES", egl);
        }
        let out = within(120, move || command.output().unwrap());
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    };
    let refusals = ["only OpenGL adapters (", "this machine has no wgpu adapter"];
    for stdout in [run(None), run(Some(none))] {
        let refused = stdout.lines().find_map(|l| l.strip_prefix("REFUSED: "));
        let refused = refused.unwrap_or_else(|| panic!("not refused: {stdout}"));
        assert!(refused.contains("libvulkan1"), "{refused}");
        let why = refusals.iter().find(|why| refused.contains(**why));
        assert!(why.is_some(), "{refused}");
        // (libtest's `test NAME ... ` may come first on the line.)
        let listed = stdout.lines().find(|l| l.contains("LISTED: Unavailable"));
        assert!(listed.is_some_and(|l| l.contains(why.unwrap())), "{stdout}");
    }
}
