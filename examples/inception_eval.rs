//! Evaluates Inception v3 weights once, as TF's `inception_eval.py --run_once`: precision@1 and
//! @5 over every `validation-*` example (or every image of a folder), with TF's evaluation
//! preprocessing (central crop 0.875, bilinear resize, scale to [-1, 1]) and the moving
//! averages of the weights when the checkpoint has them. torchvision's weights (a `.pth`) take
//! torchvision's preset instead (`TorchvisionEval::inception_v3`: resize to 342, central 299).
//!
//! ```text
//! cargo run --release --example inception_eval -- --checkpoint /tmp/imagenet_train   # newest of ours
//! cargo run --release --example inception_eval -- --checkpoint inception_v3.ckpt \
//!     --data-dir imagenet-shards --image-size 299              # TF-slim's published checkpoint
//! ```

use std::path::PathBuf;

use clap::Parser;

use burn_towers::data::transforms::{InceptionEval, TorchvisionEval, Transform};
use burn_towers::models::InceptionV3Config;
use burn_towers::train::{
    EvalArgs, InceptionData, Split, WeightsArgs, holds_keras_weights, inception_image_size,
    is_pytorch_file, load_weights, parse_args,
};

#[derive(Parser)]
#[command(about = "Evaluate Inception v3 weights: precision @ 1 and @ 5")]
struct Args {
    #[command(flatten)]
    weights: WeightsArgs,
    /// Weights: a TF checkpoint (prefix, `.index` or directory), a torchvision state dict
    /// (`.pth`: 1000 classes, no background class, so TF's shards' labels are read one lower),
    /// one of ours (file or train directory) or a `.safetensors` export.
    #[arg(long, default_value = "/tmp/imagenet_train")]
    checkpoint: PathBuf,
    /// Side of the square input: 299 with `--data-dir`, 75 on the built-in data (the
    /// `inception` example's defaults).
    #[arg(long)]
    image_size: Option<usize>,
    #[command(flatten)]
    eval: EvalArgs,
}

fn main() -> anyhow::Result<()> {
    let args: Args = parse_args();
    let image_size = args
        .image_size
        .unwrap_or(inception_image_size(args.eval.data_dir.as_deref()));
    let torchvision = is_pytorch_file(&args.checkpoint);
    let keras = holds_keras_weights(&args.checkpoint);
    let (dir, split) = (args.eval.data_dir.as_deref(), Split::Validation);
    // torchvision's weights take its own preset; Keras's keep TF's.
    let eval: Box<dyn Transform> = match torchvision {
        true => Box::new(TorchvisionEval::inception_v3(image_size)),
        false => Box::new(InceptionEval::new(image_size)),
    };
    // torchvision's and Keras's weights have 1000 classes, without TF's background class.
    let data = match torchvision || keras {
        true => InceptionData::open_without_background(dir, split, image_size, eval)?,
        false => InceptionData::open(dir, split, image_size, eval)?,
    };
    let data = args.eval.split_of(data)?;
    println!("evaluating on {}", data.description);
    let device = args.weights.device()?;
    let model = InceptionV3Config::new(args.eval.num_classes(&data))
        .with_image_size(image_size)
        .with_aux_logits(image_size >= 107 && !keras)
        .with_pool_counts_padding(torchvision)
        .init(&device);
    let options = args.weights.load_options();
    let (model, report) = load_weights(model, &args.checkpoint, options)?;
    println!("{report}");
    Ok(args.eval.evaluate(&model, &data)?)
}
