//! Where Inception v3's training step (batch 32, 299x299, TF-slim's layout with the aux head)
//! spends its time, block by block, on the default CPU backend (flex) or the device
//! `TOWERS_BENCH_DEVICE` names.
//!
//! `cargo run --release -p towers-bench --bin bench_inception_step [REPS] [f32|bf16]
//! [blocks|convs] [NAME]` (default 3, f32 and blocks; medians after a warm-up; bf16: products in bf16, as
//! `--precision bf16`; NAME: only the rows whose name contains it, e.g. under a profiler).
//! Each block is timed alone as `bench_step` times the CIFAR-10 net's layers: forward,
//! then forward and backward of the output's sum (the gradient reaches the block's weights and,
//! except for the first convolution, whose input is the images, its input); backward is the
//! difference. Batch norm runs on batch statistics, as in training. `convs`: instead of the
//! blocks, one convolution of each kind of shape the net has, alone (no batch norm, ReLU,
//! pooling or concatenation): set beside the blocks, what the rest of the step costs; then each
//! one's multiply-adds per second, forward and forward+backward (twice the forward's
//! multiply-adds: the input gradient and the weight gradient), to read against `bench_peak`.

use towers_bench::layer_timing::{Layer, layer_table};
use towers_bench::{bench_device, reps};

use std::collections::HashMap;

use burn::nn::conv::Conv2d;
use burn::tensor::Tensor;
use towers_kernels::{Precision, conv2d, with_precision};
use towers_models::{InceptionV3, InceptionV3Config};

fn main() {
    let reps = reps(3);
    let precision = match std::env::args().nth(2).as_deref() {
        None | Some("f32") => Precision::F32,
        Some("bf16") => Precision::Bf16,
        Some(other) => panic!("PRECISION is f32 or bf16, not {other}"),
    };
    let (entry, device) = bench_device();
    device.seed(0);
    let net = InceptionV3Config::new(1001).init(&device);
    println!("Inception v3, batch 32, 299x299, {entry}, {precision:?}, median of {reps} calls, ms");
    let name = std::env::args().nth(4).unwrap_or_default();
    let chosen = |layer: &Layer| layer.name.contains(&name);
    let table = |layers| with_precision(precision, || layer_table(layers, reps, &device));
    match std::env::args().nth(3).as_deref() {
        None | Some("blocks") => _ = table(blocks(&net).into_iter().filter(chosen).collect()),
        Some("convs") => {
            let convs = convolutions(&net)
                .into_iter()
                .filter(|(layer, _)| chosen(layer));
            let (layers, macs): (Vec<_>, Vec<_>) = convs.unzip();
            let names: Vec<_> = layers.iter().map(|layer| layer.name).collect();
            rates(&names, &macs, &table(layers));
        }
        Some(other) => panic!("the third argument is `blocks` or `convs`, not {other}"),
    }
}

/// Each convolution's multiply-adds per second from its forward multiply-adds and its forward
/// and forward+backward times (ms), and those of all of them together.
fn rates(names: &[&str], macs: &[f64], times: &[[f64; 2]]) {
    let gmacs = |macs: f64, ms: f64| macs / ms / 1e6;
    println!("\n{:<40} {:>8} {:>9}", "GMAC/s", "forward", "fwd+bwd");
    for ((name, &macs), [fwd, both]) in names.iter().zip(macs).zip(times) {
        println!(
            "{name:<40} {:>8.1} {:>9.1}",
            gmacs(macs, *fwd),
            gmacs(3.0 * macs, *both)
        );
    }
    let total: f64 = macs.iter().sum();
    let [fwd, both] = [0, 1].map(|i| times.iter().map(|t| t[i]).sum::<f64>());
    println!(
        "{:<40} {:>8.1} {:>9.1}",
        "all of them",
        gmacs(total, fwd),
        gmacs(3.0 * total, both)
    );
}

const BATCH: usize = 32;

