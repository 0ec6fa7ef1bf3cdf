//! Trains ResNet-50 (`--depth` 18, 34, 101 or 152 too; torchvision's layout, or Keras's with
//! `--layout keras`, written with Burn's layers as `towers_kernels::nn` serves them), or
//! keras.applications' ResNet50V2 (`--v2`), or MobileNetV2 (`--mobilenet-v2`) or EfficientNet
//! (`--efficientnet 0` for B0, up to 7) in either library's layout, on one or more towers.
//!
//! ```text
//! cargo run --release --example resnet                  # built-in data: 64x64, 4 classes, ResNet-50
//! cargo run --release --example resnet -- --depth 18 --data-dir flowers --batch-size 32 \
//!     --pretrained resnet18.pth                         # torchvision's weights, a new head
//! cargo run --release --example resnet -- --data-dir flowers --batch-size 32 \
//!     --pretrained resnet50_weights_tf_dim_ordering_tf_kernels_notop.h5   # Keras's
//! cargo run --release --example resnet -- --v2 --data-dir flowers --batch-size 32 \
//!     --pretrained resnet50v2_weights_tf_dim_ordering_tf_kernels_notop.h5
//! cargo run --release --example resnet -- --mobilenet-v2 --data-dir flowers --batch-size 32 \
//!     --pretrained mobilenet_v2_weights_tf_dim_ordering_tf_kernels_1.0_224_no_top.h5
//! cargo run --release --example resnet -- --efficientnet 0 --data-dir flowers --batch-size 32 \
//!     --pretrained efficientnetb0_notop.h5
//! ```
//!
//! With `--data-dir` (TF's ImageNet shards or an image folder `DIR/<class>/<image>`),
//! torchvision's reference recipe at a batch of 32 ([`TrainConfig::resnet`]: 224x224, SGD with
//! momentum 0.9 at 0.0125, the recipe's 0.1 for 256 images scaled, decayed by 0.1 every 30
//! epochs, weight decay 0.0001) and its preprocessing (`TorchvisionTrain`: a random crop of 8%
//! to 100% of the area resized, a flip, ImageNet's mean and deviation; what torchvision's
//! weights expect); `--preprocessing inception` takes TF's Inception distortions instead
//! (pixels in [-1, 1]). Keras's weights (`--pretrained` a `.h5` or `.keras` file of
//! keras.applications' `ResNet50`) train Keras's layout through Keras's preprocessing
//! (`--preprocessing keras`: torchvision's crops and flips, BGR less the mean pixel), and
//! ResNet50V2 and Keras's MobileNetV2 through Keras's "tf" mode (`keras-tf`: the same crops and
//! flips, values in [-1, 1]), Keras's EfficientNets on the pixels (`keras-pixels`: the same
//! crops and flips, values in 0-255, which the network normalizes itself). Without `--data-dir`, a run on the built-in data
//! ([`TrainConfig::resnet_builtin`]), then precision@1 on its held-out images through the
//! matching evaluation preprocessing. Ctrl-C stops after a checkpoint.

use clap::Parser;

use burn::tensor::Device;
use burn_towers::models::weights::{TfNamed, TorchNamed};
use burn_towers::models::{
    BasicBlock, Bottleneck, EfficientNetConfig, EfficientNetLayout, MobileNetLayout,
    MobileNetV2Config, MobileNetV3Config, MobileNetV3Variant, ResNetV2Config,
};
use burn_towers::models::{ImageClassifier, ResNetConfig, ResNetLayout, ResidualBlock};
use burn_towers::train::{
    InceptionData, Preprocessing, Split, StopFlag, TrainArgs, TrainConfig, Trainer,
    efficientnet_for_weights, mobilenet_v3_for_weights, mpi_job, parse_args, resnet_layout_for,
};

