//! Trains Inception v3 (TF-slim's, as `inception_train.py` trains it) on one or more towers.
//!
//! ```text
//! cargo run --release --example inception        # built-in data, a small CPU run: 107x107, batch 8, 30 steps, rate 0.01
//! cargo run --release --features cuda --example inception -- --data-dir imagenet-shards \
//!     --image-size 299 --batch-size 32 --devices cuda:0,cuda:1 --max-steps 10000000
//! ```
//!
//! The TF trainer's settings (RMSProp 0.9/0.9/1.0 at 0.1 decayed by 0.16 every 30 epochs,
//! weight decay 0.00004, label smoothing 0.1, auxiliary head at 0.4, moving averages at
//! 0.9999, batch-norm statistics of the first tower); the default run is small (and, on the
//! built-in data, uses a rate of 0.01). Ctrl-C stops after a checkpoint.

use std::path::Path;

use clap::Parser;

use burn_towers::data::image_folder::ImageFolder;
use burn_towers::data::inception::{self, BuiltinShards, BuiltinShardsConfig, TfExampleFormat};
use burn_towers::data::transforms::InceptionTrain;
use burn_towers::models::InceptionV3Config;
use burn_towers::train::{
    Input, LrScheduleConfig, StopFlag, TrainArgs, TrainConfig, Trainer, parse_args,
};

#[derive(Parser)]
#[command(about = "Train Inception v3 on towers")]
struct Args {
    #[command(flatten)]
    train: TrainArgs,
    /// Side of the square input images: 299 for ImageNet; at least 75, and 107 for the
    /// auxiliary head (the default: the smallest full model, quick on a CPU).
    #[arg(long, default_value_t = 107)]
    image_size: usize,
    /// Outputs of the logits; the data's when absent (1001 for ImageNet shards, the class count
    /// of an image folder, 11 for the built-in data: TF's layout keeps class 0 for the
    /// background).
    #[arg(long)]
    num_classes: Option<usize>,
}

fn main() -> anyhow::Result<()> {
    let args: Args = parse_args();
    // A first run on a laptop CPU: a few logged steps and a checkpoint in a couple of minutes.
    let mut defaults = TrainConfig {
        batch_size: 8,
        max_steps: 30,
        log_every: 3,
        checkpoint_every: 15,
        ..TrainConfig::inception()
    };
    if args.train.data_dir.is_none() {
        // TF's initial rate of 0.1 is tuned for ImageNet batches of 32 per tower; on the small
        // built-in run at batch 8 it blows the loss up (9 -> 45 in 30 steps). 0.01 keeps it
        // steady. A run on real data keeps TF's rate unless configured otherwise.
        if let LrScheduleConfig::ExponentialDecay { initial, .. } = &mut defaults.learning_rate {
            *initial = 0.01;
        }
    }
    let config = args.train.config(defaults)?;
    let data = inception_input(
        args.train.data_dir.as_deref(),
        args.image_size,
        &config.train_dir,
    )?;
    let num_classes = args.num_classes.unwrap_or(data.num_classes);
    let model = InceptionV3Config::new(num_classes)
        .with_image_size(args.image_size)
        .with_aux_logits(args.image_size >= 107)
        .with_weight_decay(config.weight_decay);
    println!(
        "Inception v3, {}x{} images, {num_classes} classes, auxiliary head {}",
        args.image_size,
        args.image_size,
        if model.aux_logits {
            "on"
        } else {
            "off (images under 107x107)"
        }
    );
    let trained = Trainer::new(config)
        .with_stop(StopFlag::ctrl_c()?)
        .run(|device| model.init(device), &data.input)?;
    println!("{}", trained.report);
    Ok(())
}

/// The training input and what it needs kept alive.
struct InceptionData {
    input: Input,
    /// Outputs the labels need (TF's layout: labels 1..=N, 0 the background class).
    num_classes: usize,
    /// The built-in data's folder, deleted on drop.
    _builtin: Option<BuiltinShards>,
}

/// The training input, through the Inception trainer's preprocessing at `image_size`: the
/// `train-*` TFRecord shards of `--data-dir` (TF's ImageNet layout, 1001 classes), or an image
/// folder `--data-dir/<class>/<image>` (its label map written to `train_dir/labels.txt`), or
/// the built-in synthetic shards (10 classes, so 11 outputs).
fn inception_input(
    data_dir: Option<&Path>,
    image_size: usize,
    train_dir: &Path,
) -> anyhow::Result<InceptionData> {
    let transform = InceptionTrain::new(image_size);
    let Some(dir) = data_dir else {
        let config = BuiltinShardsConfig {
            num_classes: 10,
            train_shards: 4,
            validation_shards: 1,
            per_shard: 128,
            image_size,
            seed: 1,
        };
        let builtin = BuiltinShards::create(config)?;
        println!(
            "no --data-dir: built-in synthetic ImageNet-layout shards ({} classes, {} training images) in {}",
            config.num_classes,
            config.train_shards * config.per_shard,
            builtin.dir().display()
        );
        let num_classes = config.num_classes + 1;
        let files = inception::train_files(builtin.dir())?;
        return Ok(InceptionData {
            input: Input::new(TfExampleFormat::new(num_classes), files, transform),
            num_classes,
            _builtin: Some(builtin),
        });
    };
    if let Ok(files) = inception::train_files(dir) {
        return Ok(InceptionData {
            input: Input::new(TfExampleFormat::new(1001), files, transform),
            num_classes: 1001,
            _builtin: None,
        });
    }
    let folder = ImageFolder::scan(dir).map_err(|e| {
        anyhow::anyhow!(
            "--data-dir holds neither train-XXXXX-of-YYYYY shards nor an image folder: {e}"
        )
    })?;
    std::fs::create_dir_all(train_dir)?;
    let label_map = train_dir.join("labels.txt");
    folder.write_label_map(&label_map)?;
    println!(
        "image folder {}: {} classes, {} images; label map in {}",
        dir.display(),
        folder.classes().len(),
        folder.files().len(),
        label_map.display()
    );
    Ok(InceptionData {
        input: Input::new(folder.format(), folder.files().to_vec(), transform),
        num_classes: folder.classes().len(),
        _builtin: None,
    })
}
