//! A model written with Burn's layers against the same model with `towers_kernels::nn`'s
//! drop-in layers: examples/own_model.rs's net (two 3x3 convolutions, adaptive pooling, two
//! dense layers, batch 128 of 12x12 images), train step (forward, cross-entropy, backward, SGD),
//! on flex or the device `TOWERS_BENCH_DEVICE` names. Then single layers a decoder or a
//! sequence model has, Burn's against the drop-in's, forward and backward: transposed
//! convolutions (U-Net's 2x2/2, the 3x3/2 that undoes a padded 3x3/2), 1D and 3D convolutions, a
//! transformer's GELU, layer norm and RMS norm, a diffusion U-Net's group norm and SiLU, an
//! instance norm, sigmoid, tanh and leaky ReLU, an LSTM, a GRU, dropout, bilinear upsampling,
//! rotary position encoding, SwiGLU, pools (ResNet's stem and head, DenseNet's transition, 1D max and average pools); a
//! transformer's softmax, multi-head attention, causal scaled dot-product attention, the same
//! with ALiBi's bias, and encoder layer (without and with dropout).
//!
//! `cargo run --release -p towers-bench --bin bench_layers [REPS [NAME]]` (default 10 timed
//! steps per version after 3 untimed ones, the two versions alternating step by step; with
//! `NAME`, only the single layers whose name holds it).

use std::time::Instant;

use burn::module::Module;
use burn::optim::{GradientsParams, ModuleOptimizer, SgdConfig};
use burn::tensor::{Device, Distribution, Int, Tensor, TensorData};
use towers_bench::{bench_device, reps};

/// The net with Burn's layers.
mod burn_layers {
    use burn::module::Module;
    use burn::nn;
    use burn::tensor::{Device, Int, Tensor};
    include!("../own_model_net.rs");
}

/// The same net with the drop-in layers.
mod drop_in_layers {
    use burn::module::Module;
    use burn::tensor::{Device, Int, Tensor};
    use towers_kernels::nn;
    include!("../own_model_net.rs");
}

/// Untimed steps before the timed ones, each version.
const WARM_UP: usize = 3;

/// One model in training: the model (taken and put back by each step) and its optimizer.
struct Training<M> {
    model: Option<M>,
    optim: ModuleOptimizer,
    seconds: f64,
}

impl<M: Module> Training<M> {
    fn new(model: M) -> Self {
        let optim = SgdConfig::new().init();
        Self {
            model: Some(model),
            optim,
            seconds: 0.0,
        }
    }

    /// One SGD step on `loss`, its time added to `seconds` when `timed`.
    fn step(&mut self, timed: bool, loss: impl Fn(&M) -> Tensor<1>) {
        let start = Instant::now();
        let model = self.model.take().expect("put back by every step");
        let loss = loss(&model);
        let device = loss.device();
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        self.model = Some(self.optim.step(0.01, model, grads));
        device.sync().expect("the device finishes the step");
        if timed {
            self.seconds += start.elapsed().as_secs_f64();
        }
    }
}

fn main() {
    let reps = reps(10);
    let (entry, device) = bench_device();
    let batch = 128;
    device.seed(0);
    let images = Tensor::<4>::random(
        [batch, 1, 12, 12],
        Distribution::Uniform(-1.0, 1.0),
        &device,
    );
    let labels: Vec<i64> = (0..batch as i64).map(|i| i % 4).collect();
    let labels = Tensor::<1, Int>::from_data(TensorData::new(labels, [batch]), &device);
    println!(
        "device: {entry}; examples/own_model.rs's net, batch {batch}, {reps} timed steps after \
         {WARM_UP}, alternating"
    );
    let mut burns = Training::new(burn_layers::Model::new(&device));
    let mut ours = Training::new(drop_in_layers::Model::new(&device));
    for rep in 0..WARM_UP + reps {
        let timed = rep >= WARM_UP;
        burns.step(timed, |model| model.loss(images.clone(), labels.clone()));
        ours.step(timed, |model| model.loss(images.clone(), labels.clone()));
    }
    let per_step = |seconds: f64| seconds * 1e3 / reps as f64;
    let (burn_ms, our_ms) = (per_step(burns.seconds), per_step(ours.seconds));
    println!("own_model net, Burn's layers:       {burn_ms:8.2} ms/step");
    println!("own_model net, towers_kernels::nn:  {our_ms:8.2} ms/step");
    println!(
        "own_model net: drop-in layers {:.2}x Burn's",
        burn_ms / our_ms
    );
    single_layers(reps, &device);
}

