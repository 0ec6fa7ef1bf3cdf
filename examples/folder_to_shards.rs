//! Converts an image folder (`root/<class>/<image>`) into TFRecord shards of
//! `tf.train.Example`s in TF's ImageNet layout, as `build_imagenet_data.py` does: files
//! shuffled by seed, PNGs re-encoded as JPEG, labels `label_offset + class index` (1-based by
//! default, 0 being TF's background class), and the label map written beside the shards.
//!
//! cargo run --release --example folder_to_shards -- --input photos --output shards --shards 8

use std::path::PathBuf;

use clap::Parser;
use rand::SeedableRng;
use rand::seq::SliceRandom;

use burn_towers::data::codec::{decode_image, encode_jpeg};
use burn_towers::data::image_folder::ImageFolder;
use burn_towers::data::inception::ShardWriter;
use burn_towers::data::tf_example::ImageRecord;
use burn_towers::data::transforms::Rng;

#[derive(Parser)]
struct Args {
    /// The image folder: one sub-folder per class.
    #[arg(long)]
    input: PathBuf,
    /// Where the shards go (created if missing).
    #[arg(long)]
    output: PathBuf,
    /// Shard name prefix: `train` or `validation`.
    #[arg(long, default_value = "train")]
    prefix: String,
    /// Number of shards.
    #[arg(long, default_value_t = 8)]
    shards: usize,
    /// Added to the class index to make the stored label (1: TF's layout).
    #[arg(long, default_value_t = 1)]
    label_offset: i64,
    /// Seed of the file shuffle.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let folder = ImageFolder::scan(&args.input)?;
    let mut files: Vec<(PathBuf, i64)> = folder
        .files()
        .iter()
        .map(|f| (f.clone(), folder.label(f).expect("a scanned file")))
        .collect();
    files.shuffle(&mut Rng::seed_from_u64(args.seed));
    let mut writer = ShardWriter::create(&args.output, &args.prefix, args.shards, files.len())?;
    for (i, (path, class)) in files.iter().enumerate() {
        let bytes = std::fs::read(path)?;
        let image = decode_image(&bytes).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let is_jpeg = bytes.starts_with(&[0xff, 0xd8]);
        writer.write(&ImageRecord {
            encoded: if is_jpeg {
                bytes
            } else {
                encode_jpeg(&image, 95)
            },
            label: class + args.label_offset,
            text: Some(folder.classes()[*class as usize].clone()),
            boxes: Vec::new(),
            height: Some(image.height() as i64),
            width: Some(image.width() as i64),
            filename: path
                .file_name()
                .and_then(|n| n.to_str())
                .map(str::to_string),
        })?;
        if (i + 1) % 1000 == 0 {
            println!("{} / {} images", i + 1, files.len());
        }
    }
    let shards = writer.finish()?;
    let map = args.output.join(format!("{}-labels.txt", args.prefix));
    folder.write_label_map(&map)?;
    println!(
        "{} images of {} classes into {} shards in {}; label map (class index + {}) in {}",
        files.len(),
        folder.classes().len(),
        shards.len(),
        args.output.display(),
        args.label_offset,
        map.display()
    );
    Ok(())
}
