//! Evaluates ResNet-50 weights (`--depth` 18, 34, 101 or 152 too; keras.applications'
//! ResNet50V2's with `--v2`; MobileNetV2's with `--mobilenet-v2`, MobileNetV3's with
//! `--mobilenet-v3 large` or `small`; EfficientNet-B0's with `--efficientnet 0`, up to 7: the
//! `resnet` example's flags, `towers_train::NetworkArgs`) once: precision@1 and @5 over every example of an ImageNet-style
//! validation set, as torchvision's reference `references/classification/train.py --test-only`
//! counts them, through torchvision's evaluation preset (shorter side to 256, central 224,
//! ImageNet's mean and deviation; `--resize-size 232` for its `IMAGENET1K_V2` weights).
//!
//! ```text
//! cargo run --release --example resnet_eval -- --checkpoint resnet50.pth --data-dir imagenet/val
//! cargo run --release --example resnet_eval -- --checkpoint resnet50.h5 --data-dir imagenet/val
//! cargo run --release --example resnet_eval                      # the `resnet` example's default run (ResNet-50)
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
use burn_towers::models::ImageClassifier;
use burn_towers::models::weights::{TfNamed, TorchNamed};
use burn_towers::train::{
    EvalArgs, InceptionData, NetworkArgs, NetworkUser, Preprocessing, Split, WeightsArgs,
    holds_keras_weights, is_pytorch_file, load_weights, parse_args,
};

#[derive(Parser)]
#[command(
    about = "Evaluate ResNet weights (v1, Keras's v2 with --v2), MobileNetV2's or V3's or EfficientNet's: precision @ 1 and @ 5"
)]
struct Args {
    #[command(flatten)]
    weights: WeightsArgs,
    /// Weights: a torchvision state dict (`.pth`), a Keras file of `ResNet50` (`.h5`,
    /// `.keras`), one of ours (file or train directory), a `.safetensors` export or a TF
    /// checkpoint in Keras's names.
    #[arg(long, default_value = "/tmp/resnet_train")]
    checkpoint: PathBuf,
    /// The network, its layout and preprocessing (the `resnet` example's flags).
    #[command(flatten)]
    network: NetworkArgs,
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
}

fn main() -> anyhow::Result<()> {
    let args: Args = parse_args();
    args.network
        .build(Some(&args.checkpoint), Evaluation(&args))?
}

/// Evaluates the network it is handed (see [`eval`]).
struct Evaluation<'a>(&'a Args);

impl NetworkUser for Evaluation<'_> {
    type Output = anyhow::Result<()>;

    fn take<M, Net>(self, net: Net, preprocessing: Preprocessing) -> Self::Output
    where
        M: ImageClassifier + TfNamed + TorchNamed + 'static,
        Net: Fn(usize, usize, f64, &Device) -> M + Sync,
    {
        eval(self.0, preprocessing, |classes, size, device| {
            net(classes, size, 0.0, device)
        })
    }
}

/// Evaluates the network `net` builds (of its classes and image side) through
/// `preprocessing`.
fn eval<M>(
    args: &Args,
    preprocessing: Preprocessing,
    net: impl FnOnce(usize, usize, &Device) -> M,
) -> anyhow::Result<()>
where
    M: ImageClassifier + TfNamed + TorchNamed,
{
    let dir = args.eval.data_dir.as_deref();
    let full_size = args.network.full_image_size();
    let image_size = (args.image_size).unwrap_or(if dir.is_some() { full_size } else { 64 });
    let eval = preprocessing.eval(image_size, args.resize_size)?;
    // torchvision's and Keras's weights have no background class.
    let foreign = is_pytorch_file(&args.checkpoint) || holds_keras_weights(&args.checkpoint);
    let data = match foreign {
        true => InceptionData::open_without_background(dir, Split::Validation, image_size, eval)?,
        false => InceptionData::open(dir, Split::Validation, image_size, eval)?,
    };
    let data = args.eval.split_of(data)?;
    println!("evaluating on {}", data.description);
    let classes = args.eval.num_classes(&data);
    let model = net(classes, image_size, &args.weights.device()?);
    let options = args.weights.load_options();
    let (model, report) = load_weights(model, &args.checkpoint, options)?;
    println!("{report}");
    Ok(args.eval.evaluate(&model, &data)?)
}
