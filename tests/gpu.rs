//! The CIFAR-10 trainer on a real GPU backend (`wgpu`, Mesa's lavapipe in CI, or the entry
//! `TOWERS_GPU_DEVICE` names): a run on the GPU and on `flex,GPU` follows the `flex` run of the
//! same seed, and a run checkpointed on `flex,GPU` resumes on the GPU alone where it left off.
//!
//! The weights come from the seed on the CPU whatever the devices, and the input pipeline is
//! deterministic, so the runs see the same weights and batches; they differ only by the GPU's
//! f32 rounding (see crates/multigpu/tests/gpu.rs), which three steps at rate 0.01 keep under
//! 1e-4 of the loss.
//!
//! Run with `cargo test --features wgpu --test integration gpu::`.
#![cfg(feature = "gpu")]

use burn::module::Module;
use burn::tensor::activation::relu;
use burn::tensor::{Device, Distribution, Tensor, TensorData};
use burn_towers::data::cifar10::BuiltinCifar10;
use burn_towers::kernels::nn::conv::Conv2dConfig;
use burn_towers::kernels::nn::{BatchNormConfig, LinearConfig, PaddingConfig2d};
use burn_towers::kernels::{Precision, conv2d_relu_max_pool2d, joined_sum_of_squares, linear_relu};
use burn_towers::models::{
    Bottleneck, Cifar10Net, EfficientNetLayout, InceptionD, InceptionDConfig, InceptionE,
    InceptionEConfig, InvertedResidual, InvertedResidualConfig, LrnConfig, MbConv, MbConvConfig,
    MobileNetLayout, MobileNetV3Block, MobileNetV3BlockConfig, ResidualBlock,
};
use burn_towers::train::{Input, TrainConfig, Trainer, read_log};
use towers_testing::gpu::gpu_or_skip;
use towers_testing::losses::assert_cross_entropy_matches_burns;
use towers_testing::nets::{pattern, seeded};
use towers_testing::norms::assert_batch_norms_match_burns;
use towers_testing::training::{cifar_net, quick_cifar_config};
use towers_testing::{assert_error_names, report};

/// Relative difference allowed between the losses of a GPU run and the flex run.
const TOLERANCE: f64 = 1e-4;

/// The CIFAR-10 net with pattern weights (`seeded`): the same in every run, whatever the other
/// tests draw from flex's shared generator meanwhile (a run seeded by the trainer alone got other
/// weights when one did, and its losses left the flex run's).
fn patterned_cifar_net(device: &Device) -> Cifar10Net {
    seeded(cifar_net(device), 7)
}

/// Trains as `config` says and returns the logged `(step, loss)` pairs of the whole directory.
fn train(config: TrainConfig, data: &BuiltinCifar10) -> Vec<(u64, f64)> {
    let dir = config.train_dir.clone();
    Trainer::new(config)
        .run(
            patterned_cifar_net,
            &Input::cifar10_train(data.dir()).unwrap(),
        )
        .unwrap();
    read_log(&dir.join(burn_towers::train::LOG_FILE))
        .unwrap()
        .iter()
        .map(|e| (e.step, e.loss))
        .collect()
}

fn assert_track(got: &[(u64, f64)], want: &[(u64, f64)], what: &str) {
    assert_eq!(
        got.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        want.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        "{what}: steps"
    );
    for ((step, g), (_, w)) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= TOLERANCE * w.abs(),
            "{what}: step {step} loss {g}, flex {w}"
        );
    }
}

#[test]
fn cifar10_trains_on_a_gpu_and_resumes_on_another_device_list() {
    let Some(gpu) = gpu_or_skip("cifar10_trains_on_a_gpu") else {
        return;
    };
    let data = BuiltinCifar10::create(64, 16, 3).unwrap();
    let dirs: Vec<_> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    let flex = train(quick_cifar_config(dirs[0].path(), "flex", 3), &data);
    assert_eq!(flex.len(), 3);
    assert!(
        flex[2].1 != flex[0].1,
        "the steps change the loss: {flex:?}"
    );

    let alone = train(quick_cifar_config(dirs[1].path(), &gpu.entry, 3), &data);
    assert_track(&alone, &flex, &gpu.entry);
    let mixed_list = gpu.list("flex,GPU");
    let mixed = train(quick_cifar_config(dirs[2].path(), &mixed_list, 3), &data);
    assert_track(&mixed, &flex, &mixed_list);

    // Two steps on flex,GPU (a checkpoint at step 2), then resume on the GPU alone.
    let first = train(quick_cifar_config(dirs[3].path(), &mixed_list, 2), &data);
    assert_track(&first, &flex[..2], "before the checkpoint");
    let mut resumed = quick_cifar_config(dirs[3].path(), &gpu.entry, 3);
    resumed.resume = true;
    let all = train(resumed, &data);
    assert_track(&all, &flex, "resumed on the GPU alone");
}

/// Products in a type the GPU lacks (bf16 on wgpu, whose WGSL has none) are refused before the
/// first step, naming the device, rather than failing in the backend's own thread when it
/// compiles the first cast; flex has bf16, so `flex,GPU` is refused too.
#[test]
fn bf16_products_on_a_gpu_without_bf16_are_refused_at_the_start() {
    let Some(gpu) = gpu_or_skip("bf16_products_on_a_gpu_without_bf16") else {
        return;
    };
    if Precision::Bf16.supported_on(&gpu.device) {
        eprintln!(
            "SKIPPED bf16_products_on_a_gpu_without_bf16: {} has bf16",
            gpu.entry
        );
        return;
    }
    let data = BuiltinCifar10::create(64, 16, 3).unwrap();
    for list in [gpu.list("GPU"), gpu.list("flex,GPU")] {
        let dir = tempfile::tempdir().unwrap();
        let config = quick_cifar_config(dir.path(), &list, 3).with_precision(Precision::Bf16);
        let error = Trainer::new(config)
            .run(cifar_net, &Input::cifar10_train(data.dir()).unwrap())
            .err()
            .unwrap_or_else(|| panic!("{list}: bf16 products trained"));
        assert_error_names(&report(&error), &["bf16", &gpu.entry, "f32 or f16"]);
        let written: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(written.is_empty(), "{list}: wrote {written:?}");
    }
}

