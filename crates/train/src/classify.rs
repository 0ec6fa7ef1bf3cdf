//! Predictions for image files: decode, the model's evaluation preprocessing, softmax, top k.

use std::path::{Path, PathBuf};

use burn::tensor::{Tensor, TensorData, activation::softmax};
use rand::SeedableRng;
use towers_data::transforms::{CifarEval, ResizeMethod, Rng, Transform, resize};
use towers_data::{BoundingBox, Cause, Image};
use towers_models::ImageClassifier;

use crate::error::{Error, Result};
use crate::eval::{for_evaluation, read_back};

/// One image's most probable classes.
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    /// The image file.
    pub file: PathBuf,
    /// `(class, probability)`, most probable first.
    pub top: Vec<(usize, f32)>,
}

impl Prediction {
    /// `{"file": ..., "top": [{"class": i, "label": ..., "prob": p}, ...]}`; `label` is null
    /// without a label for the class.
    pub fn to_json(&self, labels: &[String]) -> serde_json::Value {
        let top: Vec<serde_json::Value> = self
            .top
            .iter()
            .map(|&(class, prob)| {
                serde_json::json!({"class": class, "label": labels.get(class), "prob": prob})
            })
            .collect();
        serde_json::json!({"file": self.file, "top": top})
    }
}

/// The `k` most probable classes of each image file under `model` (in evaluation state), each
/// image decoded (JPEG, PNG, BMP, PPM/PGM, TIFF or WebP; greyscale and alpha made RGB) by
/// `transform` and put through it ([`Transform::apply_encoded`]:
/// [`TorchvisionEval`](towers_data::transforms::TorchvisionEval) decodes as Pillow does, the
/// other transforms as TF does).
/// An unreadable image is an error naming the file.
pub fn classify<M: ImageClassifier>(
    model: &M,
    files: &[PathBuf],
    transform: &dyn Transform,
    k: usize,
) -> Result<Vec<Prediction>> {
    let (model, device) = for_evaluation(model)?;
    let mut rng = Rng::seed_from_u64(0);
    let mut predictions = Vec::new();
    for file in files {
        let bad = |error| Error::Image {
            path: file.clone(),
            error,
        };
        let bytes = std::fs::read(file).map_err(Error::io(file))?;
        let planes = transform
            .apply_encoded(&bytes, &[], &mut rng)
            .map_err(bad)?;
        let [c, h, w] = planes.shape();
        let data = TensorData::new(planes.into_data(), [1, c, h, w]);
        let logits = model.forward(Tensor::from_data(data, &device));
        let probs = read_back(softmax(logits, 1), "probabilities")?;
        predictions.push(Prediction {
            file: file.clone(),
            top: top_k(&probs, k),
        });
    }
    Ok(predictions)
}

/// The CIFAR-10 evaluation preprocessing for any image: resized to 32x32 (bilinear) and
/// scaled to 0..=255 like the pixels of the CIFAR-10 files, then [`CifarEval`] (central crop to
/// `size`, per-image standardization).
#[derive(Debug, Clone)]
pub struct CifarImage(pub CifarEval);

impl Transform for CifarImage {
    fn apply(
        &self,
        image: Image,
        boxes: &[BoundingBox],
        rng: &mut Rng,
    ) -> std::result::Result<Image, Cause> {
        let mut image = resize(&image, 32, 32, ResizeMethod::Bilinear);
        image.data_mut().iter_mut().for_each(|v| *v *= 255.0);
        self.0.apply(image, boxes, rng)
    }
}

/// The `k` largest values with their indices, largest first (ties: lower index first).
fn top_k(values: &[f32], k: usize) -> Vec<(usize, f32)> {
    let mut indexed: Vec<(usize, f32)> = values.iter().copied().enumerate().collect();
    indexed.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    indexed.truncate(k);
    indexed
}

/// Class names from a label file: `label<TAB>name` lines (as `ImageFolder::write_label_map`
/// writes them) or one name per line (line `i` names class `i`), one form or the other: the
/// first line decides, and a line of the other form is an error naming it. A label may exceed
/// the file's line count by one (TF's ImageNet maps name 1..=1000, 0 the background, in 1000
/// lines), no more: there are at most as many names as lines, plus one.
pub fn read_labels(path: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path).map_err(Error::io(path))?;
    parse_labels(path, &text)
}

/// [`read_labels`] of the text of the file at `path` (which errors name). The entry point of
/// the coverage-guided fuzz target (`fuzz/`), which skips the file.
#[doc(hidden)]
pub fn parse_labels(path: &Path, text: &str) -> Result<Vec<String>> {
    let indexed = text.lines().next().is_some_and(|line| line.contains('\t'));
    if !indexed {
        return match text.lines().position(|line| line.contains('\t')) {
            // A plain name after plain names: pushed at the end, it would name the wrong class.
            Some(at) => Err(bad_line(
                path,
                at,
                "a `label<TAB>name` line among plain names",
            )),
            None => Ok(text.lines().map(str::to_string).collect()),
        };
    }
    let lines = text.lines().count();
    let mut labels = Vec::new();
    for (at, line) in text.lines().enumerate() {
        let Some((index, name)) = line.split_once('\t') else {
            return Err(bad_line(
                path,
                at,
                "a plain name among `label<TAB>name` lines",
            ));
        };
        let index: usize = index
            .parse()
            .map_err(|_| bad_line(path, at, &format!("bad label `{index}`")))?;
        if index > lines {
            let reason = format!("label {index} past the file's {lines} lines");
            return Err(bad_line(path, at, &reason));
        }
        if labels.len() <= index {
            labels.resize(index + 1, String::new());
        }
        labels[index] = name.to_string();
    }
    Ok(labels)
}

