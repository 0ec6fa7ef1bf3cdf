//! A TF-slim Inception v3 checkpoint (1001 classes, random weights) gives TF's logits, and
//! classifies pictures with TF's top 5 and probabilities, TF's evaluation preprocessing
//! included. The checkpoint (about 100 MB) is not in the repository:
//!
//! ```text
//! /work/venv-tf/bin/python scripts/tf_fixtures/inception_v3_checkpoint.py /tmp/tf_inception_v3
//! TOWERS_TF_INCEPTION_V3=/tmp/tf_inception_v3 cargo test --workspace --test integration tf_inception_v3
//! ```
//!
//! JPEG photos too, when `scripts/tf_fixtures/classify_top5.py /tmp/tf_inception_v3` has
//! written TF's top 5 for them (`jpeg_expected.json`, photos in `jpeg/`): our JPEG decoding
//! gives TF's pixels, so they match TF as closely as the PNG pictures do.
//!
//! Without `TOWERS_TF_INCEPTION_V3` the tests say they were skipped and pass.

use std::path::{Path, PathBuf};

use burn::tensor::Device;
use burn_towers::data::transforms::InceptionEval;
use burn_towers::models::{InceptionV3, InceptionV3Config};
use burn_towers::train::{LoadOptions, classify, load_weights};

use crate::reference_outputs::{Expected, Picture, assert_logits, assert_top_5, inputs};

/// `jpeg_expected.json`, from classify_top5.py.
#[derive(serde::Deserialize)]
struct JpegExpected {
    images: Vec<Picture>,
}

fn restored(dir: &Path, device: &Device) -> InceptionV3 {
    let model = InceptionV3Config::new(1001).init(device);
    let (model, report) = load_weights(model, dir, LoadOptions::default()).unwrap();
    assert!(
        report.missing.is_empty() && report.skipped.is_empty(),
        "{report}"
    );
    assert_eq!(report.unused, ["global_step"]);
    model
}

#[test]
fn a_tf_slim_checkpoint_gives_tfs_logits_and_top_5() {
    let Some(dir) = std::env::var_os("TOWERS_TF_INCEPTION_V3").map(PathBuf::from) else {
        println!(
            "skipped: TOWERS_TF_INCEPTION_V3 names no TF-slim checkpoint (see the file's doc)"
        );
        return;
    };
    let expected = Expected::read(&dir);
    let device = Device::flex();
    let model = restored(&dir, &device);

    let images = inputs(&dir, expected.inputs_logits.len(), 299, &device);
    assert_logits("TF-slim", &model, images, &expected.inputs_logits);

    let files = expected.picture_files(&dir);
    let predictions = classify(&model, &files, &InceptionEval::new(299), 5).unwrap();
    assert_top_5("PNG", "TF", &predictions, &expected.images, 1e-3);
}

/// TF-slim's evaluation of JPEG photos (tf.io.decode_jpeg, central crop 0.875, bilinear resize
/// to 299, [-1, 1]) against ours: the same top 5, probabilities within 2e-3 relative. The
/// issue's bound was 2% (zune-jpeg's pixels gave up to 24%); what remains is float rounding in
/// the resize and the network: TF's decoded pixels saved as PNG give our probabilities bit for
/// bit. On scikit-learn's china.jpg and flower.jpg (2026-11-25): 1.01e-3 at most (the PNG
/// pictures: 3.4e-4).
#[test]
fn jpeg_photos_get_tfs_top_5() {
    let Some(dir) = std::env::var_os("TOWERS_TF_INCEPTION_V3").map(PathBuf::from) else {
        println!(
            "skipped: TOWERS_TF_INCEPTION_V3 names no TF-slim checkpoint (see the file's doc)"
        );
        return;
    };
    let Ok(json) = std::fs::read_to_string(dir.join("jpeg_expected.json")) else {
        println!("skipped: no jpeg_expected.json (scripts/tf_fixtures/classify_top5.py)");
        return;
    };
    let expected: JpegExpected = serde_json::from_str(&json).unwrap();
    let model = restored(&dir, &Device::flex());
    let files: Vec<PathBuf> = expected
        .images
        .iter()
        .map(|p| dir.join("jpeg").join(&p.file))
        .collect();
    let predictions = classify(&model, &files, &InceptionEval::new(299), 5).unwrap();
    let worst = assert_top_5("JPEG", "TF", &predictions, &expected.images, 2e-3);
    println!("largest relative difference {worst:e}");
}