/// The batch norms with their own backward pass on CubeCL devices (ResNet's, with a scale;
/// Inception v3's, an offset and no scale): Burn's outputs, statistics and gradients on the GPU
/// too (fused or not, as this build is).
#[test]
fn batch_norms_and_their_gradients_are_burns_on_a_gpu() {
    let Some(gpu) = gpu_or_skip("batch_norms_on_a_gpu") else {
        return;
    };
    assert_batch_norms_match_burns(&gpu.device);
}

/// Batch norm over as many values per channel as ResNet-50's first stage at batch 32 (100,352
/// per channel, 6.4 M in all), and its gradient, on the GPU follow flex. On lavapipe, whose
/// kernels stop their loops after 65,535 iterations, a single reduction per channel leaves
/// values out (Burn's `BatchNorm` and ours were off by more than the output's size), so there
/// ours sums in pieces (`towers_kernels`, `batch_norm/column_sums.rs`).
#[test]
fn batch_norm_over_long_channels_on_a_gpu_follows_flex() {
    let Some(gpu) = gpu_or_skip("batch_norm_over_long_channels") else {
        return;
    };
    let shape = [32, 64, 56, 56];
    let flex = Device::flex().autodiff();
    let x = Tensor::<4>::random(shape, Distribution::Normal(3.0, 2.0), &flex);
    let probe = Tensor::<4>::random(shape, Distribution::Uniform(-1.0, 1.0), &flex);
    let norm = BatchNormConfig::new(shape[1]).init(&flex);
    let output_and_gradient = |device: &Device| {
        let x = x.clone().to_device(device).detach().require_grad();
        let y = norm.clone().fork(device).forward(x.clone());
        let grads = (y.clone() * probe.clone().to_device(device))
            .sum()
            .backward();
        let dx = x.grad(&grads).expect("the input's gradient");
        let [y, dx] = [y.inner(), dx].map(|t| t.into_data().try_to_vec::<f32>().unwrap());
        (y, dx)
    };
    let (want_y, want_dx) = output_and_gradient(&flex);
    let (y, dx) = output_and_gradient(&gpu.device);
    for (what, got, want) in [("output", y, want_y), ("input gradient", dx, want_dx)] {
        let worst = (got.iter().zip(&want))
            .map(|(g, w)| (g - w).abs() / w.abs().max(1.0))
            .fold(0.0f32, f32::max);
        assert!(worst < 1e-3, "{what}: off by up to {worst} (relative)");
    }
}

/// The drop-in convolution's and dense layer's gradients where their bias is broadcast over
/// many values: the CIFAR-10 net's first convolution at its examples' batch (73,728 output
/// places per channel) and a dense layer over `[512, 600, 16]` and `[307_200, 16]`. On lavapipe,
/// whose kernels stop their loops after 65,535 iterations, one reduction over all of them
/// leaves values out (Burn's `Conv2d` bias gradient was up to 57% of the largest off, the dense
/// layer's 101%), so there the drop-in layers add the bias expanded, its gradient summed one
/// short dimension at a time (`towers_kernels`, `dispatch/channel_bias.rs`); and over
/// `[32_768, 16]`, the most places whose bias gradient is still summed in one reduction.
#[test]
fn bias_gradients_over_many_places_on_a_gpu_follow_flex() {
    let Some(gpu) = gpu_or_skip("bias_gradients_over_many_places") else {
        return;
    };
    let flex = Device::flex().autodiff();
    let conv = Conv2dConfig::new([3, 64], [5, 5])
        .with_padding(PaddingConfig2d::Same)
        .init(&flex);
    let dense = LinearConfig::new(16, 8).init(&flex);
    let short = LinearConfig::new(16, 8).init(&flex);
    fn normal<const D: usize>(dims: [usize; D], flex: &Device) -> Tensor<D> {
        Tensor::random(dims, Distribution::Normal(0.0, 1.0), flex)
    }
    let (images, conv_probe) = (
        normal([128, 3, 24, 24], &flex),
        normal([128, 64, 24, 24], &flex),
    );
    let (rows, rows_probe) = (normal([512, 600, 16], &flex), normal([512, 600, 8], &flex));
    let (batch, batch_probe) = (normal([307_200, 16], &flex), normal([307_200, 8], &flex));
    let (whole, whole_probe) = (normal([32_768, 16], &flex), normal([32_768, 8], &flex));
    let gradients = |device: &Device| {
        let (conv, dense) = (conv.clone().fork(device), dense.clone().fork(device));
        let short = short.clone().fork(device);
        let y = conv.forward(images.clone().to_device(device));
        let z = dense.forward(rows.clone().to_device(device));
        let u = dense.forward(batch.clone().to_device(device));
        let v = short.forward(whole.clone().to_device(device));
        let loss = (y * conv_probe.clone().to_device(device)).sum()
            + (z * rows_probe.clone().to_device(device)).sum()
            + (u * batch_probe.clone().to_device(device)).sum()
            + (v * whole_probe.clone().to_device(device)).sum();
        let grads = loss.backward();
        let read = |t: Option<Tensor<1>>| t.unwrap().into_data().try_to_vec::<f32>().unwrap();
        let bias =
            |b: &Option<burn::module::Param<Tensor<1>>>| read(b.as_ref().unwrap().grad(&grads));
        let weight = |w: &burn::module::Param<Tensor<4>>| w.grad(&grads).map(|g| g.flatten(0, 3));
        [
            ("the convolution's bias", bias(&conv.bias)),
            ("the convolution's weight", read(weight(&conv.weight))),
            ("the dense layer's bias", bias(&dense.bias)),
            ("the bias summed whole", bias(&short.bias)),
        ]
    };
    let want = gradients(&flex);
    assert_follow(gradients(&gpu.device), want);
}

