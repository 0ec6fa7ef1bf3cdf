//! Forward and forward+backward time per image of the CIFAR-10 net (batch 128), Inception v3
//! (batch 32, 299x299), ResNet-50 and ResNet-18 (batch 32, 224x224, torchvision's layout on
//! `towers_kernels::nn`'s drop-in layers; ResNet-50 in Keras's layout too, the network of TF
//! Keras's `ResNet50`, and Keras's `ResNet50V2`), MobileNetV2, MobileNetV3-Large and
//! EfficientNet-B0 (batch 32, 224x224, Keras's layout; MobileNetV3-Large and EfficientNet-B0
//! in torchvision's too) on the default CPU backend
//! (flex), or on the device `TOWERS_BENCH_DEVICE` names.
//!
//! `cargo run --release -p towers-bench --bin bench_models [REPS] [MODEL] [PRECISION]` (default 3
//! timed runs after [`WARM_UP`] calls; `MODEL` `cifar10`, `inception`, `resnet50`,
//! `resnet50-keras`, `resnet50v2`, `resnet18`, `mobilenet_v2`, `mobilenet_v3_large`,
//! `mobilenet_v3_large-torchvision`, `efficientnet_b0` or `efficientnet_b0-torchvision`
//! and `PRECISION` `f32` or `bf16` run only those rows, e.g. under a profiler;
//! `TOWERS_BENCH_BATCH` replaces every row's batch).
//! Forward is the evaluation forward (`valid()` model: no autodiff, batch norm on moving
//! averages); the train step is the training loss, its backward pass and a plain SGD update,
//! the weight decay's gradient added in the update as the trainer adds it
//! (`ImageClassifier::loss_decay_in_update`, `OptimizerConfig::init_with_weight_decays`).
//! Each row twice: products in f32 and in bf16 (`towers_kernels::with_precision`), alternating.
//! On a CubeCL device, the train step's kernel launches too (`launches/step`; the step makes one
//! host sync, its closing `sync`).
//!
//! `bench_models 1 MODEL counts [BATCH] [IMAGE_SIZE]` (built with a GPU backend) times nothing:
//! it lists the kernels one f32 train step of MODEL launches, per kernel and per phase (the
//! loss's forward pass, the backward pass, the update with the running state folded in as the
//! towers fold it), and with fusion the same launches by
//! fusion's block (`fusion_blocks.rs`), after two steps that tune; BATCH and
//! (Inception's) IMAGE_SIZE replace the rows' 32 and 299 (lavapipe: Inception at 299 and batch 32
//! passes its workgroup limit, see the guide's chapter 3).

use towers_bench::{batch, bench_device, classifier_batch, init_on, reps, trainers_sgd};

use burn::optim::GradientsParams;
use burn::tensor::Device;
use std::time::Instant;
use towers_kernels::{Precision, bf16_kernel, with_precision};
use towers_models::{
    Cifar10Config, EfficientNetConfig, ImageClassifier, InceptionV3Config, MobileNetLayout,
    MobileNetV2Config, MobileNetV3Config, ResNet18, ResNet50, ResNetConfig, ResNetV2Config,
};