/// Each layer of [`layer_cases`] (those whose name holds the second argument, if any) forward
/// and backward (the input's and the weight's gradients), Burn's and the drop-in's
/// alternating, after [`WARM_UP`] calls each.
fn single_layers(reps: usize, device: &Device) {
    let only = std::env::args().nth(2).unwrap_or_default();
    for case in layer_cases(device)
        .into_iter()
        .filter(|case| case.name.contains(&only))
    {
        let time = |forward: &dyn Fn(&Tensor<3>) -> Tensor<3>| {
            let start = Instant::now();
            let y = forward(&case.input);
            let grads = (y.clone() * y).sum().backward();
            let sum = case.input.grad(&grads).expect("an input gradient").sum();
            sum.into_scalar::<f32>();
            start.elapsed().as_secs_f64()
        };
        let (mut burns, mut ours) = (0.0, 0.0);
        for rep in 0..WARM_UP + reps {
            let timed = if rep >= WARM_UP { 1.0 } else { 0.0 };
            burns += timed * time(&case.burns);
            ours += timed * time(&case.ours);
        }
        let per_call = |seconds: f64| seconds * 1e3 / reps as f64;
        let (burn_ms, our_ms) = (per_call(burns), per_call(ours));
        println!(
            "{}: Burn's {burn_ms:.2} ms, drop-in {our_ms:.2} ms: {:.2}x",
            case.name,
            burn_ms / our_ms
        );
    }
}

/// A layer both ways, on an input flattened to `[n, c, rest]` (each layer reshapes it back).
struct LayerCase {
    name: String,
    input: Tensor<3>,
    burns: Box<dyn Fn(&Tensor<3>) -> Tensor<3>>,
    ours: Box<dyn Fn(&Tensor<3>) -> Tensor<3>>,
}