/// A convolution with its ReLU and max pool by `conv2d_relu_max_pool2d` (the CIFAR-10 net's
/// first layer; on the GPU the pool taken before the bias and the ReLU) and a dense layer with
/// its ReLU by `linear_relu` (the bias laid out before the product), on the GPU against Burn's
/// own layers and `relu` on flex: the outputs and the gradients of the inputs, the kernel and
/// both biases of a random weighting, within 1e-4 of the largest value of flex's. The pool in
/// ceil mode without padding (CIFAR-10's), and SAME, padded after the end only (Burn pads the
/// input with -inf first) and on both sides (inside its kernel): a padding of zeros would show,
/// the biases being positive in places.
#[test]
fn pooled_convolution_and_dense_relu_on_a_gpu_follow_flex() {
    let Some(gpu) = gpu_or_skip("pooled_convolution_and_dense_relu") else {
        return;
    };
    let flex = Device::flex().autodiff();
    // Burn's own layers, which the two functions take.
    let conv =
        burn::nn::conv::Conv2dConfig::new([3, 16], [5, 5]).with_padding(PaddingConfig2d::Same);
    let conv = seeded(conv.init(&flex), 1);
    let pool = burn::nn::pool::MaxPool2dConfig::new([3, 3]).with_strides([2, 2]);
    let (ceil, same) = (
        pool.clone().with_ceil_mode(true).init(),
        pool.with_padding(PaddingConfig2d::Same).init(),
    );
    let dense = seeded(burn::nn::LinearConfig::new(24, 8).init(&flex), 2);
    let normal =
        |side| Tensor::<4>::random([8, 3, side, side], Distribution::Normal(0.0, 1.0), &flex);
    let (even, odd) = (normal(24), normal(23));
    let cases = [(&ceil, &even), (&same, &even), (&same, &odd)];
    let rows = Tensor::<2>::random([32, 24], Distribution::Normal(0.0, 1.0), &flex);
    let outputs = |device: &Device, ours: bool| {
        let (conv, dense) = (conv.clone().fork(device), dense.clone().fork(device));
        let images = cases.map(|(_, images)| images.clone().to_device(device).require_grad());
        let r = rows.clone().to_device(device).require_grad();
        let pooled = (cases.iter().zip(&images)).map(|((pool, _), x)| match ours {
            true => conv2d_relu_max_pool2d(&conv, pool, x.clone()),
            false => pool.forward(relu(conv.forward(x.clone()))),
        });
        let pooled: Vec<Tensor<1>> = pooled.map(|y| y.flatten(0, 3)).collect();
        let z = match ours {
            true => linear_relu(&dense, r.clone()),
            false => relu(dense.forward(r.clone())),
        };
        let y = Tensor::cat(pooled, 0);
        let loss = (y.clone() * pattern(y.dims(), 5, &flex).to_device(device)).sum()
            + (z.clone() * pattern(z.dims(), 6, &flex).to_device(device)).sum();
        let grads = loss.backward();
        let read = |t: Tensor<1>| t.into_data().try_to_vec::<f32>().unwrap();
        let bias = |b: &Option<burn::module::Param<Tensor<1>>>| {
            read(b.as_ref().unwrap().grad(&grads).unwrap())
        };
        let images_grad = images.map(|x| x.grad(&grads).unwrap().flatten(0, 3));
        [
            ("pooled outputs", read(y)),
            ("dense output", read(z.flatten(0, 1))),
            (
                "images' gradients",
                read(Tensor::cat(images_grad.to_vec(), 0)),
            ),
            (
                "rows' gradient",
                read(r.grad(&grads).unwrap().flatten(0, 1)),
            ),
            (
                "kernel's gradient",
                read(conv.weight.grad(&grads).unwrap().flatten(0, 3)),
            ),
            ("convolution's bias gradient", bias(&conv.bias)),
            ("dense bias gradient", bias(&dense.bias)),
        ]
    };
    let want = outputs(&flex, false);
    assert_follow(outputs(&gpu.device, true), want);
}