fn main() {
    let reps = reps(3);
    let (entry, device) = bench_device();
    device.seed(0);
    let only = |n: usize| std::env::args().nth(n);
    if only(3).as_deref() == Some("counts") {
        let model = only(2).expect("counts needs a MODEL");
        let number = |n: usize, default| only(n).map_or(default, |v| v.parse().expect("a number"));
        println!(
            "device: {entry}; kernel launches of one f32 train step (batch {}):",
            number(4, 32)
        );
        return phase_counts::run(&model, number(4, 32), number(5, 299), &device);
    }
    let kernel = bf16_kernel();
    println!(
        "device: {entry}, {reps} timed runs after {WARM_UP} warm-up calls; bf16 products on {kernel}"
    );
    println!(
        "{:<34} {:>6} {:>18} {:>24} {:>16}",
        "model", "batch", "forward ms/image", "train step ms/image", "launches/step"
    );
    let precisions = match only(3).as_deref() {
        None => vec![Precision::F32, Precision::Bf16],
        Some("f32") => vec![Precision::F32],
        Some("bf16") => vec![Precision::Bf16],
        Some(other) => panic!("PRECISION is f32 or bf16, not {other}"),
    };
    let (precisions, lacking): (Vec<_>, Vec<_>) =
        (precisions.into_iter()).partition(|p| p.supported_on(&device));
    for precision in lacking {
        println!("no {precision} rows: {entry} has no {precision} type (wgpu's WGSL has no bf16)");
    }
    let model = only(2);
    let runs = |name: &str| model.as_deref().is_none_or(|m| m == name);
    if runs("cifar10") {
        let cifar = init_on(&device, |d| Cifar10Config::new().init(d));
        println!("{}", cifar.summary());
        bench("CIFAR-10 net, 24x24", cifar, batch(128), reps, &precisions);
    }
    if runs("inception") {
        let inception = init_on(&device, |d| InceptionV3Config::new(1001).init(d));
        println!("{}", inception.summary());
        bench(
            "Inception v3, 299x299",
            inception,
            batch(32),
            reps,
            &precisions,
        );
    }
    if runs("resnet50") {
        let resnet: ResNet50 = init_on(&device, |d| ResNetConfig::resnet50(1000).init(d));
        bench("ResNet-50, 224x224", resnet, batch(32), reps, &precisions);
    }
    if runs("resnet50-keras") {
        let resnet: ResNet50 = init_on(&device, |d| ResNetConfig::keras_resnet50(1000).init(d));
        bench(
            "ResNet-50 Keras, 224x224",
            resnet,
            batch(32),
            reps,
            &precisions,
        );
    }
    if runs("resnet50v2") {
        let resnet = init_on(&device, |d| ResNetV2Config::resnet50v2(1000).init(d));
        bench("ResNet50V2, 224x224", resnet, batch(32), reps, &precisions);
    }
    if runs("resnet18") {
        let resnet: ResNet18 = init_on(&device, |d| ResNetConfig::resnet18(1000).init(d));
        bench("ResNet-18, 224x224", resnet, batch(32), reps, &precisions);
    }
    if runs("mobilenet_v2") {
        let mobilenet = init_on(&device, |d| MobileNetV2Config::keras(1000).init(d));
        bench(
            "MobileNetV2 Keras, 224x224",
            mobilenet,
            batch(32),
            reps,
            &precisions,
        );
    }
    if runs("mobilenet_v3_large") {
        let config = MobileNetV3Config::large().with_layout(MobileNetLayout::Keras);
        let name = "MobileNetV3-Large Keras, 224x224";
        bench(
            name,
            init_on(&device, |d| config.init(d)),
            batch(32),
            reps,
            &precisions,
        );
    }
    if runs("mobilenet_v3_large-torchvision") {
        let name = "MobileNetV3-Large, 224x224";
        bench(
            name,
            init_on(&device, |d| MobileNetV3Config::large().init(d)),
            batch(32),
            reps,
            &precisions,
        );
    }
    if runs("efficientnet_b0") {
        let efficientnet = init_on(&device, |d| EfficientNetConfig::keras(1000).init(d));
        bench(
            "EfficientNet-B0 Keras, 224x224",
            efficientnet,
            batch(32),
            reps,
            &precisions,
        );
    }
    if runs("efficientnet_b0-torchvision") {
        let efficientnet = init_on(&device, |d| EfficientNetConfig::new().init(d));
        let name = "EfficientNet-B0, 224x224";
        bench(name, efficientnet, batch(32), reps, &precisions);
    }
    // Nothing in flight at exit: a model initialised for rows no precision runs (bf16 on wgpu)
    // leaves its kernels compiling on the device's thread, and on lavapipe a process exiting
    // then runs LLVM's destructors under the shader compiler: `free(): invalid pointer` or a
    // segfault in about one exit in ten (CI of stop 98).
    device.sync().expect("the device finishes its queued work");
}

