//! The fuzz targets, one per parser, and the real files they start from.

mod checkpoint;
mod cifar10;
mod config;
mod devices;
mod example;
mod image;
mod keras;
mod records;
mod safetensors;
mod tf_checkpoint;
mod tfds;
mod tfrecord;

use std::path::Path;

use burn_towers::data::tf_example::ImageRecord;
use burn_towers::data::tfrecord::{index_reader, record_data};

/// `tests/data/fuzz_seeds.tfrecord`, written by TensorFlow (`scripts/fuzz_seeds.py`).
pub(crate) fn seed_shard() -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fuzz_seeds.tfrecord"))
        .expect("the seed shard")
}

/// The serialized `tf.train.Example`s of the seed shard, read with the project's framing.
pub(crate) fn seed_examples() -> Vec<Vec<u8>> {
    let shard = seed_shard();
    let path = Path::new("fuzz_seeds.tfrecord");
    let spans =
        index_reader(std::io::Cursor::new(&shard), shard.len() as u64, path).expect("TF's framing");
    spans
        .iter()
        .enumerate()
        .map(|(i, span)| {
            let bytes = &shard[span.offset as usize..][..span.len];
            record_data(path, i, bytes).unwrap().to_vec()
        })
        .collect()
}

/// The images TensorFlow encoded into the seed shard (JPEG, greyscale, progressive, PNG with
/// alpha and at 16 bits), a CMYK JPEG written by Pillow, and the JPEGs of the TF-exact decoding
/// test (Pillow's 4:2:2, restart markers, RGB, CMYK with and without Adobe's marker), and
/// BMP, PPM, PGM, TIFF and WebP images written by Pillow.
pub(crate) fn seed_images() -> Vec<Vec<u8>> {
    let mut images: Vec<Vec<u8>> = seed_examples()
        .iter()
        .map(|e| ImageRecord::parse(e).unwrap().encoded)
        .collect();
    images.push(include_bytes!("../../../crates/data/tests/data/cmyk.jpg").to_vec());
    let tf_jpeg = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/data/tests/data/tf_jpeg");
    for name in [
        "pil_422",
        "pil_restart_markers",
        "pil_rgb_colour_space",
        "pil_cmyk_adobe",
        "pil_cmyk_plain",
    ] {
        let path = tf_jpeg.join(format!("{name}.jpg"));
        images.push(std::fs::read(&path).expect("a JPEG of the TF-exact decoding test"));
    }
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/data/tests/data/image_folder");
    for name in OTHER_FORMATS {
        let path = folder.join("tree").join(name);
        images.push(std::fs::read(&path).expect("an image of the image-folder test"));
    }
    images
}

/// The image-folder test's images of the formats the seed shard lacks, written by Pillow.
const OTHER_FORMATS: [&str; 11] = [
    "a/x.Bmp",
    "b/palette.bmp",
    "a/sub b/z.ppm",
    "a/sub/deeper/w.pgm",
    "a b/p.TIF",
    "a b/q.tiff",
    "b/cmyk.tif",
    "b/rgba.tif",
    "b/lossless.webp",
    "b/lossy.webp",
    "b/rgba.webp",
];