/// The LRN on the GPU (`towers_kernels::lrn_by_band`, its backward pass its own) against
/// Burn's ops on flex (`Lrn::forward_band`, the band product with channels first, Burn's
/// autodiff): the output and the input's gradient of a random weighting, within 1e-4 of the
/// largest value of flex's; with a window and `alpha` large enough that the window's share of
/// the gradient shows, and the input laid out channels first and channels last (as Burn's GPU
/// convolutions write it) in memory.
#[test]
fn lrn_and_its_gradient_on_a_gpu_follow_burns_ops() {
    let Some(gpu) = gpu_or_skip("lrn_and_its_gradient") else {
        return;
    };
    let flex = Device::flex().autodiff();
    let lrn = LrnConfig::new()
        .with_depth_radius(2)
        .with_bias(1.0)
        .with_alpha(0.5)
        .with_beta(0.75)
        .init();
    let dims = [4, 7, 5, 6];
    let x = Tensor::<4>::random(dims, Distribution::Normal(0.0, 1.0), &flex);
    let probe = pattern(dims, 7, &flex);
    // `ours`: `Lrn::forward`, else `forward_band`; `channels_last`: the input's values laid
    // out `[n, h, w, c]` in memory.
    let outputs = |device: &Device, ours: bool, channels_last: bool| {
        let (leaf, input) = match channels_last {
            true => {
                let data = x.clone().permute([0, 2, 3, 1]).into_data();
                let leaf = Tensor::<4>::from_data(data, device).require_grad();
                (leaf.clone(), leaf.permute([0, 3, 1, 2]))
            }
            false => {
                let leaf = x.clone().to_device(device).require_grad();
                (leaf.clone(), leaf)
            }
        };
        let y = match ours {
            true => lrn.forward(input),
            false => lrn.forward_band(input),
        };
        let grads = (y.clone() * probe.clone().to_device(device))
            .sum()
            .backward();
        let grad = leaf.grad(&grads).unwrap();
        let grad = match channels_last {
            true => grad.permute([0, 3, 1, 2]),
            false => grad,
        };
        let read = |t: Tensor<4>| {
            t.flatten::<1>(0, 3)
                .into_data()
                .try_to_vec::<f32>()
                .unwrap()
        };
        [("output", read(y)), ("input gradient", read(grad))]
    };
    let want = outputs(&flex, false, false);
    for channels_last in [false, true] {
        assert_follow(outputs(&gpu.device, true, channels_last), want.clone());
    }
}

/// Panics unless each of `got`'s named values is within 1e-4 of `want`'s, relative to the
/// largest of `want` (or 1); names how far each was off either way.
fn assert_follow<const N: usize>(got: [(&str, Vec<f32>); N], want: [(&str, Vec<f32>); N]) {
    let off: Vec<_> = (got.into_iter().zip(want))
        .map(|((what, got), (_, want))| {
            let scale = want.iter().fold(1.0f32, |m, w| m.max(w.abs()));
            let worst = (got.iter().zip(&want))
                .map(|(g, w)| (g - w).abs() / scale)
                .fold(0.0f32, f32::max);
            (what, worst)
        })
        .collect();
    assert!(
        off.iter().all(|(_, worst)| *worst < 1e-4),
        "off by up to (of the largest value): {off:?}"
    );
}

/// Convolutions in f32 on the GPU by `towers_kernels::conv2d`, whose weight gradient is one
/// product there and whose input gradient a forward convolution (`conv_gradient`), against
/// Burn's own convolution on the same GPU: the
/// output, and the gradients of the input, the kernel and the bias of a random weighting,
/// within 1e-4 of the largest value. SAME at stride 1 (CIFAR-10's 5x5), SAME at stride 2 on
/// an even side (one more padding after than before), VALID at stride 2 (Inception v3's stem;
/// its last row read by no window), a 1x1 at stride 2 (ResNet's shortcut),
/// Inception's 1x7 and 7x1 on planes not square, a 1x1 (its input gradient one product), and
/// explicit padding wider after (as
/// wide as the kernel on the right: Burn's input gradient); each with its input laid out
/// channels first in memory and channels last (as Burn's GPU convolutions leave their outputs:
/// the weight gradient's windows kernel reads through the strides).
#[test]
fn convolutions_with_a_weight_gradient_of_one_product_follow_burns_on_a_gpu() {
    let Some(gpu) = gpu_or_skip("convolutions_with_a_weight_gradient_of_one_product") else {
        return;
    };
    let device = gpu.device.clone().autodiff();
    let cases = [
        ([6, 8], [5, 5], [1, 1], PaddingConfig2d::Same, [12, 12]),
        ([4, 6], [3, 3], [2, 2], PaddingConfig2d::Same, [16, 16]),
        ([3, 8], [3, 3], [2, 2], PaddingConfig2d::Valid, [16, 15]),
        ([6, 4], [1, 1], [2, 2], PaddingConfig2d::Valid, [8, 7]),
        ([8, 6], [1, 7], [1, 1], PaddingConfig2d::Same, [9, 11]),
        ([8, 6], [7, 1], [1, 1], PaddingConfig2d::Same, [9, 11]),
        ([8, 5], [1, 1], [1, 1], PaddingConfig2d::Valid, [7, 9]),
        (
            [3, 4],
            [3, 3],
            [1, 1],
            PaddingConfig2d::Explicit(0, 1, 2, 3),
            [8, 10],
        ),
    ];
    let in_both_layouts = cases
        .into_iter()
        .flat_map(|case| [(case.clone(), false), (case, true)]);
    for ((channels, kernel, stride, padding, [h, w]), channels_last) in in_both_layouts {
        let case = format!(
            "{kernel:?} at stride {stride:?}, {padding:?}, {h}x{w}, channels last: {channels_last}"
        );
        let conv = burn::nn::conv::Conv2dConfig::new(channels, kernel)
            .with_stride(stride)
            .with_padding(padding)
            .init(&device);
        let x = match channels_last {
            false => Tensor::<4>::random([3, channels[0], h, w], Distribution::Default, &device),
            true => Tensor::<4>::random([3, h, w, channels[0]], Distribution::Default, &device)
                .permute([0, 3, 1, 2]),
        }
        .require_grad();
        let outputs = |y: Tensor<4>| {
            let probe = pattern(y.dims(), 2, &device).add_scalar(0.3);
            let grads = (y.clone() * probe).sum().backward();
            let read = |t: Tensor<1>| t.into_data().try_to_vec::<f32>().unwrap();
            let flat = |t: Option<Tensor<4>>| read(t.unwrap().flatten(0, 3));
            [
                ("output", read(y.flatten(0, 3))),
                ("input gradient", flat(x.grad(&grads))),
                ("kernel gradient", flat(conv.weight.grad(&grads))),
                (
                    "bias gradient",
                    read(conv.bias.as_ref().unwrap().grad(&grads).unwrap()),
                ),
            ]
        };
        let want = outputs(conv.forward(x.clone()));
        let got = outputs(burn_towers::kernels::conv2d(&conv, x.clone()));
        println!("{case}");
        assert_follow(got, want);
    }
}