/// The transposed convolutions (batch 16, 128 channels to 64 at 32x32, 64 to 32 at 64x64), the
/// 1D convolutions (batch 16: 64 channels of 1024 by 3, 128 of 256 by 5, 64 to 128 of 1024 by 3
/// at stride 2) and a 1D transposed one (64 to 32 of 1024, 4/2), a 3D one (3x3x3, 32 channels
/// to 32 of `[2, 32, 16, 32, 32]`), GELU, exact and approximated,
/// and a layer norm on a transformer's `[32, 256, 768]`, a group norm (32 groups), an instance
/// norm, SiLU, Mish, sigmoid, tanh, leaky ReLU and PReLU (a slope per channel) of `[8, 128, 64,
/// 64]`, dropout of `[32, 256, 768]`, bilinear doubling of `[8, 64, 64, 64]` (half-pixel
/// centres), an LSTM and a GRU (256 features to 256, batch 32 of 64 steps), rotary position
/// encoding of a transformer's queries (`[8, 12, 256, 64]`), LLaMA's SwiGLU (768 features to
/// 2048, batch 8 of 256 tokens).
fn layer_cases(device: &Device) -> Vec<LayerCase> {
    use burn::nn::{PaddingConfig1d, conv as burns};
    use towers_kernels::nn::conv as ours;
    let input = |dims: [usize; 3]| {
        Tensor::<3>::random(dims, Distribution::Uniform(-1.0, 1.0), device).require_grad()
    };
    let mut cases = Vec::new();
    for (c, side) in [(128, 32), (64, 64)] {
        for (kernel, padding) in [(2, 0), (3, 1)] {
            let config = ours::ConvTranspose2dConfig::new([c, c / 2], [kernel; 2])
                .with_stride([2, 2])
                .with_padding([padding; 2])
                .with_padding_out([padding; 2]);
            let layer = config.init(device);
            let burn_layer: burns::ConvTranspose2d = layer.clone().into();
            let image = move |x: &Tensor<3>| x.clone().reshape([16, c, side, side]);
            cases.push(LayerCase {
                name: format!(
                    "ConvTranspose2d {kernel}x{kernel}/2, {c}->{} at {side}",
                    c / 2
                ),
                input: input([16, c, side * side]),
                burns: Box::new(move |x| burn_layer.forward(image(x)).flatten(2, 3)),
                ours: Box::new(move |x| layer.forward(image(x)).flatten(2, 3)),
            });
        }
    }
    for (c_in, c_out, len, kernel, stride) in [
        (64, 64, 1024, 3, 1),
        (128, 128, 256, 5, 1),
        (64, 128, 1024, 3, 2),
    ] {
        let layer = ours::Conv1dConfig::new(c_in, c_out, kernel)
            .with_stride(stride)
            .with_padding(PaddingConfig1d::Same)
            .init(device);
        let burn_layer: burns::Conv1d = layer.clone().into();
        cases.push(LayerCase {
            name: format!("Conv1d {kernel}/{stride}, {c_in}->{c_out} of {len}"),
            input: input([16, c_in, len]),
            burns: Box::new(move |x| burn_layer.forward(x.clone())),
            ours: Box::new(move |x| layer.forward(x.clone())),
        });
    }
    let layer = ours::Conv3dConfig::new([32, 32], [3, 3, 3])
        .with_padding(burn::nn::PaddingConfig3d::Same)
        .init(device);
    let burn_layer: burns::Conv3d = layer.clone().into();
    let volume = |x: &Tensor<3>| x.clone().reshape([2, 32, 16, 32, 32]);
    cases.push(LayerCase {
        name: "Conv3d 3x3x3 same, 32->32 of [2, 32, 16, 32, 32]".into(),
        input: input([2, 32, 16 * 32 * 32]),
        burns: Box::new(move |x| burn_layer.forward(volume(x)).flatten(2, 4)),
        ours: Box::new(move |x| layer.forward(volume(x)).flatten(2, 4)),
    });
    let layer = ours::ConvTranspose1dConfig::new([64, 32], 4)
        .with_stride(2)
        .with_padding(1)
        .init(device);
    let burn_layer: burns::ConvTranspose1d = layer.clone().into();
    cases.push(LayerCase {
        name: "ConvTranspose1d 4/2 pad 1, 64->32 of 1024".into(),
        input: input([16, 64, 1024]),
        burns: Box::new(move |x| burn_layer.forward(x.clone())),
        ours: Box::new(move |x| layer.forward(x.clone())),
    });
    for approximate in [false, true] {
        let (layer, burn_layer) = match approximate {
            false => (towers_kernels::nn::Gelu::new(), burn::nn::Gelu::new()),
            true => (
                towers_kernels::nn::Gelu::new_approximate(),
                burn::nn::Gelu::new_approximate(),
            ),
        };
        cases.push(LayerCase {
            name: format!("Gelu (approximate: {approximate}) of [32, 256, 768]"),
            input: input([32, 256, 768]),
            burns: Box::new(move |x| burn_layer.forward(x.clone())),
            ours: Box::new(move |x| layer.forward(x.clone())),
        });
    }
    let layer = towers_kernels::nn::LayerNormConfig::new(768).init(device);
    let burn_layer: burn::nn::LayerNorm = layer.clone().into();
    cases.push(LayerCase {
        name: "LayerNorm of [32, 256, 768]".into(),
        input: input([32, 256, 768]),
        burns: Box::new(move |x| burn_layer.forward(x.clone())),
        ours: Box::new(move |x| layer.forward(x.clone())),
    });
    let layer = towers_kernels::nn::RmsNormConfig::new(768).init(device);
    let burn_layer: burn::nn::RmsNorm = layer.clone().into();
    cases.push(LayerCase {
        name: "RmsNorm of [32, 256, 768]".into(),
        input: input([32, 256, 768]),
        burns: Box::new(move |x| burn_layer.forward(x.clone())),
        ours: Box::new(move |x| layer.forward(x.clone())),
    });
    let image = |x: &Tensor<3>| x.clone().reshape([8, 128, 64, 64]);
    let layer = towers_kernels::nn::GroupNormConfig::new(32, 128).init(device);
    let burn_layer: burn::nn::GroupNorm = layer.clone().into();
    cases.push(LayerCase {
        name: "GroupNorm (32 groups) of [8, 128, 64, 64]".into(),
        input: input([8, 128, 64 * 64]),
        burns: Box::new(move |x| burn_layer.forward(image(x)).flatten(2, 3)),
        ours: Box::new(move |x| layer.forward(image(x)).flatten(2, 3)),
    });
    let layer = towers_kernels::nn::InstanceNormConfig::new(128).init(device);
    let burn_layer: burn::nn::InstanceNorm = layer.clone().into();
    cases.push(LayerCase {
        name: "InstanceNorm of [8, 128, 64, 64]".into(),
        input: input([8, 128, 64 * 64]),
        burns: Box::new(move |x| burn_layer.forward(image(x)).flatten(2, 3)),
        ours: Box::new(move |x| layer.forward(image(x)).flatten(2, 3)),
    });
    type Forward = Box<dyn Fn(&Tensor<3>) -> Tensor<3>>;
    let activation = |name: &str, burns: Forward, ours: Forward| LayerCase {
        name: format!("{name} of [8, 128, 64, 64]"),
        input: input([8, 128, 64 * 64]),
        burns,
        ours,
    };
    let leaky = towers_kernels::nn::LeakyReluConfig::new().init();
    let burn_leaky: burn::nn::LeakyRelu = leaky.clone().into();
    let prelu = towers_kernels::nn::PReluConfig::new()
        .with_num_parameters(128)
        .init(device);
    let burn_prelu: burn::nn::PRelu = prelu.clone().into();
    cases.extend([
        activation(
            "SiLU",
            Box::new(|x| burn::nn::activation::SiLU::new().forward(x.clone())),
            Box::new(|x| towers_kernels::nn::activation::SiLU::new().forward(x.clone())),
        ),
        activation(
            "Mish",
            Box::new(|x| burn::nn::activation::Mish::new().forward(x.clone())),
            Box::new(|x| towers_kernels::nn::activation::Mish::new().forward(x.clone())),
        ),
        activation(
            "Sigmoid",
            Box::new(|x| burn::nn::Sigmoid::new().forward(x.clone())),
            Box::new(|x| towers_kernels::nn::Sigmoid::new().forward(x.clone())),
        ),
        activation(
            "Tanh",
            Box::new(|x| burn::nn::Tanh::new().forward(x.clone())),
            Box::new(|x| towers_kernels::nn::Tanh::new().forward(x.clone())),
        ),
        activation(
            "LeakyRelu (0.01)",
            Box::new(move |x| burn_leaky.forward(x.clone())),
            Box::new(move |x| leaky.forward(x.clone())),
        ),
        activation(
            "PRelu (128)",
            Box::new(move |x| burn_prelu.forward(x.clone())),
            Box::new(move |x| prelu.forward(x.clone())),
        ),
    ]);
    let layer = towers_kernels::nn::DropoutConfig::new(0.1).init();
    let burn_layer: burn::nn::Dropout = layer.clone().into();
    cases.push(LayerCase {
        name: "Dropout (0.1) of [32, 256, 768]".into(),
        input: input([32, 256, 768]),
        burns: Box::new(move |x| burn_layer.forward(x.clone())),
        ours: Box::new(move |x| layer.forward(x.clone())),
    });
    let layer = towers_kernels::nn::interpolate::Interpolate2dConfig::new()
        .with_scale_factor(Some([2.0, 2.0]))
        .with_mode(towers_kernels::nn::interpolate::InterpolateMode::Linear)
        .with_align_corners(false)
        .init();
    let burn_layer: burn::nn::interpolate::Interpolate2d = layer.clone().into();
    let map = |x: &Tensor<3>| x.clone().reshape([8, 64, 64, 64]);
    cases.push(LayerCase {
        name: "Interpolate2d (bilinear, x2) of [8, 64, 64, 64]".into(),
        input: input([8, 64, 64 * 64]),
        burns: Box::new(move |x| burn_layer.forward(map(x)).flatten(2, 3)),
        ours: Box::new(move |x| layer.forward(map(x)).flatten(2, 3)),
    });
    let layer = towers_kernels::nn::LstmConfig::new(256, 256, true).init(device);
    let burn_layer: burn::nn::Lstm = layer.clone().into();
    cases.push(LayerCase {
        name: "Lstm (256 -> 256) of [32, 64, 256]".into(),
        input: input([32, 64, 256]),
        burns: Box::new(move |x| burn_layer.forward(x.clone(), None).0),
        ours: Box::new(move |x| layer.forward(x.clone(), None).0),
    });
    let layer = towers_kernels::nn::GruConfig::new(256, 256, true).init(device);
    let burn_layer: burn::nn::Gru = layer.clone().into();
    cases.push(LayerCase {
        name: "Gru (256 -> 256) of [32, 64, 256]".into(),
        input: input([32, 64, 256]),
        burns: Box::new(move |x| burn_layer.forward(x.clone(), None)),
        ours: Box::new(move |x| layer.forward(x.clone(), None)),
    });
    let layer = towers_kernels::nn::RotaryEncodingConfig::new(256, 64).init(device);
    let burn_layer: burn::nn::RotaryEncoding = layer.clone().into();
    let heads = |x: &Tensor<3>| x.clone().reshape([8, 12, 256, 64]);
    cases.push(LayerCase {
        name: "RotaryEncoding of [8, 12, 256, 64]".into(),
        input: input([8, 12, 256 * 64]),
        burns: Box::new(move |x| burn_layer.forward(heads(x)).flatten(2, 3)),
        ours: Box::new(move |x| layer.forward(heads(x)).flatten(2, 3)),
    });
    let layer = towers_kernels::nn::SwiGluConfig::new(768, 2048).init(device);
    let burn_layer: burn::nn::SwiGlu = layer.clone().into();
    cases.push(LayerCase {
        name: "SwiGlu (768 -> 2048) of [8, 256, 768]".into(),
        input: input([8, 256, 768]),
        burns: Box::new(move |x| burn_layer.forward(x.clone())),
        ours: Box::new(move |x| layer.forward(x.clone())),
    });
    cases.extend(pool_cases(device));
    cases.extend(transformer_cases(device));
    cases
}