#[derive(Parser)]
#[command(
    about = "Train ResNet-50 (or -18, -34, -101, -152, ResNet50V2, MobileNetV2 or EfficientNet) on towers"
)]
struct Args {
    #[command(flatten)]
    train: TrainArgs,
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
    /// Side of the square input images: 224 with `--data-dir` (EfficientNet: its variant's),
    /// 64 on the built-in data.
    #[arg(long)]
    image_size: Option<usize>,
    /// Outputs of the logits; the data's when absent.
    #[arg(long)]
    num_classes: Option<usize>,
    /// Whose ResNet (or MobileNetV2, EfficientNet): `torchvision` (v1.5) or `keras`
    /// (keras.applications' v1, with biases); default: Keras's for `--pretrained` Keras
    /// weights, else torchvision's.
    #[arg(long)]
    layout: Option<ResNetLayout>,
    /// The input preprocessing: torchvision's (what its ResNet weights expect; with
    /// `torchvision-bicubic` its evaluation resizes by Pillow's bicubic filter, as for its
    /// EfficientNets), TF's Inception distortions, Keras's (BGR less the mean pixel), Keras's
    /// "tf" mode (in [-1, 1]) or Keras's pixels (in 0-255); default: the layout's library's,
    /// `keras-tf` for `--v2` and Keras's MobileNetV2, `keras-pixels` for Keras's EfficientNet,
    /// `torchvision-bicubic` for torchvision's.
    #[arg(long, value_enum)]
    preprocessing: Option<Preprocessing>,
}

impl Args {
    /// The layout: `--layout`, else that of the `--pretrained` weights.
    fn layout(&self) -> ResNetLayout {
        let pretrained = self.train.pretrained.as_deref();
        (self.layout)
            .or(pretrained.map(resnet_layout_for))
            .unwrap_or(ResNetLayout::Torchvision)
    }
}

fn main() -> anyhow::Result<()> {
    let args: Args = parse_args();
    if args.v2 {
        if args.layout.is_some() {
            anyhow::bail!("--layout chooses a ResNet v1's; --v2 is Keras's network alone");
        }
        let stages = ResNetV2Config::of_depth(args.depth, 0);
        let stages = (stages.ok_or_else(|| anyhow::anyhow!("--v2 takes --depth 50, 101 or 152")))?;
        let net = |classes, size, decay, device: &Device| {
            (stages.clone().with_num_classes(classes))
                .with_image_size(size)
                .with_weight_decay(decay)
                .init(device)
        };
        return train(&args, Preprocessing::KerasTf, net);
    }
    let layout = args.layout();
    if args.mobilenet_v2 {
        let layout = MobileNetLayout::from(layout);
        let net = |classes, size, decay, device: &Device| {
            (MobileNetV2Config::new().with_layout(layout))
                .with_width(args.width)
                .with_num_classes(classes)
                .with_image_size(size)
                .with_weight_decay(decay)
                .init(device)
        };
        return train(&args, Preprocessing::for_mobilenet(layout), net);
    }
    if let Some(variant) = args.mobilenet_v3 {
        let layout = MobileNetLayout::from(layout);
        let mut config = (MobileNetV3Config::new(variant).with_layout(layout))
            .with_width(args.width)
            .with_minimalistic(args.minimalistic);
        if let Some(weights) = &args.train.pretrained {
            config = mobilenet_v3_for_weights(config, weights)?;
        }
        let net = |classes, size, decay, device: &Device| {
            (config.clone().with_num_classes(classes))
                .with_image_size(size)
                .with_weight_decay(decay)
                .init(device)
        };
        return train(&args, Preprocessing::for_mobilenet_v3(layout), net);
    }
    if let Some(variant) = args.efficientnet {
        let layout = EfficientNetLayout::from(layout);
        let mut config = EfficientNetConfig::b(variant.into()).with_layout(layout);
        if let Some(weights) = &args.train.pretrained {
            config = efficientnet_for_weights(config, weights)?;
        }
        let net = |classes, size, decay, device: &Device| {
            (config.clone().with_num_classes(classes))
                .with_image_size(size)
                .with_weight_decay(decay)
                .init(device)
        };
        return train(&args, Preprocessing::for_efficientnet(layout), net);
    }
    match args.depth {
        18 => train_v1::<BasicBlock>(&args, ResNetConfig::resnet18(0).with_layout(layout)),
        34 => train_v1::<BasicBlock>(&args, ResNetConfig::resnet34(0).with_layout(layout)),
        50 => train_v1::<Bottleneck>(&args, ResNetConfig::resnet50(0).with_layout(layout)),
        101 => train_v1::<Bottleneck>(&args, ResNetConfig::resnet101(0).with_layout(layout)),
        152 => train_v1::<Bottleneck>(&args, ResNetConfig::resnet152(0).with_layout(layout)),
        other => anyhow::bail!("--depth is 18, 34, 50, 101 or 152, not {other}"),
    }
}

