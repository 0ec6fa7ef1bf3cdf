//! Trains Inception v3 (TF-slim's, as `inception_train.py` trains it) on one or more towers.
//!
//! ```text
//! cargo run --release --example inception        # built-in data: 75x75, 4 classes, about a minute on a CPU
//! cargo run --release --features cuda --example inception -- --data-dir imagenet-shards \
//!     --devices cuda:0,cuda:1                    # TF's settings: 299x299, batch 32, 1001 classes
//! cargo run --release --example inception -- --data-dir flowers --batch-size 32 \
//!     --pretrained inception_v3.ckpt --trainable-scopes InceptionV3/Logits,InceptionV3/AuxLogits
//! (`--pretrained inception_v3_google.pth`, torchvision's, works alike: see `is_pytorch_file`)
//! cargo run --release --example inception -- --data-dir ~/tensorflow_datasets/tf_flowers \
//!     --tfds-split 'train[:80%]'                 # a dataset TFDS prepared, part of a split
//! ```
//!
//! With `--data-dir`, the TF trainer's settings (299x299, batch 32, RMSProp 0.9/0.9/1.0 at 0.1
//! decayed by 0.16 every 30 epochs, weight decay 0.00004, label smoothing 0.1, auxiliary head
//! at 0.4, moving averages at 0.9999, batch-norm statistics of the first tower). Without it, a
//! run that learns in about a minute on a CPU (see [`TrainConfig::inception_builtin`]), then
//! precision@1 on the built-in held-out images. Ctrl-C stops after a checkpoint.

use clap::Parser;

use burn_towers::data::transforms::InceptionTrain;
use burn_towers::models::InceptionV3Config;
use burn_towers::train::{
    InceptionData, Split, StopFlag, TrainArgs, TrainConfig, Trainer, inception_image_size,
    is_pytorch_file, mpi_job, parse_args,
};

#[derive(Parser)]
#[command(about = "Train Inception v3 on towers")]
struct Args {
    #[command(flatten)]
    train: TrainArgs,
    /// Side of the square input images: 299 (ImageNet's) with `--data-dir`, 75 (the
    /// smallest Inception v3 takes) on the built-in data. The auxiliary head needs 107.
    #[arg(long)]
    image_size: Option<usize>,
    /// Outputs of the logits; the data's when absent (1001 for ImageNet shards, the class count
    /// of an image folder, 5 for the built-in data: TF's layout keeps class 0 for the
    /// background).
    #[arg(long)]
    num_classes: Option<usize>,
    /// The records of a dataset TFDS prepared to train on, as a TFDS split spec
    /// (`train[:80%]`), instead of its `train` split.
    #[arg(long, value_name = "SPEC")]
    tfds_split: Option<String>,
}

fn main() -> anyhow::Result<()> {
    let args: Args = parse_args();
    let data_dir = args.train.data_dir.as_deref();
    let image_size = args.image_size.unwrap_or(inception_image_size(data_dir));
    let config = match data_dir {
        Some(_) => args.train.config(TrainConfig::inception())?,
        None => args
            .train
            .builtin_config(TrainConfig::inception_builtin())?,
    };
    let data = InceptionData::open(
        data_dir,
        Split::Train,
        image_size,
        InceptionTrain::new(image_size),
    )?;
    let data = data.with_tfds_split_given(args.tfds_split.as_deref())?;
    println!("training data: {}", data.description);
    if let Some(folder) = &data.folder {
        std::fs::create_dir_all(&config.train_dir)?;
        let label_map = config.train_dir.join("labels.txt");
        folder.write_label_map(&label_map)?;
        println!("label map: {}", label_map.display());
    }
    let num_classes = args.num_classes.unwrap_or(data.num_classes);
    // torchvision's weights need its port's pools (see `is_pytorch_file`).
    let torchvision = args
        .train
        .pretrained
        .as_deref()
        .is_some_and(is_pytorch_file);
    let mut model = InceptionV3Config::new(num_classes)
        .with_image_size(image_size)
        .with_aux_logits(image_size >= 107)
        .with_weight_decay(config.weight_decay)
        .with_pool_counts_padding(torchvision);
    if data_dir.is_none() {
        // TF's 0.9997 needs thousands of steps before the moving statistics, which evaluation
        // uses, match the data's; the built-in run has a few hundred.
        model = model.with_batch_norm_decay(0.9);
    }
    println!(
        "Inception v3, {image_size}x{image_size} images, {num_classes} classes, batch {}, \
         {} steps, auxiliary head {}",
        config.batch_size,
        config.max_steps,
        if model.aux_logits {
            "on"
        } else {
            "off (images under 107x107)"
        }
    );
    let readers = config.reader_threads.unwrap_or(4);
    // Under mpirun: one rank of the job; rank 0 alone writes, reports and evaluates.
    let job = mpi_job(&config)?;
    let rank_zero = job.as_ref().is_none_or(|p| p.rank() == 0);
    let trained = Trainer::new(config)
        .with_processes(job)
        .with_stop(StopFlag::ctrl_c()?)
        .with_prepare(args.train.fine_tuning())
        .with_tf_resume()
        .run(|device| model.init(device), &data.input)?;
    if !rank_zero {
        return Ok(());
    }
    args.train.report(&trained)?;

    // Real data has its own evaluation: the `inception_eval` example.
    data.report_builtin_held_out(&trained, image_size, readers)?;
    // Last: the evaluation's kernels are tuned too.
    Ok(args.train.end_tuning()?)
}