/// Pools: ResNet's stem (3x3/2 padded by 1, batch 16 at 112x112), DenseNet's transition (2x2/2
/// of `[16, 128, 56, 56]`), ResNet-50's head (adaptive to 1x1 from `[32, 2048, 7, 7]`), a
/// sequence's max pool (3/2 padded by 1) and average pool (3/1 padded by 1) of `[16, 64, 2048]`.
fn pool_cases(device: &Device) -> Vec<LayerCase> {
    use burn::nn::{PaddingConfig1d, PaddingConfig2d};
    use towers_kernels::nn::pool;
    let input = |dims: [usize; 3]| {
        Tensor::<3>::random(dims, Distribution::Uniform(-1.0, 1.0), device).require_grad()
    };
    let image = |[n, c, h, w]: [usize; 4]| move |x: &Tensor<3>| x.clone().reshape([n, c, h, w]);
    let stem = pool::MaxPool2dConfig::new([3, 3])
        .with_strides([2, 2])
        .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
        .init();
    let burn_stem: burn::nn::pool::MaxPool2d = stem.clone().into();
    let stem_image = image([16, 64, 112, 112]);
    let transition = pool::AvgPool2dConfig::new([2, 2]).init();
    let burn_transition: burn::nn::pool::AvgPool2d = transition.clone().into();
    let transition_image = image([16, 128, 56, 56]);
    let head = pool::AdaptiveAvgPool2dConfig::new([1, 1]).init();
    let burn_head: burn::nn::pool::AdaptiveAvgPool2d = head.clone().into();
    let head_image = image([32, 2048, 7, 7]);
    let max1d = pool::MaxPool1dConfig::new(3)
        .with_stride(2)
        .with_padding(PaddingConfig1d::Explicit(1, 1))
        .init();
    let burn_max1d: burn::nn::pool::MaxPool1d = max1d.clone().into();
    let avg1d = pool::AvgPool1dConfig::new(3)
        .with_stride(1)
        .with_padding(PaddingConfig1d::Explicit(1, 1))
        .init();
    let burn_avg1d: burn::nn::pool::AvgPool1d = avg1d.clone().into();
    vec![
        LayerCase {
            name: "MaxPool2d 3x3/2 pad 1 of [16, 64, 112, 112]".into(),
            input: input([16, 64, 112 * 112]),
            burns: Box::new(move |x| burn_stem.forward(stem_image(x)).flatten(2, 3)),
            ours: Box::new(move |x| stem.forward(stem_image(x)).flatten(2, 3)),
        },
        LayerCase {
            name: "AvgPool2d 2x2/2 of [16, 128, 56, 56]".into(),
            input: input([16, 128, 56 * 56]),
            burns: Box::new(move |x| burn_transition.forward(transition_image(x)).flatten(2, 3)),
            ours: Box::new(move |x| transition.forward(transition_image(x)).flatten(2, 3)),
        },
        LayerCase {
            name: "AdaptiveAvgPool2d to 1x1 of [32, 2048, 7, 7]".into(),
            input: input([32, 2048, 49]),
            burns: Box::new(move |x| burn_head.forward(head_image(x)).flatten(2, 3)),
            ours: Box::new(move |x| head.forward(head_image(x)).flatten(2, 3)),
        },
        LayerCase {
            name: "MaxPool1d 3/2 pad 1 of [16, 64, 2048]".into(),
            input: input([16, 64, 2048]),
            burns: Box::new(move |x| burn_max1d.forward(x.clone())),
            ours: Box::new(move |x| max1d.forward(x.clone())),
        },
        LayerCase {
            name: "AvgPool1d 3/1 pad 1 of [16, 64, 2048]".into(),
            input: input([16, 64, 2048]),
            burns: Box::new(move |x| burn_avg1d.forward(x.clone())),
            ours: Box::new(move |x| avg1d.forward(x.clone())),
        },
    ]
}

