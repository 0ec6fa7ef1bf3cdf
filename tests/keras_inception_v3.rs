//! keras.applications' InceptionV3 (1000 classes, random weights) in Keras's three weight files
//! gives Keras's logits, and classifies pictures with Keras's top 5 and probabilities, through
//! TF's evaluation preprocessing; nested in a transfer model of Keras's, it gives that model's
//! logits. The files (about 95 MB each) are not in the repository:
//!
//! ```text
//! /tmp/peers/bin/python scripts/tf_fixtures/keras_inception_v3.py /tmp/keras_inception_v3
//! TOWERS_KERAS_INCEPTION_V3=/tmp/keras_inception_v3 cargo test --workspace --test integration keras_inception_v3
//! ```
//!
//! Without `TOWERS_KERAS_INCEPTION_V3` the test says it was skipped and passes.

use std::path::{Path, PathBuf};

use burn::tensor::Device;
use burn_towers::data::transforms::InceptionEval;
use burn_towers::models::{InceptionV3, InceptionV3Config};
use burn_towers::train::{LoadOptions, classify, load_weights};

use crate::reference_outputs::{Expected, assert_logits, assert_top_5, inputs};

/// `TOWERS_KERAS_INCEPTION_V3`, the fixture script's output, or `None` (the test is skipped).
fn fixture_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("TOWERS_KERAS_INCEPTION_V3").map(PathBuf::from);
    if dir.is_none() {
        println!("skipped: TOWERS_KERAS_INCEPTION_V3 names no Keras files (see the file's doc)");
    }
    dir
}

/// A network of `classes` classes without an aux head, every parameter from `dir/file` and
/// every tensor of the file used.
fn restored(dir: &Path, file: &str, classes: usize, device: &Device) -> InceptionV3 {
    let model = InceptionV3Config::new(classes)
        .with_aux_logits(false)
        .init(device);
    let (model, report) = load_weights(model, &dir.join(file), LoadOptions::default()).unwrap();
    assert!(
        report.missing.is_empty() && report.skipped.is_empty() && report.unused.is_empty(),
        "{report}"
    );
    model
}

#[test]
fn keras_files_give_keras_logits_and_top_5() {
    let Some(dir) = fixture_dir() else {
        return;
    };
    let expected = Expected::read(&dir);
    let device = Device::flex();
    let images = inputs(&dir, expected.inputs_logits.len(), &device);
    let files = expected.picture_files(&dir);
    for file in [
        "inception_v3_keras2.h5",
        "inception_v3.weights.h5",
        "inception_v3.keras",
    ] {
        let model = restored(&dir, file, 1000, &device);
        assert_logits(file, &model, images.clone(), &expected.inputs_logits);
        let predictions = classify(&model, &files, &InceptionEval::new(299), 5).unwrap();
        assert_top_5(file, "Keras", &predictions, &expected.images, 1e-3);
    }
}

/// `expected.json`'s logits of the transfer model (`include_top=False`, pooling, dropout and
/// a new `Dense(5)`).
#[derive(serde::Deserialize)]
struct Transfer {
    transfer_logits: Vec<Vec<f32>>,
}

/// Transfer learning as Keras users write it: the network without its top nested in a model
/// of one's own with a new head, in Keras 2's and Keras 3's files, fills a 5-class network
/// without an aux head and gives Keras's logits.
#[test]
fn a_keras_transfer_model_gives_keras_logits() {
    let Some(dir) = fixture_dir() else {
        return;
    };
    let text = std::fs::read_to_string(dir.join("expected.json")).unwrap();
    let expected: Transfer = serde_json::from_str(&text).unwrap();
    let device = Device::flex();
    let images = inputs(&dir, expected.transfer_logits.len(), &device);
    for file in ["transfer_keras2.h5", "transfer.weights.h5"] {
        let model = restored(&dir, file, 5, &device);
        assert_logits(file, &model, images.clone(), &expected.transfer_logits);
    }
}
