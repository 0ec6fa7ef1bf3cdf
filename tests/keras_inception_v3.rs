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

use std::path::PathBuf;

use burn::tensor::{Device, Tensor, TensorData};
use burn_towers::data::transforms::InceptionEval;
use burn_towers::models::{ImageClassifier, InceptionV3Config};
use burn_towers::train::{LoadOptions, classify, load_weights};

use crate::reference_outputs::{Expected, TOLERANCE, assert_top_5, relative_error};

#[test]
fn keras_files_give_keras_logits_and_top_5() {
    let Some(dir) = std::env::var_os("TOWERS_KERAS_INCEPTION_V3").map(PathBuf::from) else {
        println!("skipped: TOWERS_KERAS_INCEPTION_V3 names no Keras files (see the file's doc)");
        return;
    };
    let expected = Expected::read(&dir);
    let device = Device::flex();
    let n = expected.inputs_logits.len();
    let values = towers_testing::torchvision::read_f32_le(&dir.join("inputs.f32"));
    let images = Tensor::<4>::from_data(TensorData::new(values, [n, 299, 299, 3]), &device)
        .permute([0, 3, 1, 2]);
    let files = expected.picture_files(&dir);
    for file in [
        "inception_v3_keras2.h5",
        "inception_v3.weights.h5",
        "inception_v3.keras",
    ] {
        let model = InceptionV3Config::new(1000)
            .with_aux_logits(false)
            .init(&device);
        let (model, report) = load_weights(model, &dir.join(file), LoadOptions::default()).unwrap();
        assert!(
            report.missing.is_empty() && report.skipped.is_empty() && report.unused.is_empty(),
            "{report}"
        );
        assert_eq!(report.restored.len(), 94 * 4 + 2, "{file}");

        let logits: Vec<f32> = model
            .forward(images.clone())
            .into_data()
            .try_to_vec()
            .unwrap();
        let error = relative_error(&logits, &expected.inputs_logits.concat());
        println!("{file}: random inputs: relative error {error:e}");
        assert!(error < TOLERANCE, "{file}: {error}");

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
    let Some(dir) = std::env::var_os("TOWERS_KERAS_INCEPTION_V3").map(PathBuf::from) else {
        println!("skipped: TOWERS_KERAS_INCEPTION_V3 names no Keras files (see the file's doc)");
        return;
    };
    let text = std::fs::read_to_string(dir.join("expected.json")).unwrap();
    let expected: Transfer = serde_json::from_str(&text).unwrap();
    let device = Device::flex();
    let n = expected.transfer_logits.len();
    let values = towers_testing::torchvision::read_f32_le(&dir.join("inputs.f32"));
    let images = Tensor::<4>::from_data(TensorData::new(values, [n, 299, 299, 3]), &device)
        .permute([0, 3, 1, 2]);
    for file in ["transfer_keras2.h5", "transfer.weights.h5"] {
        let model = InceptionV3Config::new(5)
            .with_aux_logits(false)
            .init(&device);
        let (model, report) = load_weights(model, &dir.join(file), LoadOptions::default()).unwrap();
        assert!(
            report.missing.is_empty() && report.skipped.is_empty() && report.unused.is_empty(),
            "{report}"
        );
        let logits: Vec<f32> = model
            .forward(images.clone())
            .into_data()
            .try_to_vec()
            .unwrap();
        let error = relative_error(&logits, &expected.transfer_logits.concat());
        println!("{file}: random inputs: relative error {error:e}");
        assert!(error < TOLERANCE, "{file}: {error}");
    }
}
