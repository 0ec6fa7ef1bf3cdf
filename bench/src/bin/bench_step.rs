//! Where the CIFAR-10 tutorial net's training step (batch 128, with LRN) spends its time, on
//! the default CPU backend (flex) or the device `TOWERS_BENCH_DEVICE` names; the peer is
//! `bench/peers/tf_cifar10_step.py`, which times TF's layers the same way.
//!
//! `cargo run --release -p towers-bench --bin bench_step [REPS] [f32|bf16|counts]` (default 20;
//! medians after a warm-up). With a precision, only the whole step (2 below) in that precision,
//! alone in the process, as the peer's `--whole-step-only --precision` runs TF's. With
//! `counts` (built with a GPU backend), only 4 below.
//!
//! 1. Each layer in isolation: forward alone, then forward and backward (the gradient of the
//!    output's sum with respect to the layer's weights and, except for conv1, whose input is
//!    the images, its input); backward is the difference.
//! 2. The whole net: loss forward, forward+backward, and the full step with the trainer's
//!    optimizer (plain SGD, TF's) and the loss read back, with products in f32 and in bf16
//!    (`towers_kernels::with_precision`) alternating call by call; the layers of 1 in bf16 too.
//! 3. Other formulations of the layers whose cost is ours to choose, each against the one the
//!    model uses, in rows that alternate call by call.
//! 4. On a CubeCL device (built with a GPU backend): the step as the trainer runs it (`Towers`,
//!    the trainer's loss), on 1 tower and on 2 towers of the same device, counted over REPS
//!    steps after one: `launches per step: N` (kernel launches, CubeCL's launch observer) and
//!    `host syncs per step per tower: S` (reads and flushes, `towers_multigpu::host_syncs`),
//!    then the launches per step of each kernel, most launched first, and with fusion the same
//!    launches by fusion's block: a block of one operation by that operation's name, larger
//!    ones together (`fusion_blocks.rs`).

use std::time::{Duration, Instant};

use towers_bench::layer_timing::{Layer, alternatives_rows, layer_table};
use towers_bench::{bench_device, cifar_batch, init_on, median, reps};

use burn::nn::PaddingConfig2d;
use burn::nn::pool::{MaxPool2d, MaxPool2dConfig};
use burn::optim::{GradientsParams, ModuleOptimizer};
use burn::tensor::activation::relu;
use burn::tensor::ops::PadMode;
use burn::tensor::{Device, Int, Tensor, s};
use towers_kernels::{
    Precision, bf16_kernel, conv_images, conv2d, conv2d_relu, max_pool2d, with_precision,
};
use towers_models::{Cifar10Config, Cifar10Net, ImageClassifier};
use towers_train::OptimizerConfig;

fn main() {
    let reps = reps(20);
    let (entry, device) = bench_device();
    device.seed(0);
    let net = init_on(&device, |d| Cifar10Config::new().init(d));
    println!("CIFAR-10 tutorial net, batch 128, {entry}, median of {reps} calls, ms");
    let mode = std::env::args().nth(2);
    if mode.as_deref() == Some("counts") {
        return step_counts(&net, &entry, reps, &device);
    }
    if let Some(precision) = mode {
        let precision = precision
            .parse()
            .unwrap_or_else(|e| panic!("PRECISION: {e}"));
        return whole_step(net, reps, &device, &[precision]);
    }
    layer_table(layers(&net), reps, &device);
    println!("\nthe same layers, products in bf16:");
    with_precision(Precision::Bf16, || layer_table(layers(&net), reps, &device));
    whole_step(
        net.clone(),
        reps,
        &device,
        &[Precision::F32, Precision::Bf16],
    );

    println!("\nformulations (the model's first), same input, alternating calls:");
    for group in alternatives(&net) {
        alternatives_rows(&group, reps, &device);
    }
    step_counts(&net, &entry, reps, &device);
}

/// 4 of the module docs: what the trainer's step costs the host, on 1 and 2 towers.
#[cfg(feature = "gpu")]
fn step_counts(net: &Cifar10Net, entry: &str, steps: usize, device: &Device) {
    use towers_bench::step_counts::count;
    use towers_data::image_loss;
    use towers_multigpu::{TowerLoss, Towers, TowersConfig, parse_devices};

    let batch = cifar_batch(128, device);
    // As the trainer's step: the weight decay's gradient added in the update.
    let loss = image_loss(|m: &Cifar10Net, x, y| TowerLoss::new(m.loss_decay_in_update(x, y).loss));
    let decays = net.weight_decays_by_id();
    println!("\nthe trainer's step (Towers, plain SGD), {steps} steps after one, per step:");
    for list in [entry.to_string(), format!("{entry},{entry}")] {
        let devices = parse_devices(&list).expect("TOWERS_BENCH_DEVICE");
        let sgd = OptimizerConfig::Sgd.init_with_weight_decays(&decays);
        let mut towers = Towers::new(net.clone(), sgd, &devices, TowersConfig::default())
            .expect("towers on TOWERS_BENCH_DEVICE");
        let mut step = || {
            towers.step(&batch, 0.1, &loss).expect("a step");
        };
        step();
        let counts = count(steps, step);
        let per_step = |n: u64| n as f64 / steps as f64;
        println!(
            "{list}: launches per step: {:.0}",
            per_step(counts.total_launches())
        );
        let syncs = counts.syncs;
        println!(
            "{list}: host syncs per step per tower: {:.2} (per step: {:.1} reads, {:.1} flushes)",
            per_step(syncs.total()) / devices.len() as f64,
            per_step(syncs.reads),
            per_step(syncs.flushes),
        );
        for (kernel, launches) in counts.by_short_name() {
            println!("    {:>6.1}  {kernel}", per_step(launches));
        }
        if !counts.by_block.is_empty() {
            println!("{list}: the same launches by fusion's block, per operation run alone:");
        }
        for (block, launches) in &counts.by_block {
            println!("    {:>6.1}  {block}", per_step(*launches));
        }
    }
}