/// The drop-in layers of sequence and decoder models on the GPU against Burn's own there: a 1D
/// convolution (ours a one-row `conv2d`, through the GPU paths of the 2D one) at stride 1 SAME
/// and stride 2 with uneven padding, and the layers Burn computes there (a transposed
/// convolution, a 3D one, a group norm, a layer norm, GELU, padded and adaptive pools, a
/// transformer encoder layer with its multi-head attention and softmax, rotary position
/// encoding): the output and the gradients of the input and a weight of a weighting, within
/// 1e-4 of the largest value.
#[test]
fn drop_in_sequence_and_decoder_layers_on_a_gpu_follow_burns() {
    use burn::nn::PaddingConfig1d;
    use burn_towers::kernels::nn::{self as ours, conv::Conv1dConfig};
    let Some(gpu) = gpu_or_skip("drop_in_sequence_and_decoder_layers") else {
        return;
    };
    let device = gpu.device.clone().autodiff();
    let x = pattern([2, 4, 19], 5, &device);
    for (stride, padding) in [
        (1, PaddingConfig1d::Same),
        (2, PaddingConfig1d::Explicit(2, 1)),
    ] {
        let layer = Conv1dConfig::new(4, 6, 5)
            .with_stride(stride)
            .with_padding(padding)
            .init(&device);
        let burns: burn::nn::conv::Conv1d = layer.clone().into();
        let weight = layer.weight.val();
        println!("Conv1d at stride {stride}");
        assert_follow(
            outputs(&x, &weight, &|x| layer.forward(x)),
            outputs(&x, &weight, &|x| burns.forward(x)),
        );
    }
    let image = |x: Tensor<3>| x.reshape([2, 4, 19, 1]);
    let up = ours::conv::ConvTranspose2dConfig::new([4, 3], [3, 1])
        .with_stride([2, 1])
        .init(&device);
    let burns: burn::nn::conv::ConvTranspose2d = up.clone().into();
    let weight = up.weight.val();
    println!("ConvTranspose2d");
    assert_follow(
        outputs(&x, &weight, &|x| up.forward(image(x)).flatten(2, 3)),
        outputs(&x, &weight, &|x| burns.forward(image(x)).flatten(2, 3)),
    );
    let volume = ours::conv::Conv3dConfig::new([4, 3], [3, 1, 1])
        .with_padding(burn::nn::PaddingConfig3d::Same)
        .init(&device);
    let burns: burn::nn::conv::Conv3d = volume.clone().into();
    let weight = volume.weight.val();
    let deep = |x: Tensor<3>| x.reshape([2, 4, 19, 1, 1]);
    println!("Conv3d");
    assert_follow(
        outputs(&x, &weight, &|x| volume.forward(deep(x)).flatten(2, 4)),
        outputs(&x, &weight, &|x| burns.forward(deep(x)).flatten(2, 4)),
    );
    let norm = ours::GroupNormConfig::new(2, 4).init(&device);
    let burns: burn::nn::GroupNorm = norm.clone().into();
    let gamma = norm.gamma.as_ref().unwrap().val();
    println!("GroupNorm");
    assert_follow(
        outputs(&x, &gamma, &|x| norm.forward(x)),
        outputs(&x, &gamma, &|x| burns.forward(x)),
    );
    let layer_norm = ours::LayerNormConfig::new(19).init(&device);
    let burn_layer_norm: burn::nn::LayerNorm = layer_norm.clone().into();
    let scale = layer_norm.gamma.val();
    println!("LayerNorm");
    assert_follow(
        outputs(&x, &scale, &|x| layer_norm.forward(x)),
        outputs(&x, &scale, &|x| burn_layer_norm.forward(x)),
    );
    let gelu = ours::Gelu::new();
    let beta = norm.beta.as_ref().unwrap().val();
    println!("GELU");
    assert_follow(
        outputs(&x, &beta, &|x| gelu.forward(norm.forward(x))),
        outputs(&x, &beta, &|x| {
            burn::nn::Gelu::new().forward(burns.forward(x))
        }),
    );
    let pool = ours::pool::MaxPool1dConfig::new(3)
        .with_stride(2)
        .with_padding(PaddingConfig1d::Explicit(1, 1))
        .init();
    let burn_pool: burn::nn::pool::MaxPool1d = pool.clone().into();
    let mean = ours::pool::AdaptiveAvgPool1dConfig::new(5).init();
    let burn_mean: burn::nn::pool::AdaptiveAvgPool1d = mean.clone().into();
    println!("MaxPool1d, AdaptiveAvgPool1d");
    assert_follow(
        outputs(&x, &gamma, &|x| mean.forward(pool.forward(norm.forward(x)))),
        outputs(&x, &gamma, &|x| {
            burn_mean.forward(burn_pool.forward(burns.forward(x)))
        }),
    );
    let encoder = ours::transformer::TransformerEncoderConfig::new(8, 16, 2, 1)
        .with_dropout(0.0)
        .init(&device);
    let burn_encoder: burn::nn::transformer::TransformerEncoder = encoder.clone().into();
    let query_weight = encoder.layers[0].mha.query.weight.val();
    let tokens = pattern([2, 5, 8], 7, &device);
    let input = ours::transformer::TransformerEncoderInput::new;
    println!("TransformerEncoder");
    assert_follow(
        outputs(&tokens, &query_weight, &|x| encoder.forward(input(x))),
        outputs(&tokens, &query_weight, &|x| {
            burn_encoder.forward(burn::nn::transformer::TransformerEncoderInput::new(x))
        }),
    );
    let rope = ours::RotaryEncodingConfig::new(5, 8).init(&device);
    let burn_rope: burn::nn::RotaryEncoding = rope.clone().into();
    println!("RotaryEncoding");
    assert_follow(
        outputs(&tokens, &query_weight, &|x| {
            rope.forward(encoder.forward(input(x)))
        }),
        outputs(&tokens, &query_weight, &|x| {
            let x = burn::nn::transformer::TransformerEncoderInput::new(x);
            burn_rope.forward(burn_encoder.forward(x))
        }),
    );
}