/// Trains a ResNet v1 of `Block`s with `stages`' blocks per stage (see [`train`]).
fn train_v1<Block: ResidualBlock + 'static>(
    args: &Args,
    stages: ResNetConfig,
) -> anyhow::Result<()> {
    let net = |classes, size, decay, device: &Device| {
        (stages.clone().with_num_classes(classes))
            .with_image_size(size)
            .with_weight_decay(decay)
            .init::<Block>(device)
    };
    train(args, Preprocessing::for_resnet(stages.layout), net)
}

/// Trains the network `net` builds (of its classes, image side and weight decay) through
/// `preprocessing` unless `--preprocessing` says otherwise, then (on the built-in data)
/// evaluates it.
fn train<M, Net>(args: &Args, preprocessing: Preprocessing, net: Net) -> anyhow::Result<()>
where
    M: ImageClassifier + TfNamed + TorchNamed + 'static,
    Net: Fn(usize, usize, f64, &Device) -> M + Sync,
{
    let data_dir = args.train.data_dir.as_deref();
    let full_size = match args.efficientnet {
        Some(variant) => EfficientNetConfig::b(variant.into()).image_size,
        None => 224,
    };
    let image_size = (args.image_size).unwrap_or(if data_dir.is_some() { full_size } else { 64 });
    let config = match data_dir {
        Some(_) => args.train.config(TrainConfig::resnet())?,
        None => args.train.builtin_config(TrainConfig::resnet_builtin())?,
    };
    let preprocessing = (args.preprocessing).unwrap_or(preprocessing);
    let train = preprocessing.train(image_size);
    let data = InceptionData::open(data_dir, Split::Train, image_size, train)?;
    println!("training data: {}", data.description);
    let num_classes = args.num_classes.unwrap_or(data.num_classes);
    let name = match (
        args.efficientnet,
        args.mobilenet_v3,
        args.mobilenet_v2,
        args.v2,
    ) {
        (Some(variant), ..) => format!("EfficientNet-B{variant}"),
        (_, Some(variant), ..) => format!("MobileNetV3-{variant:?}"),
        (_, _, true, _) => "MobileNetV2".to_string(),
        (.., true) => format!("ResNet{}V2", args.depth),
        _ => format!("ResNet-{}", args.depth),
    };
    println!(
        "{name}, {image_size}x{image_size} images, {num_classes} classes, batch {}, {} steps",
        config.batch_size, config.max_steps
    );
    let decay = config.weight_decay;
    let readers = config.reader_threads.unwrap_or(4);
    // Under mpirun: one rank of the job; rank 0 alone writes, reports and evaluates.
    let job = mpi_job(&config)?;
    let rank_zero = job.as_ref().is_none_or(|p| p.rank() == 0);
    let trained = Trainer::new(config)
        .with_processes(job)
        .with_stop(StopFlag::ctrl_c()?)
        .with_prepare(args.train.fine_tuning())
        .run(
            |device| net(num_classes, image_size, decay, device),
            &data.input,
        )?;
    if !rank_zero {
        return Ok(());
    }
    args.train.report(&trained)?;
    let eval = preprocessing.eval(image_size, None)?;
    data.report_builtin_held_out_through(&trained, eval, readers)?;
    // Last: the evaluation's kernels are tuned too.
    Ok(args.train.end_tuning()?)
}