/// A transformer's (BERT-base's widths, batch 8 of 256 tokens, no dropout): the attention's
/// softmax over `[8 · 12, 256, 256]` scores, its multi-head attention and a whole encoder layer
/// (post-norm, GELU); that layer again with BERT's dropout of 0.1.
fn transformer_cases(device: &Device) -> Vec<LayerCase> {
    use burn::tensor::ops::AttentionModuleOptions;
    use towers_kernels::nn::attention::{MhaInput, MultiHeadAttentionConfig};
    use towers_kernels::nn::transformer::{TransformerEncoderConfig, TransformerEncoderInput};
    let input = |dims: [usize; 3]| {
        Tensor::<3>::random(dims, Distribution::Uniform(-1.0, 1.0), device).require_grad()
    };
    let softmax = LayerCase {
        name: "Softmax of [96, 256, 256]".into(),
        input: input([96, 256, 256]),
        burns: Box::new(|x| burn::tensor::activation::softmax(x.clone(), 2)),
        ours: Box::new(|x| towers_kernels::softmax(x.clone(), 2)),
    };
    let layer = MultiHeadAttentionConfig::new(768, 12)
        .with_dropout(0.0)
        .init(device);
    let burn_layer: burn::nn::attention::MultiHeadAttention = layer.clone().into();
    let attention = LayerCase {
        name: "MultiHeadAttention (768, 12 heads) of [8, 256, 768]".into(),
        input: input([8, 256, 768]),
        burns: Box::new(move |x| {
            let input = burn::nn::attention::MhaInput::self_attn(x.clone());
            burn_layer.forward(input).context
        }),
        ours: Box::new(move |x| layer.forward(MhaInput::self_attn(x.clone())).context),
    };
    let causal = AttentionModuleOptions {
        is_causal: true,
        ..Default::default()
    };
    let qkv = |x: &Tensor<3>| {
        let heads = x.clone().reshape([8, 12, 256, 64]);
        [heads.clone(), heads.clone() * 0.5, heads * 0.25]
    };
    let scaled_attention = LayerCase {
        name: "attention (scaled dot-product, causal) of [8, 12, 256, 64]".into(),
        input: input([8, 12, 256 * 64]),
        burns: Box::new(move |x| {
            let [q, k, v] = qkv(x);
            burn::tensor::module::attention(q, k, v, None, None, causal).flatten(2, 3)
        }),
        ours: Box::new(move |x| {
            let [q, k, v] = qkv(x);
            towers_kernels::attention(q, k, v, None, None, causal).flatten(2, 3)
        }),
    };
    let layer = TransformerEncoderConfig::new(768, 3072, 12, 1)
        .with_dropout(0.0)
        .init(device);
    let burn_layer: burn::nn::transformer::TransformerEncoder = layer.clone().into();
    let encoder = LayerCase {
        name: "TransformerEncoder layer (768, 12 heads, 3072) of [8, 256, 768]".into(),
        input: input([8, 256, 768]),
        burns: Box::new(move |x| {
            let input = burn::nn::transformer::TransformerEncoderInput::new(x.clone());
            burn_layer.forward(input)
        }),
        ours: Box::new(move |x| layer.forward(TransformerEncoderInput::new(x.clone()))),
    };
    let layer = TransformerEncoderConfig::new(768, 3072, 12, 1)
        .with_dropout(0.1)
        .init(device);
    let burn_layer: burn::nn::transformer::TransformerEncoder = layer.clone().into();
    let encoder_dropout = LayerCase {
        name: "TransformerEncoder layer, dropout 0.1, of [8, 256, 768]".into(),
        input: input([8, 256, 768]),
        burns: Box::new(move |x| {
            let input = burn::nn::transformer::TransformerEncoderInput::new(x.clone());
            burn_layer.forward(input)
        }),
        ours: Box::new(move |x| layer.forward(TransformerEncoderInput::new(x.clone()))),
    };
    vec![
        softmax,
        attention,
        scaled_attention,
        alibi_attention_case(device),
        encoder,
        encoder_dropout,
    ]
}