fn blocks(net: &InceptionV3) -> Vec<Layer<'_>> {
    let n = BATCH;
    // Each block's input is the output of the endpoint before it, its shape read off one image.
    let device = net.logits.weight.val().device();
    let shapes: HashMap<&str, Vec<usize>> = net
        .endpoints(Tensor::zeros([1, 3, 299, 299], &device))
        .into_iter()
        .collect();
    let after = |endpoint: &str| {
        let [_, c, h, w] = shapes[endpoint][..] else {
            unreachable!("{endpoint} is a map")
        };
        [n, c, h, w]
    };
    // A block whose input needs a gradient, timed on the sum of its output.
    let block = |name, input, run: fn(&InceptionV3, Tensor<4>) -> Tensor<4>| {
        Layer::new(name, input, true, move |x| run(net, x).sum())
    };
    vec![
        Layer::new("Conv2d_1a_3x3", [n, 3, 299, 299], false, |x| {
            net.conv2d_1a_3x3.forward_images(x).sum()
        }),
        block("Conv2d_2a_3x3", after("Conv2d_1a_3x3"), |m, x| {
            m.conv2d_2a_3x3.forward(x)
        }),
        // Each max pool of the stem takes in the batch norm and ReLU before it, as the net runs
        // them.
        block(
            "Conv2d_2b_3x3 + MaxPool_3a_3x3",
            after("Conv2d_2a_3x3"),
            |m, x| {
                let (conv, pool) = (&m.conv2d_2b_3x3, &m.maxpool_3a_3x3);
                conv.bn.forward_relu_max_pool(pool, conv2d(&conv.conv, x))
            },
        ),
        block("Conv2d_3b_1x1", after("MaxPool_3a_3x3"), |m, x| {
            m.conv2d_3b_1x1.forward(x)
        }),
        block(
            "Conv2d_4a_3x3 + MaxPool_5a_3x3",
            after("Conv2d_3b_1x1"),
            |m, x| {
                let (conv, pool) = (&m.conv2d_4a_3x3, &m.maxpool_5a_3x3);
                conv.bn.forward_relu_max_pool(pool, conv2d(&conv.conv, x))
            },
        ),
        block("Mixed_5b", after("MaxPool_5a_3x3"), |m, x| {
            m.mixed_5b.forward(x)
        }),
        block("Mixed_5c", after("Mixed_5b"), |m, x| m.mixed_5c.forward(x)),
        block("Mixed_5d", after("Mixed_5c"), |m, x| m.mixed_5d.forward(x)),
        block("Mixed_6a", after("Mixed_5d"), |m, x| m.mixed_6a.forward(x)),
        block("Mixed_6b", after("Mixed_6a"), |m, x| m.mixed_6b.forward(x)),
        block("Mixed_6c", after("Mixed_6b"), |m, x| m.mixed_6c.forward(x)),
        block("Mixed_6d", after("Mixed_6c"), |m, x| m.mixed_6d.forward(x)),
        block("Mixed_6e", after("Mixed_6d"), |m, x| m.mixed_6e.forward(x)),
        Layer::new("AuxLogits", after("Mixed_6e"), true, |x| {
            let head = net.aux_logits.as_ref().expect("the aux head at 299x299");
            head.forward(x).sum()
        }),
        block("Mixed_7a", after("Mixed_6e"), |m, x| m.mixed_7a.forward(x)),
        block("Mixed_7b", after("Mixed_7a"), |m, x| m.mixed_7b.forward(x)),
        block("Mixed_7c", after("Mixed_7b"), |m, x| m.mixed_7c.forward(x)),
        Layer::new("average pool + Logits", after("Mixed_7c"), true, |x| {
            let pooled = x.mean_dim(3).mean_dim(2).flatten::<2>(1, 3);
            net.logits.forward(pooled).sum()
        }),
    ]
}

/// One convolution of each kind of shape in the net (the stem's, and the 35x35, 17x17 and 8x8
/// blocks'), alone, at stride 1, timed on the sum of its output, the gradient reaching its
/// input; each with its forward pass's multiply-adds over the batch.
fn convolutions(net: &InceptionV3) -> Vec<(Layer<'_>, f64)> {
    let (a, c, e) = (&net.mixed_5b, &net.mixed_6b, &net.mixed_7b);
    vec![
        alone(
            "Conv2d_2a_3x3 32->32 149x149",
            [32, 149],
            &net.conv2d_2a_3x3.conv,
        ),
        alone(
            "Conv2d_2b_3x3 32->64 147x147",
            [32, 147],
            &net.conv2d_2b_3x3.conv,
        ),
        alone(
            "Conv2d_3b_1x1 64->80 73x73",
            [64, 73],
            &net.conv2d_3b_1x1.conv,
        ),
        alone(
            "Conv2d_4a_3x3 80->192 73x73",
            [80, 73],
            &net.conv2d_4a_3x3.conv,
        ),
        alone("Mixed_5b 1x1 192->64 35x35", [192, 35], &a.branch_0.conv),
        alone("Mixed_5b 5x5 48->64 35x35", [48, 35], &a.branch_1[1].conv),
        alone("Mixed_5b 3x3 64->96 35x35", [64, 35], &a.branch_2[1].conv),
        alone("Mixed_5b 3x3 96->96 35x35", [96, 35], &a.branch_2[2].conv),
        alone("Mixed_6b 1x1 768->192 17x17", [768, 17], &c.branch_0.conv),
        alone(
            "Mixed_6b 1x7 128->128 17x17",
            [128, 17],
            &c.branch_1[1].conv,
        ),
        alone(
            "Mixed_6b 7x1 128->192 17x17",
            [128, 17],
            &c.branch_1[2].conv,
        ),
        alone("Mixed_7b 1x1 1280->448 8x8", [1280, 8], &e.branch_2[0].conv),
        alone("Mixed_7b 3x3 448->384 8x8", [448, 8], &e.branch_2[1].conv),
        alone(
            "Mixed_7b 1x3 384->384 8x8",
            [384, 8],
            &e.branch_1_split[0].conv,
        ),
    ]
}

/// `conv` alone on `[BATCH, c, size, size]` inputs, and its forward pass's multiply-adds: one
/// per kernel value, output place and image (counted from one image's output).
fn alone<'a>(name: &'static str, [c, size]: [usize; 2], conv: &'a Conv2d) -> (Layer<'a>, f64) {
    let device = conv.weight.val().device();
    let [_, out, oh, ow] = conv2d(conv, Tensor::zeros([1, c, size, size], &device)).dims();
    let [_, _, kh, kw] = conv.weight.dims();
    let macs = (BATCH * out * oh * ow * c * kh * kw) as f64;
    let layer = Layer::new(name, [BATCH, c, size, size], true, move |x| {
        conv2d(conv, x).sum()
    });
    (layer, macs)
}