/// Rows for `model` with products in each of `precisions`, alternating run by run.
fn bench<M: ImageClassifier>(
    name: &str,
    model: M,
    batch: usize,
    reps: usize,
    precisions: &[Precision],
) {
    let train_device = model.devices()[0].clone();
    let eval_device = train_device.clone().without_autodiff();

    let eval = model.valid();
    let (eval_images, _) = classifier_batch(&model, batch, &eval_device);
    let forward = time(reps, precisions, || {
        let logits = eval.forward(eval_images.clone());
        let _: Vec<f32> = logits.into_data().try_to_vec().unwrap();
    });

    let (train_images, labels) = classifier_batch(&model, batch, &train_device);
    let mut optim = trainers_sgd(&model);
    let mut trained = Some(model);
    let mut train_step = || {
        let model = trained.take().unwrap();
        let loss = (model.loss_decay_in_update(train_images.clone(), labels.clone())).loss;
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        trained = Some(optim.step(0.01, model, grads));
        train_device.sync().unwrap();
    };
    let train = time(reps, precisions, &mut train_step);
    let launches = launches_per_step(&train_device, precisions, &mut train_step);

    let per_image = |secs: f64| secs * 1e3 / batch as f64;
    for (i, precision) in precisions.iter().enumerate() {
        let launches = launches[i].map_or("-".to_string(), |n| n.to_string());
        println!(
            "{:<34} {batch:>6} {:>18.2} {:>24.2} {launches:>16}",
            format!("{name} ({precision})"),
            per_image(forward[i]),
            per_image(train[i])
        );
    }
}

/// The train step's kernel launches in each precision, one more call each after the timed ones
/// (the count is the same from step to step once tuned), by CubeCL's launch observer: only on a
/// CubeCL device (`None` elsewhere, and in builds without a GPU backend).
#[cfg(feature = "gpu")]
fn launches_per_step(
    device: &Device,
    precisions: &[Precision],
    mut step: impl FnMut(),
) -> Vec<Option<u64>> {
    use burn::backend::DispatchDevice;
    use towers_bench::step_counts::count;
    if !matches!(
        device.clone().inner().as_dispatch(),
        DispatchDevice::Cube(_)
    ) {
        return vec![None; precisions.len()];
    }
    let counted = |&precision: &Precision| {
        Some(with_precision(precision, || {
            count(1, &mut step).total_launches()
        }))
    };
    precisions.iter().map(counted).collect()
}

/// The `counts` mode of the module docs.
#[cfg(feature = "gpu")]
mod phase_counts {
    use super::*;
    use towers_bench::step_counts::{StepCounts, count};

    /// Per-phase launches of one train step of `model` (a row's name, as `MODEL` takes it).
    pub(super) fn run(model: &str, batch: usize, image_size: usize, device: &Device) {
        match model {
            "cifar10" => phases(device, batch, |d| Cifar10Config::new().init(d)),
            "inception" => phases(device, batch, |d| {
                (InceptionV3Config::new(1001).with_image_size(image_size)).init(d)
            }),
            "resnet50" => {
                phases::<ResNet50>(device, batch, |d| ResNetConfig::resnet50(1000).init(d))
            }
            "resnet50-keras" => phases::<ResNet50>(device, batch, |d| {
                ResNetConfig::keras_resnet50(1000).init(d)
            }),
            "resnet50v2" => phases(device, batch, |d| ResNetV2Config::resnet50v2(1000).init(d)),
            "resnet18" => {
                phases::<ResNet18>(device, batch, |d| ResNetConfig::resnet18(1000).init(d))
            }
            "mobilenet_v2" => phases(device, batch, |d| MobileNetV2Config::keras(1000).init(d)),
            "efficientnet_b0" => phases(device, batch, |d| EfficientNetConfig::keras(1000).init(d)),
            other => panic!(
                "MODEL is cifar10, inception, resnet50, resnet50-keras, resnet50v2, resnet18, \
                 mobilenet_v2 or efficientnet_b0, not {other}"
            ),
        }
    }

