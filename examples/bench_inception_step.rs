//! Where Inception v3's training step (batch 32, 299x299, TF-slim's layout with the aux head)
//! spends its time, block by block, on the default CPU backend (flex) or the device
//! `TOWERS_BENCH_DEVICE` names.
//!
//! `cargo run --release --example bench_inception_step [REPS]` (default 3; medians after a
//! warm-up). Each block is timed alone as `bench_step` times the CIFAR-10 net's layers: forward,
//! then forward and backward of the output's sum (the gradient reaches the block's weights and,
//! except for the first convolution, whose input is the images, its input); backward is the
//! difference. Batch norm runs on batch statistics, as in training.

mod bench_common;
use bench_common::layer_timing::{Layer, layer_table};
use bench_common::{bench_device, reps};

use burn::tensor::Tensor;
use towers_models::{InceptionV3, InceptionV3Config};

fn main() {
    let reps = reps(3);
    let (entry, device) = bench_device();
    device.seed(0);
    let net = InceptionV3Config::new(1001).init(&device);
    println!("Inception v3, batch 32, 299x299, {entry}, median of {reps} calls, ms");
    layer_table(blocks(&net), reps, &device);
}

const BATCH: usize = 32;

/// A block whose input `[channels, height, width]` needs a gradient, timed on the sum of its
/// output.
fn block<'a>(
    name: &'static str,
    [c, h, w]: [usize; 3],
    run: impl Fn(Tensor<4>) -> Tensor<4> + 'a,
) -> Layer<'a> {
    Layer::new(name, [BATCH, c, h, w], true, move |x| run(x).sum())
}

fn blocks(net: &InceptionV3) -> Vec<Layer<'_>> {
    let n = BATCH;
    vec![
        Layer::new("Conv2d_1a_3x3", [n, 3, 299, 299], false, |x| {
            net.conv2d_1a_3x3.forward_images(x).sum()
        }),
        block("Conv2d_2a_3x3", [32, 149, 149], |x| {
            net.conv2d_2a_3x3.forward(x)
        }),
        block("Conv2d_2b_3x3", [32, 147, 147], |x| {
            net.conv2d_2b_3x3.forward(x)
        }),
        block("MaxPool_3a_3x3", [64, 147, 147], |x| {
            net.maxpool_3a_3x3.forward(x)
        }),
        block("Conv2d_3b_1x1", [64, 73, 73], |x| {
            net.conv2d_3b_1x1.forward(x)
        }),
        block("Conv2d_4a_3x3", [80, 73, 73], |x| {
            net.conv2d_4a_3x3.forward(x)
        }),
        block("MaxPool_5a_3x3", [192, 71, 71], |x| {
            net.maxpool_5a_3x3.forward(x)
        }),
        block("Mixed_5b", [192, 35, 35], |x| net.mixed_5b.forward(x)),
        block("Mixed_5c", [256, 35, 35], |x| net.mixed_5c.forward(x)),
        block("Mixed_5d", [288, 35, 35], |x| net.mixed_5d.forward(x)),
        block("Mixed_6a", [288, 35, 35], |x| net.mixed_6a.forward(x)),
        block("Mixed_6b", [768, 17, 17], |x| net.mixed_6b.forward(x)),
        block("Mixed_6c", [768, 17, 17], |x| net.mixed_6c.forward(x)),
        block("Mixed_6d", [768, 17, 17], |x| net.mixed_6d.forward(x)),
        block("Mixed_6e", [768, 17, 17], |x| net.mixed_6e.forward(x)),
        Layer::new("AuxLogits", [n, 768, 17, 17], true, |x| {
            let head = net.aux_logits.as_ref().expect("the aux head at 299x299");
            head.forward(x).sum()
        }),
        block("Mixed_7a", [768, 17, 17], |x| net.mixed_7a.forward(x)),
        block("Mixed_7b", [1280, 8, 8], |x| net.mixed_7b.forward(x)),
        block("Mixed_7c", [2048, 8, 8], |x| net.mixed_7c.forward(x)),
        Layer::new("average pool + Logits", [n, 2048, 8, 8], true, |x| {
            let pooled = x.mean_dim(3).mean_dim(2).flatten::<2>(1, 3);
            net.logits.forward(pooled).sum()
        }),
    ]
}