/// Without a GPU backend there are no kernel launches to count.
#[cfg(not(feature = "gpu"))]
fn step_counts(_: &Cifar10Net, _: &str, _: usize, _: &Device) {}

fn layers(net: &Cifar10Net) -> Vec<Layer<'_>> {
    // Dense layers take [n, features, 1, 1], flattened: the reshape is free.
    let flat = |x: Tensor<4>| x.flatten::<2>(1, 3);
    vec![
        Layer::new("conv1 + relu", [128, 3, 24, 24], false, |x| {
            conv2d_relu(&net.conv1, x).sum()
        }),
        Layer::new("pool1", [128, 64, 24, 24], true, |x| {
            max_pool2d(&net.pool1, x).sum()
        }),
        Layer::new("norm1 (LRN)", [128, 64, 12, 12], true, |x| {
            net.norm1.forward(x).sum()
        }),
        Layer::new("conv2 + relu", [128, 64, 12, 12], true, |x| {
            conv2d_relu(&net.conv2, x).sum()
        }),
        Layer::new("norm2 (LRN)", [128, 64, 12, 12], true, |x| {
            net.norm2.forward(x).sum()
        }),
        Layer::new("pool2", [128, 64, 12, 12], true, |x| {
            max_pool2d(&net.pool2, x).sum()
        }),
        Layer::new("NHWC flatten + local3 + relu", [128, 64, 6, 6], true, |x| {
            relu(
                net.local3
                    .forward(x.permute([0, 2, 3, 1]).flatten::<2>(1, 3)),
            )
            .sum()
        }),
        Layer::new("local4 + relu", [128, 384, 1, 1], true, move |x| {
            relu(net.local4.forward(flat(x))).sum()
        }),
        Layer::new("softmax_linear", [128, 192, 1, 1], true, move |x| {
            net.softmax_linear.forward(flat(x)).sum()
        }),
    ]
}

/// The whole step's rows in each of `precisions`.
fn whole_step(net: Cifar10Net, reps: usize, device: &Device, precisions: &[Precision]) {
    let batch = cifar_batch(128, device);
    let (x, y) = batch.as_slice().to_tensors(device);
    let mut nets = vec![net; precisions.len()];
    let mut optims: Vec<_> = precisions
        .iter()
        .map(|_| OptimizerConfig::Sgd.init())
        .collect();
    let mut times: Vec<_> = precisions
        .iter()
        .map(|_| [(); 3].map(|_| Vec::new()))
        .collect();
    // The precisions alternate call by call, so that all see the same machine.
    for rep in 0..reps + 1 {
        for (i, &precision) in precisions.iter().enumerate() {
            let took = with_precision(precision, || {
                let net = nets[i].clone();
                let (took, net) = time_step(net, &mut optims[i], (&x, &y), device);
                nets[i] = net;
                took
            });
            if rep > 0 {
                times[i].iter_mut().zip(took).for_each(|(t, d)| t.push(d));
            }
        }
    }
    let kernel = bf16_kernel();
    for (precision, times) in precisions.iter().zip(times) {
        let [fwd, both, step] = times.map(|t| median(t) * 1e3);
        let note = match precision {
            Precision::Bf16 => format!(", bf16 products on {kernel}"),
            _ => String::new(),
        };
        println!(
            "{:<40} {fwd:>8.2}",
            format!("whole net ({precision}): loss forward")
        );
        println!(
            "{:<40} {both:>8.2}",
            format!("whole net ({precision}): forward+backward")
        );
        println!(
            "{:<40} {step:>8.2}   ({:.0} examples/s{note})",
            format!("whole step ({precision}): fwd+bwd+SGD"),
            128e3 / step
        );
    }
}

