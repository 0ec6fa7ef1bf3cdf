//! keras.applications' InceptionV3 (1000 classes, random weights) in Keras's three weight files
//! gives Keras's logits, and classifies pictures with Keras's top 5 and probabilities, through
//! TF's evaluation preprocessing. The files (about 95 MB each) are not in the repository:
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

#[derive(serde::Deserialize)]
struct Expected {
    inputs_logits: Vec<Vec<f32>>,
    images: Vec<Picture>,
}

#[derive(serde::Deserialize)]
struct Picture {
    file: String,
    top5: Vec<usize>,
    probs: Vec<f32>,
}

/// Logits within 1e-4 of Keras's, relative to the largest |logit|, as TF-slim's
/// (`tf_inception_v3.rs`): the convolutions sum in another order.
const TOLERANCE: f32 = 1e-4;

fn relative_error(got: &[f32], want: &[f32]) -> f32 {
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
    let diff = got
        .iter()
        .zip(want)
        .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    diff / scale
}

#[test]
fn keras_files_give_keras_logits_and_top_5() {
    let Some(dir) = std::env::var_os("TOWERS_KERAS_INCEPTION_V3").map(PathBuf::from) else {
        println!("skipped: TOWERS_KERAS_INCEPTION_V3 names no Keras files (see the file's doc)");
        return;
    };
    let expected: Expected =
        serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
    let device = Device::flex();
    let n = expected.inputs_logits.len();
    let values = towers_testing::torchvision::read_f32_le(&dir.join("inputs.f32"));
    let images = Tensor::<4>::from_data(TensorData::new(values, [n, 299, 299, 3]), &device)
        .permute([0, 3, 1, 2]);
    let files: Vec<PathBuf> = expected
        .images
        .iter()
        .map(|p| dir.join("images").join(&p.file))
        .collect();
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
        for (got, want) in predictions.iter().zip(&expected.images) {
            let classes: Vec<usize> = got.top.iter().map(|&(c, _)| c).collect();
            let probs: Vec<f32> = got.top.iter().map(|&(_, p)| p).collect();
            println!(
                "{file}: {}: top 5 {classes:?} {probs:?}, Keras {:?} {:?}",
                want.file, want.top5, want.probs
            );
            assert_eq!(classes, want.top5, "{file}: {}", want.file);
            for (p, q) in probs.iter().zip(&want.probs) {
                assert!(
                    (p - q).abs() <= 1e-3 * q,
                    "{file}: {}: {p} vs Keras's {q}",
                    want.file
                );
            }
        }
    }
}