/// Scaled dot-product attention of `[8, 12, 256, 64]` heads (made of one input as the causal
/// case makes them) with ALiBi's bias: head `h`'s slope `2^-(h + 1)` times each key's distance
/// from its query, `[1, 12, 256, 256]`, a constant.
fn alibi_attention_case(device: &Device) -> LayerCase {
    use burn::tensor::ops::AttentionModuleOptions;
    let [heads, seq] = [12, 256];
    let distances: Vec<f32> = (0..heads * seq * seq)
        .map(|i| {
            let (head, query, key) = (i / (seq * seq), i / seq % seq, i % seq);
            -(query as f32 - key as f32).abs() / (1u32 << (head + 1)) as f32
        })
        .collect();
    let bias = Tensor::<4>::from_data(TensorData::new(distances, [1, heads, seq, seq]), device);
    let burns_bias = bias.clone();
    let qkv = |x: &Tensor<3>| {
        let heads = x.clone().reshape([8, 12, 256, 64]);
        [heads.clone(), heads.clone() * 0.5, heads * 0.25]
    };
    let options = AttentionModuleOptions::default();
    let input = Tensor::<3>::random([8, 12, 256 * 64], Distribution::Uniform(-1.0, 1.0), device);
    LayerCase {
        name: "attention (scaled dot-product, ALiBi's bias) of [8, 12, 256, 64]".into(),
        input: input.require_grad(),
        burns: Box::new(move |x| {
            let [q, k, v] = qkv(x);
            let bias = Some(burns_bias.clone());
            burn::tensor::module::attention(q, k, v, None, bias, options).flatten(2, 3)
        }),
        ours: Box::new(move |x| {
            let [q, k, v] = qkv(x);
            towers_kernels::attention(q, k, v, None, Some(bias.clone()), options).flatten(2, 3)
        }),
    }
}
