//! Evaluates ResNet-50 weights (`--depth` 18, 34, 101 or 152 too; keras.applications'
//! ResNet50V2's with `--v2`; MobileNetV2's with `--mobilenet-v2`; EfficientNet-B0's with
//! `--efficientnet 0`, up to 7) once: precision@1 and @5 over every example of an ImageNet-style
//! validation set, as torchvision's reference `references/classification/train.py --test-only`
//! counts them, through torchvision's evaluation preset (shorter side to 256, central 224,
//! ImageNet's mean and deviation; `--resize-size 232` for its `IMAGENET1K_V2` weights).
//!
//! ```text
//! cargo run --release --example resnet_eval -- --checkpoint resnet50.pth --data-dir imagenet/val
//! cargo run --release --example resnet_eval -- --checkpoint resnet50.h5 --data-dir imagenet/val
//! cargo run --release --example resnet_eval -- --depth 18        # the `resnet` example's run
//! cargo run --release --example resnet_eval -- --v2 --checkpoint resnet50v2.h5 --data-dir imagenet/val
//! cargo run --release --example resnet_eval -- --mobilenet-v2 --checkpoint mobilenet_v2.pth \
//!     --data-dir imagenet/val
//! cargo run --release --example resnet_eval -- --efficientnet 0 --checkpoint efficientnetb0.h5 \
//!     --data-dir imagenet/val
//! ```
//!
//! The data: TF's `validation-*` shards or an image folder `DIR/<class>/<image>` (classes in
//! name order; folders without images keep their labels, so 1000 synset folders of which a few
//! hold images evaluate 1000-class weights on those); without `--data-dir`, the built-in
//! held-out images of the `resnet` example. torchvision's weights (a `.pth`) and Keras's have
//! no background class: the shards' labels `1..=1000` are read as `0..1000`. Keras's weights
//! (keras.applications' `ResNet50` in a `.h5` or `.keras` file) are evaluated in Keras's layout
//! through Keras's preprocessing (`KerasImageNetEval`); so are the `resnet` example's
//! checkpoints of that layout, with `--layout keras`. ResNet50V2's (`--v2`) and Keras's
//! MobileNetV2's through Keras's "tf" mode, Keras's EfficientNets' on the pixels.

use std::path::PathBuf;

use clap::Parser;

use burn::tensor::Device;
use burn_towers::models::weights::{TfNamed, TorchNamed};
use burn_towers::models::{
    BasicBlock, Bottleneck, EfficientNetConfig, EfficientNetLayout, MobileNetLayout,
    MobileNetV2Config, MobileNetV3Config, MobileNetV3Variant, ResNetV2Config,
};
use burn_towers::models::{ImageClassifier, ResNetConfig, ResNetLayout, ResidualBlock};
use burn_towers::train::{
    EvalArgs, InceptionData, Preprocessing, Split, WeightsArgs, efficientnet_for_weights,
    is_keras_file, is_pytorch_file, load_weights, mobilenet_v3_for_weights, parse_args,
    resnet_layout_for,
};

#[derive(Parser)]
#[command(
    about = "Evaluate ResNet weights (v1, Keras's v2 with --v2), MobileNetV2's or EfficientNet's: precision @ 1 and @ 5"
)]
struct Args {
    #[command(flatten)]
    weights: WeightsArgs,
    /// Weights: a torchvision state dict (`.pth`), a Keras file of `ResNet50` (`.h5`,
    /// `.keras`), one of ours (file or train directory), a `.safetensors` export or a TF
    /// checkpoint in Keras's names.
    #[arg(long, default_value = "/tmp/resnet_train")]
    checkpoint: PathBuf,
    /// 50, 101 or 152 (bottleneck blocks), 18 or 34 (basic blocks); with `--v2`, 50, 101 or
    /// 152.
    #[arg(long, default_value_t = 50)]
    depth: usize,
    /// keras.applications' pre-activation ResNet v2 (`ResNet50V2`) instead of v1.
    #[arg(long)]
    v2: bool,
    /// MobileNetV2 instead of a ResNet, in `--layout`'s library's layout.
    #[arg(long, conflicts_with_all = ["v2", "depth"])]
    mobilenet_v2: bool,
    /// MobileNetV3 (`large` or `small`) instead of a ResNet, in `--layout`'s library's layout.
    #[arg(long, value_name = "VARIANT", conflicts_with_all = ["v2", "depth", "mobilenet_v2"])]
    mobilenet_v3: Option<MobileNetV3Variant>,
    /// MobileNetV2's and V3's width multiplier (Keras's `alpha`, torchvision's `width_mult`).
    #[arg(long, default_value_t = 1.0)]
    width: f64,
    /// MobileNetV3: Keras's minimalistic network (3x3 kernels, ReLU, no gates).
    #[arg(long, requires = "mobilenet_v3")]
    minimalistic: bool,
    /// EfficientNet-B`B` (0 to 7) instead of a ResNet, in `--layout`'s library's layout.
    #[arg(long, value_name = "B", conflicts_with_all = ["v2", "depth", "mobilenet_v2", "mobilenet_v3"])]
    #[arg(value_parser = clap::value_parser!(u8).range(0..=7))]
    efficientnet: Option<u8>,
    #[command(flatten)]
    eval: EvalArgs,
    /// Side of the square input: 224 with `--data-dir` (EfficientNet: its variant's), 64 on
    /// the built-in data (the `resnet` example's defaults).
    #[arg(long)]
    image_size: Option<usize>,
    /// The shorter side before the central crop (default: 256 for 224, torchvision's
    /// `IMAGENET1K_V1` preset; `IMAGENET1K_V2` takes 232).
    #[arg(long)]
    resize_size: Option<usize>,
    /// Whose ResNet, MobileNetV2 or EfficientNet (the `resnet` example's flag): `torchvision`
    /// or `keras`; default: Keras's for Keras weights, else torchvision's.
    #[arg(long)]
    layout: Option<ResNetLayout>,
    /// The preprocessing the weights were trained with (the `resnet` example's flag); default:
    /// the layout's library's, `keras-tf` for `--v2` and Keras's MobileNetV2, `keras-pixels`
    /// for Keras's EfficientNet, `torchvision-bicubic` for torchvision's.
    #[arg(long, value_enum)]
    preprocessing: Option<Preprocessing>,
}

