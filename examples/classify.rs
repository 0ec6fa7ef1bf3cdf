//! Classifies image files (JPEG, PNG, BMP, PPM/PGM, TIFF or WebP, greyscale included) with
//! Inception v3, ResNet-50 or -18, keras.applications' ResNet50V2, MobileNetV2, MobileNetV3
//! Large or Small, or EfficientNet B0-B7 (torchvision's or Keras's), or the CIFAR-10 network:
//! the top classes and their
//! probabilities, as text or one JSON object per image.
//!
//! ```text
//! cargo run --release --example classify -- --model inception --weights inception_v3.ckpt \
//!     --labels imagenet_labels.txt cat.jpg dog.png
//! cargo run --release --example classify -- --model resnet50 --weights resnet50.pth cat.jpg
//! cargo run --release --example classify -- --model resnet50 \
//!     --weights resnet50_weights_tf_dim_ordering_tf_kernels.h5 cat.jpg
//! cargo run --release --example classify -- --model resnet50v2 \
//!     --weights resnet50v2_weights_tf_dim_ordering_tf_kernels.h5 cat.jpg
//! cargo run --release --example classify -- --model mobilenet-v2 \
//!     --weights mobilenet_v2_weights_tf_dim_ordering_tf_kernels_1.0_224.h5 cat.jpg
//! cargo run --release --example classify -- --model mobilenet-v3-small \
//!     --weights mobilenet_v3_small-047dcff4.pth cat.jpg
//! cargo run --release --example classify -- --model efficientnet --variant 3 \
//!     --weights efficientnetb3.h5 cat.jpg
//! cargo run --release --example classify -- --model cifar10 --weights /tmp/cifar10_train --json plane.png
//! cargo run --release --example classify -- --model resnet50 --weights my_keras_savedmodel/ cat.jpg
//! ```
//!
//! A Keras model's weights (`holds_keras_weights`) are a Keras file or what TF2 saved of the
//! model: a SavedModel's folder, a `tf.train.Checkpoint`; they are read as Keras's.
//!
//! ResNets, and Inception v3 with torchvision's weights (a `.pth`), take torchvision's
//! evaluation preprocessing (`TorchvisionEval`: resize, center crop, normalize), as its
//! weights expect; Inception v3 with TF's or Keras's weights takes TF's; ResNet-50 with
//! Keras's weights (a `.h5` or `.keras` file of keras.applications' `ResNet50`) is built in
//! Keras's layout and takes Keras's (`KerasImageNetEval`: the whole image resized, BGR less
//! the mean pixel); ResNet50V2 takes Keras's too, in its "tf" mode (values in [-1, 1]).
//! MobileNetV2 is built in Keras's layout for Keras's weights and takes Keras's "tf" mode,
//! else torchvision's layout and preprocessing; so is EfficientNet, but Keras's takes the
//! pixels as they are (it normalizes them itself), and torchvision's a bicubic resize (its
//! weights' preset). MobileNetV3 in Keras's layout takes the pixels as they are too (it scales
//! them itself), in torchvision's torchvision's preprocessing.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

use burn_towers::data::transforms::{CifarEval, InceptionEval, TorchvisionEval, Transform};
use burn_towers::models::weights::{TfNamed, TorchNamed};
use burn_towers::models::{
    BasicBlock, Bottleneck, Cifar10Config, Cifar10Net, EfficientNet, EfficientNetConfig,
    EfficientNetLayout, ImageClassifier, InceptionV3, InceptionV3Config, MobileNetLayout,
    MobileNetV2, MobileNetV2Config, MobileNetV3, MobileNetV3Config, ResNet, ResNetConfig,
    ResNetLayout, ResNetV2, ResNetV2Config, ResidualBlock,
};
use burn_towers::train::{
    CifarImage, Prediction, Preprocessing, WeightsArgs, classes_in_weights, classify,
    efficientnet_for_weights, holds_keras_weights, is_pytorch_file, load_weights,
    mobilenet_v3_for_weights, parse_args, read_labels, resnet_layout_for,
};

#[derive(Clone, Copy, ValueEnum)]
enum Model {
    Inception,
    Resnet50,
    Resnet18,
    /// keras.applications' `ResNet50V2`.
    Resnet50v2,
    /// torchvision's `mobilenet_v2` or keras.applications' `MobileNetV2`, by the weights.
    MobilenetV2,
    /// torchvision's `mobilenet_v3_large` or keras.applications' `MobileNetV3Large`, by the
    /// weights.
    MobilenetV3Large,
    /// torchvision's `mobilenet_v3_small` or keras.applications' `MobileNetV3Small`.
    MobilenetV3Small,
    /// torchvision's `efficientnet_bN` or keras.applications' `EfficientNetBN` (`--variant`),
    /// by the weights.
    Efficientnet,
    Cifar10,
}

