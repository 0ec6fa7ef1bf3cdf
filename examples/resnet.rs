//! Trains ResNet-50 (`--depth` 18, 34, 101 or 152 too; torchvision's layout, or Keras's with
//! `--layout keras`, written with Burn's layers as `towers_kernels::nn` serves them), or
//! keras.applications' ResNet50V2 (`--v2`), or MobileNetV2 (`--mobilenet-v2`), MobileNetV3
//! (`--mobilenet-v3 large` or `small`) or EfficientNet (`--efficientnet 0` for B0, up to 7) in
//! either library's layout (the flags: `towers_train::NetworkArgs`), on one or more towers.
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
use burn_towers::models::ImageClassifier;
use burn_towers::models::weights::{TfNamed, TorchNamed};
use burn_towers::train::{
    InceptionData, NetworkArgs, NetworkUser, Preprocessing, Split, StopFlag, TrainArgs,
    TrainConfig, Trainer, mpi_job, parse_args,
};

#[derive(Parser)]
#[command(
    about = "Train ResNet-50 (or -18, -34, -101, -152, ResNet50V2, MobileNetV2 or V3, or EfficientNet) on towers"
)]
struct Args {
    #[command(flatten)]
    train: TrainArgs,
    #[command(flatten)]
    network: NetworkArgs,
    /// Side of the square input images: 224 with `--data-dir` (EfficientNet: its variant's),
    /// 64 on the built-in data.
    #[arg(long)]
    image_size: Option<usize>,
    /// Outputs of the logits; the data's when absent.
    #[arg(long)]
    num_classes: Option<usize>,
    /// The records of a dataset TFDS prepared to train on, as a TFDS split spec
    /// (`train[:80%]`), instead of its `train` split.
    #[arg(long, value_name = "SPEC")]
    tfds_split: Option<String>,
}

fn main() -> anyhow::Result<()> {
    let args: Args = parse_args();
    let weights = args.train.pretrained.as_deref();
    args.network.build(weights, Training(&args))?
}

/// Trains the network it is handed (see [`train`]).
struct Training<'a>(&'a Args);

impl NetworkUser for Training<'_> {
    type Output = anyhow::Result<()>;

    fn take<M, Net>(self, net: Net, preprocessing: Preprocessing) -> Self::Output
    where
        M: ImageClassifier + TfNamed + TorchNamed + 'static,
        Net: Fn(usize, usize, f64, &Device) -> M + Sync,
    {
        train(self.0, preprocessing, net)
    }
}

/// Trains the network `net` builds (of its classes, image side and weight decay) through
/// `preprocessing`, then (on the built-in data) evaluates it.
fn train<M, Net>(args: &Args, preprocessing: Preprocessing, net: Net) -> anyhow::Result<()>
where
    M: ImageClassifier + TfNamed + TorchNamed + 'static,
    Net: Fn(usize, usize, f64, &Device) -> M + Sync,
{
    let data_dir = args.train.data_dir.as_deref();
    let full_size = args.network.full_image_size();
    let image_size = (args.image_size).unwrap_or(if data_dir.is_some() { full_size } else { 64 });
    let config = match data_dir {
        Some(_) => args.train.config(TrainConfig::resnet())?,
        None => args.train.builtin_config(TrainConfig::resnet_builtin())?,
    };
    let train = preprocessing.train(image_size);
    let data = InceptionData::open(data_dir, Split::Train, image_size, train)?;
    let data = data.with_tfds_split_given(args.tfds_split.as_deref())?;
    println!("training data: {}", data.description);
    let num_classes = args.num_classes.unwrap_or(data.num_classes);
    println!(
        "{}, {image_size}x{image_size} images, {num_classes} classes, batch {}, {} steps",
        args.network.name(),
        config.batch_size,
        config.max_steps
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
        .with_tf_resume()
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