/// What is wrong with line `at` (from 0) of the label file at `path`.
fn bad_line(path: &Path, at: usize, reason: &str) -> Error {
    Error::File {
        path: path.to_path_buf(),
        reason: format!("line {}: {reason}", at + 1),
        error: None,
    }
}

#[cfg(test)]
mod tests {
    use towers_testing::{assert_error_names, report};

    use super::*;

    #[test]
    fn top_k_orders_by_probability_then_index() {
        let top = top_k(&[0.1, 0.4, 0.05, 0.4, 0.05], 3);
        assert_eq!(top, [(1, 0.4), (3, 0.4), (0, 0.1)]);
        assert_eq!(top_k(&[0.5, 0.5], 5).len(), 2);
    }

    #[test]
    fn cifar_images_are_standardized_as_the_cifar10_files_are() {
        // A 32x32 image in [0, 1] goes through as its 0..=255 bytes through CifarEval.
        let values: Vec<f32> = (0..32 * 32 * 3).map(|i| (i % 251) as f32 / 255.0).collect();
        let image = Image::from_hwc(values.clone(), 32, 32, 3);
        let bytes = Image::from_hwc(values.iter().map(|v| v * 255.0).collect(), 32, 32, 3);
        let mut rng = Rng::seed_from_u64(0);
        let eval = CifarEval { size: 24 };
        let got = CifarImage(eval.clone())
            .apply(image, &[], &mut rng)
            .unwrap();
        let want = eval.apply(bytes, &[], &mut rng).unwrap();
        assert_eq!(got.shape(), [24, 24, 3]);
        let diff = got
            .data()
            .iter()
            .zip(want.data())
            .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(diff < 1e-4, "{diff}");
    }

    #[test]
    fn an_undecodable_image_is_an_image_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-photo.jpg");
        std::fs::write(&file, b"plain text, not a JPEG").unwrap();
        let model = towers_testing::training::cifar_net(&burn::tensor::Device::flex());
        let transform = CifarImage(CifarEval { size: 24 });
        let error = classify(&model, std::slice::from_ref(&file), &transform, 1).unwrap_err();
        assert!(
            matches!(&error, Error::Image { path, .. } if *path == file),
            "{error:?}"
        );
        assert_error_names(&report(&error), &["not-a-photo.jpg"]);
    }

    #[test]
    fn labels_come_indexed_or_one_per_line() {
        let dir = tempfile::tempdir().unwrap();
        let indexed = dir.path().join("labels.txt");
        std::fs::write(&indexed, "1\tdaisy\n0\tbackground\n2\trose\n").unwrap();
        assert_eq!(
            read_labels(&indexed).unwrap(),
            ["background", "daisy", "rose"]
        );
        let plain = dir.path().join("plain.txt");
        std::fs::write(&plain, "cat\ndog\n").unwrap();
        assert_eq!(read_labels(&plain).unwrap(), ["cat", "dog"]);
        std::fs::write(&plain, "x\tdog\n").unwrap();
        let error = read_labels(&plain).unwrap_err();
        assert!(matches!(error, Error::File { .. }), "{error:?}");
        assert_error_names(&report(&error), &["plain.txt", "line 1", "bad label `x`"]);
        // A label far past the file (or at usize::MAX, where `index + 1` would wrap) is an
        // error, not a huge allocation.
        for huge in ["3", "1000000000000", "18446744073709551615"] {
            std::fs::write(&plain, format!("0\tcat\n{huge}\tdog\n")).unwrap();
            let error = read_labels(&plain).unwrap_err();
            assert_error_names(
                &error,
                &["plain.txt", "line 2", huge, "past the file's 2 lines"],
            );
        }
        std::fs::write(&plain, "1\tcat\n2\tdog\n").unwrap();
        assert_eq!(read_labels(&plain).unwrap(), ["", "cat", "dog"]);
    }

    /// Found by the cargo-fuzz target `labels` (fuzz/): a plain name after `label<TAB>name`
    /// lines was pushed after the highest label, naming the wrong class and making more names
    /// than lines. Either form's line among the other's is now an error naming it.
    #[test]
    fn a_file_mixing_both_forms_is_an_error_naming_the_line() {
        let crash =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fuzz/labels-mixed-forms");
        let error = read_labels(&crash).unwrap_err();
        assert_error_names(
            &error,
            &["labels-mixed-forms", "line 3", "a plain name among"],
        );
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain.txt");
        std::fs::write(&plain, "cat\ndog\n2\tbird\n").unwrap();
        let error = read_labels(&plain).unwrap_err();
        assert_error_names(
            &error,
            &["plain.txt", "line 3", "`label<TAB>name` line among"],
        );
    }
}
