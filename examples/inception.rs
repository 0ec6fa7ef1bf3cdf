//! Trains Inception v3 (TF-slim's, as `inception_train.py` trains it) on one or more towers.
//!
//! ```text
//! cargo run --release --example inception        # built-in data, a small CPU run: 107x107, batch 8, 30 steps, rate 0.01
//! cargo run --release --features cuda --example inception -- --data-dir imagenet-shards \
//!     --image-size 299 --batch-size 32 --devices cuda:0,cuda:1 --max-steps 10000000
//! cargo run --release --example inception -- --data-dir flowers --image-size 299 \
//!     --pretrained inception_v3.ckpt --trainable-scopes InceptionV3/Logits,InceptionV3/AuxLogits
//! ```
//!
//! The TF trainer's settings (RMSProp 0.9/0.9/1.0 at 0.1 decayed by 0.16 every 30 epochs,
//! weight decay 0.00004, label smoothing 0.1, auxiliary head at 0.4, moving averages at
//! 0.9999, batch-norm statistics of the first tower); the default run is small (and, on the
//! built-in data, uses a rate of 0.01). Ctrl-C stops after a checkpoint.

use clap::Parser;

use burn_towers::data::transforms::InceptionTrain;
use burn_towers::models::InceptionV3Config;
use burn_towers::train::{
    InceptionData, LrScheduleConfig, Split, StopFlag, TrainArgs, TrainConfig, Trainer,
    export_safetensors, mpi_job, parse_args,
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
    let data = InceptionData::open(
        args.train.data_dir.as_deref(),
        Split::Train,
        args.image_size,
        InceptionTrain::new(args.image_size),
    )?;
    println!("training data: {}", data.description);
    if let Some(folder) = &data.folder {
        std::fs::create_dir_all(&config.train_dir)?;
        let label_map = config.train_dir.join("labels.txt");
        folder.write_label_map(&label_map)?;
        println!("label map: {}", label_map.display());
    }
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
    // Under mpirun: one rank of the job; rank 0 alone writes and reports.
    let job = mpi_job()?;
    let rank_zero = job.as_ref().is_none_or(|p| p.rank() == 0);
    let trained = Trainer::new(config)
        .with_processes(job)
        .with_stop(StopFlag::ctrl_c()?)
        .with_prepare(args.train.fine_tuning())
        .run(|device| model.init(device), &data.input)?;
    if !rank_zero {
        return Ok(());
    }
    println!("{}", trained.report);
    if let Some(path) = &args.train.export {
        export_safetensors(&trained.model, path)?;
        println!("weights:     {}", path.display());
    }
    Ok(())
}