/// The loss forward alone, forward and backward, and a full step with the loss read back.
fn time_step(
    mut net: Cifar10Net,
    optim: &mut ModuleOptimizer,
    (x, y): (&Tensor<4>, &Tensor<1, Int>),
    device: &Device,
) -> ([Duration; 3], Cifar10Net) {
    let start = Instant::now();
    let _: f32 = net.loss(x.clone(), y.clone()).loss.into_scalar();
    let fwd = start.elapsed();
    let start = Instant::now();
    let _grads = net.loss(x.clone(), y.clone()).loss.backward();
    device.sync().unwrap();
    let both = start.elapsed();
    let start = Instant::now();
    let loss = net.loss(x.clone(), y.clone()).loss;
    let grads = GradientsParams::from_grads(loss.backward(), &net);
    let _: f32 = loss.into_scalar();
    net = optim.step(0.1, net, grads);
    ([fwd, both, start.elapsed()], net)
}

/// Groups of formulations of one computation, the model's first.
fn alternatives(net: &Cifar10Net) -> Vec<Vec<Layer<'_>>> {
    let same = MaxPool2dConfig::new([3, 3])
        .with_strides([2, 2])
        .with_padding(PaddingConfig2d::Same)
        .init();
    // TF's SAME pads 24 and 12 at the end only: the same windows as no padding in ceil mode.
    let ceil = MaxPool2dConfig::new([3, 3])
        .with_strides([2, 2])
        .with_ceil_mode(true)
        .init();
    let pool_layer = |name, input, pool: MaxPool2d| {
        Layer::new(name, input, true, move |x| pool.forward(x).sum())
    };
    let towers_pool = |name, input, pool: MaxPool2d| {
        Layer::new(name, input, true, move |x| max_pool2d(&pool, x).sum())
    };
    let separable = |name, input| Layer::new(name, input, true, |x| separable_max_pool(x).sum());
    vec![
        vec![
            Layer::new(
                "conv1: kernel x image windows",
                [128, 3, 24, 24],
                false,
                |x| relu(conv_images(&net.conv1, x)).sum(),
            ),
            Layer::new(
                "conv1: conv2d_relu (one kernel)",
                [128, 3, 24, 24],
                false,
                |x| conv2d_relu(&net.conv1, x).sum(),
            ),
            Layer::new("conv1: Burn's conv2d", [128, 3, 24, 24], false, |x| {
                relu(net.conv1.forward(x)).sum()
            }),
        ],
        vec![
            Layer::new(
                "conv2: conv2d_relu (one kernel)",
                [128, 64, 12, 12],
                true,
                |x| conv2d_relu(&net.conv2, x).sum(),
            ),
            Layer::new(
                "conv2: towers_kernels::conv2d, relu",
                [128, 64, 12, 12],
                true,
                |x| relu(conv2d(&net.conv2, x)).sum(),
            ),
            Layer::new("conv2: Burn's conv2d", [128, 64, 12, 12], true, |x| {
                relu(net.conv2.forward(x)).sum()
            }),
        ],
        vec![
            Layer::new("norm1: Lrn::forward", [128, 64, 12, 12], true, |x| {
                net.norm1.forward(x).sum()
            }),
            Layer::new("norm1: Lrn::forward_band", [128, 64, 12, 12], true, |x| {
                net.norm1.forward_band(x).sum()
            }),
        ],
        vec![
            towers_pool(
                "pool1: towers_kernels::max_pool2d",
                [128, 64, 24, 24],
                ceil.clone(),
            ),
            pool_layer(
                "pool1: Burn's, no padding, ceil mode",
                [128, 64, 24, 24],
                ceil.clone(),
            ),
            pool_layer(
                "pool1: SAME (pad, then pool)",
                [128, 64, 24, 24],
                same.clone(),
            ),
            separable("pool1: max of strided slices", [128, 64, 24, 24]),
        ],
        vec![
            towers_pool(
                "pool2: towers_kernels::max_pool2d",
                [128, 64, 12, 12],
                ceil.clone(),
            ),
            pool_layer(
                "pool2: Burn's, no padding, ceil mode",
                [128, 64, 12, 12],
                ceil,
            ),
            pool_layer("pool2: SAME (pad, then pool)", [128, 64, 12, 12], same),
            separable("pool2: max of strided slices", [128, 64, 12, 12]),
        ],
    ]
}

/// 3x3/2 max pooling with TF's SAME padding of even sizes (one -inf row and column at the
/// end) as elementwise maxima of strided slices, rows then columns: four `max_pair`s.
fn separable_max_pool(x: Tensor<4>) -> Tensor<4> {
    let [_, _, h, w] = x.dims();
    let (oh, ow) = (h.div_ceil(2), w.div_ceil(2));
    let x = x.pad(
        [(0, 0), (0, 0), (0, 2 * oh + 1 - h), (0, 2 * ow + 1 - w)],
        PadMode::Constant(f32::NEG_INFINITY),
    );
    let rows = |k: usize| x.clone().slice(s![.., .., k..k + 2 * oh - 1;2, ..]);
    let x = rows(0).max_pair(rows(1)).max_pair(rows(2));
    let cols = |k: usize| x.clone().slice(s![.., .., .., k..k + 2 * ow - 1;2]);
    cols(0).max_pair(cols(1)).max_pair(cols(2))
}