/// The output, the gradient of `x` and that of `weight` (a parameter's value), flattened, of
/// `forward` on `x` weighted by a fixed pattern.
fn outputs<const D: usize>(
    x: &Tensor<3>,
    weight: &Tensor<D>,
    forward: &dyn Fn(Tensor<3>) -> Tensor<3>,
) -> [(&'static str, Vec<f32>); 3] {
    let x = x.clone().require_grad();
    let y = forward(x.clone());
    let probe = pattern(y.dims(), 2, &x.device()).add_scalar(0.3);
    let grads = (y.clone() * probe).sum().backward();
    let read = |t: Tensor<1>| t.into_data().try_to_vec::<f32>().unwrap();
    [
        ("output", read(y.flatten(0, 2))),
        (
            "input gradient",
            read(x.grad(&grads).unwrap().flatten(0, 2)),
        ),
        (
            "weight gradient",
            read(weight.grad(&grads).unwrap().flatten(0, D - 1)),
        ),
    ]
}

/// MobileNet's depthwise convolution (TF's SAME at stride 2) and ReLU6, Burn's on the GPU
/// against ours on flex: the output, and the gradients of the input, the kernel and the bias
/// of a random weighting (none at ReLU6's bends), within 1e-4 of the largest value.
#[test]
fn depthwise_convolution_and_relu6_on_a_gpu_follow_flex() {
    let Some(gpu) = gpu_or_skip("depthwise_convolution_and_relu6") else {
        return;
    };
    let flex = Device::flex().autodiff();
    let conv = Conv2dConfig::new([24, 24], [3, 3])
        .with_groups(24)
        .with_stride([2, 2])
        .with_padding(PaddingConfig2d::Same)
        .init(&flex);
    let images = Tensor::<4>::random([4, 24, 16, 16], Distribution::Normal(0.0, 4.0), &flex);
    // No weight where ReLU6's input is within 1e-3 of a bend (0 or 6), where the GPU and flex
    // may round to its two sides and rightly disagree on the gradient.
    let before = conv.forward(images.clone()).detach();
    let off_bends = (before.clone().abs().greater_elem(1e-3))
        .bool_and(before.sub_scalar(6.0).abs().greater_elem(1e-3))
        .float();
    let probe = Tensor::<4>::random([4, 24, 8, 8], Distribution::Default, &flex) * off_bends;
    let outputs = |device: &Device| {
        let conv = conv.clone().fork(device);
        let x = images.clone().to_device(device).require_grad();
        let y = burn_towers::kernels::relu6(conv.forward(x.clone()));
        let grads = (y.clone() * probe.clone().to_device(device))
            .sum()
            .backward();
        let read = |t: Tensor<1>| t.into_data().try_to_vec::<f32>().unwrap();
        [
            ("output", read(y.flatten(0, 3))),
            (
                "input gradient",
                read(x.grad(&grads).unwrap().flatten(0, 3)),
            ),
            (
                "kernel gradient",
                read(conv.weight.grad(&grads).unwrap().flatten(0, 3)),
            ),
            (
                "bias gradient",
                read(conv.bias.as_ref().unwrap().grad(&grads).unwrap()),
            ),
        ]
    };
    let want = outputs(&flex);
    assert_follow(outputs(&gpu.device), want);
}

/// EfficientNet's block in Keras's layout (a 1x1 expansion, a 5x5 depthwise convolution, the
/// squeeze-excitation gate, the projection, the input added back; batch norms on the batch's
/// statistics, SiLUs), Burn's ops on the GPU against ours on flex: see
/// [`a_block_on_a_gpu_follows_flex`].
#[test]
fn an_efficientnet_block_on_a_gpu_follows_flex() {
    let block = MbConvConfig::new([8, 8], 6, 5)
        .with_layout(EfficientNetLayout::Keras)
        .init(&Device::flex().autodiff());
    a_block_on_a_gpu_follows_flex("an_efficientnet_block", block, MbConv::forward, |b| {
        [
            ("depthwise kernel gradient", b.depthwise.conv.weight.val()),
            ("gate kernel gradient", b.se.reduce.weight.val()),
        ]
    });
}

/// MobileNetV3's block in Keras's layout, with its gate and hard swish (ReLU inside the gate,
/// a hard sigmoid of it): Burn's `hard_swish` and `hard_sigmoid` on the GPU against ours on
/// flex.
#[test]
fn a_mobilenet_v3_block_on_a_gpu_follows_flex() {
    let block = MobileNetV3BlockConfig::new([8, 8], 48, 5)
        .with_squeeze_excitation(true)
        .with_hard_swish(true)
        .with_layout(MobileNetLayout::Keras)
        .init(&Device::flex().autodiff());
    a_block_on_a_gpu_follows_flex(
        "a_mobilenet_v3_block",
        block,
        MobileNetV3Block::forward,
        |b| {
            [
                ("depthwise kernel gradient", b.depthwise.conv.weight.val()),
                (
                    "gate kernel gradient",
                    b.se.as_ref().unwrap().reduce.weight.val(),
                ),
            ]
        },
    );
}

/// Inception v3's 17x17 to 8x8 reduction (Mixed_7a): 3x3 convolutions at stride 2 (on the GPU,
/// their input gradients convolve the output gradient spread out by the stride, by a kernel of
/// ours) and 1x7 and 7x1 under SAME (the weight gradients' windows over the padding, by another),
/// Burn's ops on the GPU against ours on flex.
#[test]
fn an_inception_reduction_block_on_a_gpu_follows_flex() {
    let block = InceptionDConfig::new(8).init(&Device::flex().autodiff());
    a_block_on_a_gpu_follows_flex(
        "an_inception_reduction_block",
        block,
        InceptionD::forward,
        |b| {
            [
                (
                    "3x3 at stride 2 kernel gradient",
                    b.branch_0[1].conv.weight.val(),
                ),
                ("7x1 kernel gradient", b.branch_1[2].conv.weight.val()),
            ]
        },
    );
}

/// Inception v3's last block (Mixed_7c): 3x3, 1x3 and 3x1 convolutions under SAME, two branches
/// split into a 1x3 and a 3x1 each (one input, two convolutions' gradients into it).
#[test]
fn an_inception_block_with_split_branches_on_a_gpu_follows_flex() {
    let block = InceptionEConfig::new(8).init(&Device::flex().autodiff());
    a_block_on_a_gpu_follows_flex(
        "an_inception_block_with_split_branches",
        block,
        InceptionE::forward,
        |b| {
            [
                ("1x3 kernel gradient", b.branch_1_split[0].conv.weight.val()),
                ("3x3 kernel gradient", b.branch_2[1].conv.weight.val()),
            ]
        },
    );
}

/// ResNet-50's block (torchvision's layout, at stride 2 with its downsampling shortcut): its
/// batch norms with a scale, two with their ReLU in one op (`BatchNorm::forward_relu`), whose
/// kernels take the ReLU's backward pass in on the GPU.
#[test]
fn a_resnet_bottleneck_on_a_gpu_follows_flex() {
    let block = Bottleneck::new(8, 4, 2, &Device::flex().autodiff());
    a_block_on_a_gpu_follows_flex("a_resnet_bottleneck", block, Bottleneck::forward, |b| {
        [
            ("1x1 kernel gradient", b.conv1.weight.val()),
            ("3x3 kernel gradient", b.conv2.weight.val()),
        ]
    });
}

/// MobileNetV2's block (torchvision's layout: a 1x1 expansion by 6, a 3x3 depthwise
/// convolution, the projection, the input added back): its batch norms with a scale, two with
/// their ReLU6 in one op (`BatchNorm::forward_relu6`), whose kernels take the ReLU6's backward
/// pass in on the GPU.
#[test]
fn a_mobilenet_v2_block_on_a_gpu_follows_flex() {
    let block = InvertedResidualConfig::new([8, 8], 6).init(&Device::flex().autodiff());
    a_block_on_a_gpu_follows_flex(
        "a_mobilenet_v2_block",
        block,
        InvertedResidual::forward,
        |b| {
            [
                (
                    "expansion kernel gradient",
                    b.expand.as_ref().unwrap().conv.weight.val(),
                ),
                ("depthwise kernel gradient", b.depthwise.conv.weight.val()),
            ]
        },
    );
}

/// `block` (on flex, its weights replaced by a fixed pattern) moved to the GPU: the output,
/// and the gradients of the input and of two of its kernels (`weights`, named) of a fixed
/// weighting, within 1e-4 of the largest value of flex's.
fn a_block_on_a_gpu_follows_flex<B: Module + Clone>(
    name: &str,
    block: B,
    forward: fn(&B, Tensor<4>) -> Tensor<4>,
    weights: fn(&B) -> [(&'static str, Tensor<4>); 2],
) {
    let Some(gpu) = gpu_or_skip(name) else {
        return;
    };
    let flex = Device::flex().autodiff();
    // Fixed weights and inputs: a value inside the block (hard swish, the gate's ReLU and hard
    // sigmoid) within rounding of a bend, where the GPU and flex rightly disagree, then
    // either always shows or never does.
    let block = seeded(block, 3);
    let images = pattern([4, 8, 12, 12], 4, &flex).mul_scalar(10.0);
    let outputs = |device: &Device| {
        let block = block.clone().fork(device);
        let x = images.clone().to_device(device).require_grad();
        let y = forward(&block, x.clone());
        let probe = pattern(y.dims(), 5, &flex).add_scalar(0.2);
        let grads = (y.clone() * probe.to_device(device)).sum().backward();
        let read = |t: Tensor<1>| t.into_data().try_to_vec::<f32>().unwrap();
        let grad = |weight: &Tensor<4>| read(weight.grad(&grads).unwrap().flatten(0, 3));
        let [(first, first_weight), (second, second_weight)] = weights(&block);
        [
            ("output", read(y.flatten(0, 3))),
            ("input gradient", grad(&x)),
            (first, grad(&first_weight)),
            (second, grad(&second_weight)),
        ]
    };
    let want = outputs(&flex);
    assert_follow(outputs(&gpu.device), want);
}

/// Burn's own reductions over long rows, on the GPU against flex: the sums and maxima that the
/// batch norm's pieces (`batch_norm/column_sums.rs`), the biases' expansion
/// (`dispatch/channel_bias.rs`) and the overflow check's rows (`loss_scale.rs`) keep short
/// where [`towers_kernels::loops_stop_early`]. On such a device (lavapipe, whose kernels stop
/// their loops after 65,535 iterations) some must come out wrong, or the check has outlived
/// Mesa's limit and the workarounds can go; on any other, all must be right, or that device
/// needs them too (`bench/gpu/run.sh --tests` runs this on NVIDIA GPUs).
#[test]
fn burns_long_reductions_show_whether_loops_stop_early() {
    let Some(gpu) = gpu_or_skip("burns_long_reductions") else {
        return;
    };
    let flex = Device::flex();
    let device = &gpu.device;
    let mut wrong = Vec::new();
    let mut compare = |what: String, got: Tensor<2>, want: Tensor<2>| {
        let [got, want] = [got, want].map(|t| t.into_data().try_to_vec::<f32>().unwrap());
        let scale = want.iter().fold(1.0f32, |m, w| m.max(w.abs()));
        let off = (got.iter().zip(&want))
            .filter(|(g, w)| (*g - *w).abs() > 1e-3 * scale)
            .count();
        if off > 0 {
            wrong.push(format!("{what}: {off} of {} wrong", want.len()));
        }
    };
    for [rows, len] in [
        [1, 600_000],
        [2, 600_000],
        [4, 65_535],
        [4, 98_304],
        [64, 100_000],
    ] {
        let x = ramp_rows(rows, len, &flex);
        let on_gpu = x.clone().to_device(device);
        let sum = |t: Tensor<2>| t.sum_dim(1);
        compare(
            format!("sum_dim(1) of [{rows}, {len}]"),
            sum(on_gpu.clone()),
            sum(x.clone()),
        );
        let max = |t: Tensor<2>| t.max_dim(1);
        compare(
            format!("max_dim(1) of [{rows}, {len}]"),
            max(on_gpu.clone()),
            max(x.clone()),
        );
        let whole = |t: Tensor<2>| t.sum().reshape([1, 1]);
        compare(
            format!("sum() of [{rows}, {len}]"),
            whole(on_gpu.clone()),
            whole(x.clone()),
        );
        let mean = |t: Tensor<2>| t.flatten::<1>(0, 1).mean().reshape([1, 1]);
        compare(
            format!("mean() of [{}] (flattened)", rows * len),
            mean(on_gpu),
            mean(x),
        );
    }
    if towers_kernels::loops_stop_early(device) {
        assert!(
            !wrong.is_empty(),
            "{} runs its loops to the end: every long reduction came out right",
            gpu.entry
        );
    } else {
        assert!(
            wrong.is_empty(),
            "Burn's reductions on {}: {wrong:?}",
            gpu.entry
        );
    }
}

/// `rows` rows of `len` values: [`pattern`]'s values (in ±0.2) plus a ramp from 0 to 1 along
/// each row, so that a sum or a maximum that stops early misses the largest values. Made
/// without a random generator: flex's is shared by the tests running at once, and the CIFAR-10
/// test's seeded weights change when another test draws from it in between.
fn ramp_rows(rows: usize, len: usize, flex: &Device) -> Tensor<2> {
    let ramp: Vec<f32> = (0..len).map(|i| i as f32 / len as f32).collect();
    pattern([rows, len], 0, flex) + Tensor::from_data(TensorData::new(ramp, [1, len]), flex)
}

/// [`joined_sum_of_squares`] over many long tensors (an L2 penalty's value) on the GPU follows
/// flex's sums one tensor at a time: the tensors joined two dozen at a time into sums of
/// millions of values, or two summed one at a time, which where a device's loops stop early
/// (lavapipe) must be cut short, or values are left out.
#[test]
fn sums_of_squares_of_many_long_tensors_on_a_gpu_follow_flex() {
    let Some(gpu) = gpu_or_skip("sums_of_squares_of_many_long_tensors") else {
        return;
    };
    let flex = Device::flex();
    let tensors: Vec<Tensor<1>> = (0..30)
        .map(|i| ramp_rows(1, 7 + i * 20_011, &flex).reshape([7 + i * 20_011]))
        .collect();
    // All of them joined, and the longest two, too few to join, summed one at a time.
    for tensors in [&tensors[..], &tensors[28..]] {
        let on_gpu = tensors.iter().map(|t| t.clone().to_device(&gpu.device));
        let got: f32 = (joined_sum_of_squares(on_gpu.collect()))
            .expect("tensors to sum")
            .into_scalar();
        let want: f32 = (tensors.iter())
            .map(|t| t.clone().square().sum().into_scalar::<f32>())
            .sum();
        assert!(
            (got - want).abs() <= 1e-5 * want,
            "{} tensors: {got} on {} against {want} on flex",
            tensors.len(),
            gpu.entry
        );
    }
}

/// The loss every bundled net takes, with its own backward pass on CubeCL devices: Burn's
/// value and gradient on the GPU too (fused or not, as this build is).
#[test]
fn softmax_cross_entropy_and_its_gradient_are_burns_on_a_gpu() {
    let Some(gpu) = gpu_or_skip("softmax_cross_entropy_on_a_gpu") else {
        return;
    };
    assert_cross_entropy_matches_burns(&gpu.device);
}