fn main() -> anyhow::Result<()> {
    let args: Args = parse_args();
    if args.v2 {
        if args.layout.is_some() {
            anyhow::bail!("--layout chooses a ResNet v1's; --v2 is Keras's network alone");
        }
        let stages = ResNetV2Config::of_depth(args.depth, 0);
        let stages = (stages.ok_or_else(|| anyhow::anyhow!("--v2 takes --depth 50, 101 or 152")))?;
        let net = |classes, size, device: &Device| {
            (stages.with_num_classes(classes))
                .with_image_size(size)
                .init(device)
        };
        return eval(&args, Preprocessing::KerasTf, net);
    }
    let layout = (args.layout).unwrap_or(resnet_layout_for(&args.checkpoint));
    if args.mobilenet_v2 {
        let layout = MobileNetLayout::from(layout);
        let net = |classes, size, device: &Device| {
            (MobileNetV2Config::new().with_layout(layout))
                .with_width(args.width)
                .with_num_classes(classes)
                .with_image_size(size)
                .init(device)
        };
        return eval(&args, Preprocessing::for_mobilenet(layout), net);
    }
    if let Some(variant) = args.mobilenet_v3 {
        let layout = MobileNetLayout::from(layout);
        let config = (MobileNetV3Config::new(variant).with_layout(layout))
            .with_width(args.width)
            .with_minimalistic(args.minimalistic);
        let config = mobilenet_v3_for_weights(config, &args.checkpoint)?;
        let net = |classes, size, device: &Device| {
            (config.clone().with_num_classes(classes))
                .with_image_size(size)
                .init(device)
        };
        return eval(&args, Preprocessing::for_mobilenet_v3(layout), net);
    }
    if let Some(variant) = args.efficientnet {
        let layout = EfficientNetLayout::from(layout);
        let config = EfficientNetConfig::b(variant.into()).with_layout(layout);
        let config = efficientnet_for_weights(config, &args.checkpoint)?;
        let net = |classes, size, device: &Device| {
            (config.clone().with_num_classes(classes))
                .with_image_size(size)
                .init(device)
        };
        return eval(&args, Preprocessing::for_efficientnet(layout), net);
    }
    match args.depth {
        18 => eval_v1::<BasicBlock>(&args, ResNetConfig::resnet18(0).with_layout(layout)),
        34 => eval_v1::<BasicBlock>(&args, ResNetConfig::resnet34(0).with_layout(layout)),
        50 => eval_v1::<Bottleneck>(&args, ResNetConfig::resnet50(0).with_layout(layout)),
        101 => eval_v1::<Bottleneck>(&args, ResNetConfig::resnet101(0).with_layout(layout)),
        152 => eval_v1::<Bottleneck>(&args, ResNetConfig::resnet152(0).with_layout(layout)),
        other => anyhow::bail!("--depth is 18, 34, 50, 101 or 152, not {other}"),
    }
}

/// Evaluates a ResNet v1 of `Block`s with `stages`' blocks per stage (see [`eval`]).
fn eval_v1<Block: ResidualBlock + 'static>(
    args: &Args,
    stages: ResNetConfig,
) -> anyhow::Result<()> {
    let layout = stages.layout;
    let net = |classes, size, device: &Device| {
        (stages.with_num_classes(classes))
            .with_image_size(size)
            .init::<Block>(device)
    };
    eval(args, Preprocessing::for_resnet(layout), net)
}

/// Evaluates the network `net` builds (of its classes and image side) through `preprocessing`
/// unless `--preprocessing` says otherwise.
fn eval<M>(
    args: &Args,
    preprocessing: Preprocessing,
    net: impl FnOnce(usize, usize, &Device) -> M,
) -> anyhow::Result<()>
where
    M: ImageClassifier + TfNamed + TorchNamed,
{
    let dir = args.eval.data_dir.as_deref();
    let full_size = match args.efficientnet {
        Some(variant) => EfficientNetConfig::b(variant.into()).image_size,
        None => 224,
    };
    let image_size = (args.image_size).unwrap_or(if dir.is_some() { full_size } else { 64 });
    let preprocessing = (args.preprocessing).unwrap_or(preprocessing);
    let eval = preprocessing.eval(image_size, args.resize_size)?;
    // torchvision's and Keras's weights have no background class.
    let foreign = is_pytorch_file(&args.checkpoint) || is_keras_file(&args.checkpoint);
    let data = match foreign {
        true => InceptionData::open_without_background(dir, Split::Validation, image_size, eval)?,
        false => InceptionData::open(dir, Split::Validation, image_size, eval)?,
    };
    println!("evaluating on {}", data.description);
    let classes = args.eval.num_classes(&data);
    let model = net(classes, image_size, &args.weights.device()?);
    let options = args.weights.load_options();
    let (model, report) = load_weights(model, &args.checkpoint, options)?;
    println!("{report}");
    Ok(args.eval.evaluate(&model, &data)?)
}
