//! What the tests against another framework's network share: its outputs as its fixture script
//! wrote them (`expected.json`: logits of random inputs, top 5 of pictures), and how close ours
//! must come.

use std::path::{Path, PathBuf};

use burn::tensor::{Device, Tensor, TensorData};
use burn_towers::models::ImageClassifier;
use burn_towers::train::Prediction;

/// `expected.json` of `scripts/tf_fixtures/inception_v3_checkpoint.py` or
/// `keras_applications.py`.
#[derive(serde::Deserialize)]
pub(crate) struct Expected {
    /// The logits of `inputs.f32`, one row per input.
    pub(crate) inputs_logits: Vec<Vec<f32>>,
    /// The pictures of `images/`.
    pub(crate) images: Vec<Picture>,
}

/// A picture's top 5 classes and their probabilities.
#[derive(serde::Deserialize)]
pub(crate) struct Picture {
    pub(crate) file: String,
    pub(crate) top5: Vec<usize>,
    pub(crate) probs: Vec<f32>,
}

impl Expected {
    /// `dir/expected.json`.
    pub(crate) fn read(dir: &Path) -> Self {
        let text = std::fs::read_to_string(dir.join("expected.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    /// The pictures' files, in `dir/images`.
    pub(crate) fn picture_files(&self, dir: &Path) -> Vec<PathBuf> {
        let files = self.images.iter();
        files.map(|p| dir.join("images").join(&p.file)).collect()
    }
}

/// Logits within 1e-4 of the other framework's, relative to the largest |logit|: 94
/// convolutions (Inception v3's; ResNet-50's 53) summed in another order than TF's cost a few
/// float32 ulps each.
const TOLERANCE: f32 = 1e-4;

/// `dir/inputs.f32`: `n` images of `size` x `size` x 3 f32 (NHWC, preprocessed), as NCHW on
/// `device`.
pub(crate) fn inputs(dir: &Path, n: usize, size: usize, device: &Device) -> Tensor<4> {
    let values = towers_testing::torchvision::read_f32_le(&dir.join("inputs.f32"));
    let nhwc = TensorData::new(values, [n, size, size, 3]);
    Tensor::<4>::from_data(nhwc, device).permute([0, 3, 1, 2])
}

/// Asserts that `model`'s logits of `images` are within [`TOLERANCE`] of `want` (a row per
/// image); `what` names the weights in messages.
pub(crate) fn assert_logits(
    what: &str,
    model: &impl ImageClassifier,
    images: Tensor<4>,
    want: &[Vec<f32>],
) {
    let logits: Vec<f32> = model.forward(images).into_data().try_to_vec().unwrap();
    let error = relative_error(&logits, &want.concat());
    println!("{what}: random inputs: relative error {error:e}");
    assert!(error < TOLERANCE, "{what}: {error}");
}

/// The largest difference between `got` and `want`, relative to the largest |`want`|.
fn relative_error(got: &[f32], want: &[f32]) -> f32 {
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
    let diff = got
        .iter()
        .zip(want)
        .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    diff / scale
}

/// Asserts that each prediction has `want`'s top 5, with probabilities within `relative` of
/// `framework`'s (named in messages, as `what`'s); returns the largest relative difference.
pub(crate) fn assert_top_5(
    what: &str,
    framework: &str,
    got: &[Prediction],
    want: &[Picture],
    relative: f32,
) -> f32 {
    let mut worst = 0f32;
    for (got, want) in got.iter().zip(want) {
        let classes: Vec<usize> = got.top.iter().map(|&(c, _)| c).collect();
        let probs: Vec<f32> = got.top.iter().map(|&(_, p)| p).collect();
        println!(
            "{what}: {}: top 5 {classes:?} {probs:?}, {framework} {:?} {:?}",
            want.file, want.top5, want.probs
        );
        assert_eq!(classes, want.top5, "{what}: {}", want.file);
        for (p, q) in probs.iter().zip(&want.probs) {
            worst = worst.max((p - q).abs() / q);
            let file = &want.file;
            assert!(
                (p - q).abs() <= relative * q,
                "{what}: {file}: {p} vs {framework}'s {q}"
            );
        }
    }
    worst
}