#[derive(Parser)]
#[command(about = "Top classes of images under Inception v3 or the CIFAR-10 network")]
struct Args {
    #[command(flatten)]
    run: WeightsArgs,
    /// Which network the weights are for.
    #[arg(long, value_enum)]
    model: Model,
    /// A TF checkpoint (Inception v3, CIFAR-10), a torchvision state dict (`.pth`: Inception
    /// v3, the ResNets, MobileNetV2 and V3, EfficientNet), a Keras file (`.h5`, `.keras`:
    /// Inception v3, ResNet-50, ResNet50V2, MobileNetV2 and V3, EfficientNet),
    /// one of ours (file or train directory) or a `.safetensors` export.
    #[arg(long)]
    weights: PathBuf,
    /// Outputs of the logits (default: the weights' classifier's, as a fine-tuned model's;
    /// without one, 1001 for Inception, TF's ImageNet layout, 1000 with torchvision's or
    /// Keras's weights and for the other networks, 10 for CIFAR-10).
    #[arg(long)]
    num_classes: Option<usize>,
    /// Class names: one per line, or `label<TAB>name` lines (the `labels.txt` of a training run).
    #[arg(long)]
    labels: Option<PathBuf>,
    /// Classes to print per image.
    #[arg(long, default_value_t = 5)]
    top_k: usize,
    /// Side of the model's square input (default: 299 for Inception, 224 for the ResNets and
    /// the MobileNets, the variant's for EfficientNet (224 for B0), 24 for CIFAR-10).
    #[arg(long)]
    image_size: Option<usize>,
    /// ResNets, MobileNets and EfficientNet with torchvision's weights: the shorter side
    /// before the center crop (default: 256 for 224, as torchvision's `IMAGENET1K_V1`
    /// weights; their `IMAGENET1K_V2` take 232).
    #[arg(long)]
    resize_size: Option<usize>,
    /// ResNets: whose layout, `torchvision` or `keras` (the `resnet` example's flag); default:
    /// Keras's for Keras weights, else torchvision's.
    #[arg(long)]
    layout: Option<ResNetLayout>,
    /// MobileNetV2's and V3's width multiplier (Keras's `alpha`, torchvision's `width_mult`).
    #[arg(long, default_value_t = 1.0)]
    width: f64,
    /// MobileNetV3: Keras's minimalistic network (3x3 kernels, ReLU, no gates).
    #[arg(long)]
    minimalistic: bool,
    /// EfficientNet's variant, B0 to B7.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=7))]
    variant: u8,
    /// One JSON object per image instead of text.
    #[arg(long)]
    json: bool,
    /// The images.
    #[arg(required = true)]
    images: Vec<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let args: Args = parse_args();
    let device = args.run.device()?;
    let options = args.run.load_options();
    let predictions = match args.model {
        Model::Inception => {
            let size = args.image_size.unwrap_or(299);
            // torchvision's weights: its 1000 classes and its port's pools; Keras's: 1000
            // classes and no aux head.
            let torchvision = is_pytorch_file(&args.weights);
            let keras = holds_keras_weights(&args.weights);
            let classes = if torchvision || keras { 1000 } else { 1001 };
            let model = InceptionV3Config::new(classes_of::<InceptionV3>(&args, classes)?)
                .with_image_size(size)
                .with_aux_logits(size >= 107 && !keras)
                .with_pool_counts_padding(torchvision)
                .init(&device);
            let (model, report) = load_weights(model, &args.weights, options)?;
            eprintln!("{report}");
            // torchvision's weights take torchvision's evaluation preset, TF's TF's.
            let eval: Box<dyn Transform> = match torchvision {
                true => Box::new(TorchvisionEval::inception_v3(size)),
                false => Box::new(InceptionEval::new(size)),
            };
            classify(&model, &args.images, eval.as_ref(), args.top_k)?
        }
        Model::Resnet50 => classify_resnet::<Bottleneck>(&args, ResNetConfig::resnet50(1000))?,
        Model::Resnet18 => classify_resnet::<BasicBlock>(&args, ResNetConfig::resnet18(1000))?,
        Model::Resnet50v2 => {
            let size = args.image_size.unwrap_or(224);
            let model = ResNetV2Config::resnet50v2(classes_of::<ResNetV2>(&args, 1000)?)
                .with_image_size(size)
                .init(&device);
            classify_through(&args, model, Preprocessing::KerasTf, size)?
        }
        Model::MobilenetV2 => {
            let size = args.image_size.unwrap_or(224);
            let layout = MobileNetLayout::from(resnet_layout_for(&args.weights));
            let model = MobileNetV2Config::new()
                .with_layout(layout)
                .with_width(args.width)
                .with_num_classes(classes_of::<MobileNetV2>(&args, 1000)?)
                .with_image_size(size)
                .init(&device);
            classify_through(&args, model, Preprocessing::for_mobilenet(layout), size)?
        }
        Model::MobilenetV3Large => classify_mobilenet_v3(&args, MobileNetV3Config::large())?,
        Model::MobilenetV3Small => classify_mobilenet_v3(&args, MobileNetV3Config::small())?,
        Model::Efficientnet => {
            let config = EfficientNetConfig::b(args.variant.into());
            let size = args.image_size.unwrap_or(config.image_size);
            let layout = EfficientNetLayout::from(resnet_layout_for(&args.weights));
            let config = efficientnet_for_weights(config.with_layout(layout), &args.weights)?;
            let model = config
                .with_num_classes(classes_of::<EfficientNet>(&args, 1000)?)
                .with_image_size(size)
                .init(&device);
            classify_through(&args, model, Preprocessing::for_efficientnet(layout), size)?
        }
        Model::Cifar10 => {
            let size = args.image_size.unwrap_or(24);
            let model = Cifar10Config::new()
                .with_num_classes(classes_of::<Cifar10Net>(&args, 10)?)
                .with_image_size(size)
                .init(&device);
            let (model, report) = load_weights(model, &args.weights, options)?;
            eprintln!("{report}");
            classify(
                &model,
                &args.images,
                &CifarImage(CifarEval { size }),
                args.top_k,
            )?
        }
    };
    let labels = match &args.labels {
        Some(path) => read_labels(path)?,
        None => Vec::new(),
    };
    for prediction in &predictions {
        print(prediction, &labels, args.json);
    }
    Ok(())
}