    /// Counts a step of the model `build` makes on `device` (its weights drawn on flex:
    /// `init_on`).
    fn phases<M: ImageClassifier>(device: &Device, batch: usize, build: impl FnOnce(&Device) -> M) {
        let model = init_on(device, build);
        let device = device.clone();
        let (images, labels) = classifier_batch(&model, batch, &device);
        let mut optim = trainers_sgd(&model);
        let sync = || device.sync().expect("the device's queued work");
        let mut model = Some(model);
        // Two steps that tune, then one counted phase by phase.
        for counted in [false, false, true] {
            let report = |phase: &str, counts: StepCounts| {
                if counted {
                    show(phase, counts);
                }
            };
            let mut loss = None;
            let net = model.take().expect("the model between steps");
            report(
                "forward (the loss)",
                count(1, || {
                    let loss_now = net.loss_decay_in_update(images.clone(), labels.clone());
                    loss = Some(loss_now.loss);
                    sync();
                }),
            );
            let mut grads = None;
            report(
                "backward",
                count(1, || {
                    let loss = loss.take().expect("the forward phase's loss");
                    grads = Some(GradientsParams::from_grads(loss.backward(), &net));
                    sync();
                }),
            );
            let mut updated = None;
            report(
                "update (plain SGD), running state folded in",
                count(1, || {
                    let grads = grads.take().expect("the backward phase's gradients");
                    let net = optim.step(0.01, net.clone(), grads);
                    // The batch norms' moving averages folded in, as the towers fold each
                    // replica's in after its step (`valid()`: Burn's `RunningState` keeps an
                    // update pending until then), so the next forward pass reads them as they
                    // are.
                    drop(net.valid());
                    updated = Some(net);
                    sync();
                }),
            );
            model = updated;
        }
    }

    fn show(phase: &str, counts: StepCounts) {
        println!("{phase}: {} launches", counts.total_launches());
        for (kernel, launches) in counts.by_short_name() {
            println!("    {launches:>6}  {kernel}");
        }
        if !counts.by_block.is_empty() {
            println!("  the same launches by fusion's block, per operation run alone:");
        }
        for (block, launches) in &counts.by_block {
            println!("    {launches:>6}  {block}");
        }
    }
}

/// Without a GPU backend there is nothing to count.
#[cfg(not(feature = "gpu"))]
mod phase_counts {
    pub(super) fn run(_: &str, _: usize, _: usize, _: &burn::tensor::Device) {
        println!("counts: built without a GPU backend, no kernel launch to count");
    }
}

/// Without a GPU backend there is no launch to count.
#[cfg(not(feature = "gpu"))]
fn launches_per_step(_: &Device, precisions: &[Precision], _: impl FnMut()) -> Vec<Option<u64>> {
    vec![None; precisions.len()]
}

/// Untimed calls before the timed ones, each precision. Our train step reaches its pace at the
/// fourth: on a Zen 5, Inception v3's f32 step took 187, 105, 89, then 84-85 ms per image, bf16
/// 117, 72, 64, then 60-62 (TF's is steady from its second); the evaluation forward from its
/// first.
const WARM_UP: usize = 3;

/// Mean seconds per call of `f` in each precision over `reps` calls, the precisions taking
/// turns, after [`WARM_UP`] untimed calls each.
fn time(reps: usize, precisions: &[Precision], mut f: impl FnMut()) -> Vec<f64> {
    let mut total = vec![0.0; precisions.len()];
    for rep in 0..WARM_UP + reps {
        for (i, &precision) in precisions.iter().enumerate() {
            let start = Instant::now();
            with_precision(precision, &mut f);
            if rep >= WARM_UP {
                total[i] += start.elapsed().as_secs_f64();
            }
        }
    }
    total.iter().map(|t| t / reps as f64).collect()
}