/// `--num-classes`, else the classes of the `--weights`' classifier, else `default` (weights
/// without a classifier).
fn classes_of<M: TfNamed + TorchNamed>(args: &Args, default: usize) -> anyhow::Result<usize> {
    match args.num_classes {
        Some(classes) => Ok(classes),
        None => Ok(classes_in_weights::<M>(&args.weights)?.unwrap_or(default)),
    }
}

/// The images under a ResNet of `Block`s with `stages`' blocks in the layout asked for,
/// through the evaluation preprocessing of that layout's library.
fn classify_resnet<Block>(args: &Args, stages: ResNetConfig) -> anyhow::Result<Vec<Prediction>>
where
    Block: ResidualBlock + 'static,
    ResNet<Block>: ImageClassifier + TfNamed + TorchNamed,
{
    let size = args.image_size.unwrap_or(224);
    let layout = (args.layout).unwrap_or(resnet_layout_for(&args.weights));
    let model = stages
        .with_layout(layout)
        .with_num_classes(classes_of::<ResNet<Block>>(args, 1000)?)
        .with_image_size(size)
        .init::<Block>(&args.run.device()?);
    classify_through(args, model, Preprocessing::for_resnet(layout), size)
}

/// The images under a MobileNetV3 of `variant` in the layout of the `--weights`' library
/// (with the head of the file's network), through that library's evaluation preprocessing.
fn classify_mobilenet_v3(
    args: &Args,
    variant: MobileNetV3Config,
) -> anyhow::Result<Vec<Prediction>> {
    let size = args.image_size.unwrap_or(224);
    let layout = MobileNetLayout::from(resnet_layout_for(&args.weights));
    let config = (variant.with_layout(layout))
        .with_width(args.width)
        .with_minimalistic(args.minimalistic)
        .with_num_classes(classes_of::<MobileNetV3>(args, 1000)?)
        .with_image_size(size);
    let model = mobilenet_v3_for_weights(config, &args.weights)?.init(&args.run.device()?);
    classify_through(args, model, Preprocessing::for_mobilenet_v3(layout), size)
}

/// The images under `model` with the `--weights`, through `preprocessing`'s evaluation
/// transform at `size`.
fn classify_through<M>(
    args: &Args,
    model: M,
    preprocessing: Preprocessing,
    size: usize,
) -> anyhow::Result<Vec<Prediction>>
where
    M: ImageClassifier + TfNamed + TorchNamed + 'static,
{
    let (model, report) = load_weights(model, &args.weights, args.run.load_options())?;
    eprintln!("{report}");
    let eval = preprocessing.eval(size, args.resize_size)?;
    Ok(classify(&model, &args.images, &eval, args.top_k)?)
}

fn print(prediction: &Prediction, labels: &[String], json: bool) {
    if json {
        println!("{}", prediction.to_json(labels));
        return;
    }
    println!("{}", prediction.file.display());
    for &(class, prob) in &prediction.top {
        let label = labels.get(class).map_or("", String::as_str);
        println!("  {prob:.4}  {class:>5}  {label}");
    }
}
