//! `features.json`: the features of a prepared dataset's examples, as TFDS writes them: the
//! `FeaturesDict` proto in proto3's JSON form (TFDS 4.6 on), or the older
//! `{"type": <class>, "content": ...}` form TFDS still reads (`FeatureConnector.from_json`'s
//! legacy mode). Only what a reader of images and labels needs is kept: which top-level
//! features are images and class labels.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::error::{Error, Result};

use super::info::read_json;

/// The name of the file in a prepared dataset's folder.
pub(super) const FILE_NAME: &str = "features.json";

/// What one top-level feature is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Feature {
    /// `tfds.features.Image`: encoded bytes (PNG or JPEG) of its `dtype`.
    Image { dtype: String },
    /// `tfds.features.ClassLabel`: an `int64` in `0..num_classes`.
    ClassLabel { num_classes: u64 },
    /// Any other feature, by its Python class name.
    Other { class: String },
}

/// The top-level features of a dataset, by key (sorted, as TFDS sorts them).
#[derive(Debug, Clone)]
pub(super) struct Features(pub BTreeMap<String, Feature>);

impl Features {
    /// Reads `dir`'s `features.json`.
    pub(super) fn read(dir: &Path) -> Result<Self> {
        let path = dir.join(FILE_NAME);
        let json: Value = read_json(&path)?;
        parse(&json)
            .map(Self)
            .map_err(|reason| Error::File { path, reason })
    }

    /// The keys of the features that are `kind`'s, e.g. every image.
    pub(super) fn keys_where(&self, kind: fn(&Feature) -> bool) -> Vec<&str> {
        let matching = self.0.iter().filter(|(_, feature)| kind(feature));
        matching.map(|(key, _)| key.as_str()).collect()
    }
}

/// The features of a `FeaturesDict` in either form.
fn parse(json: &Value) -> Result<BTreeMap<String, Feature>, String> {
    let (class, dict) = match json.get("type") {
        Some(class) => (class, json.get("content")),
        None => (
            json.get("pythonClassName").unwrap_or(&Value::Null),
            json.get("featuresDict")
                .and_then(|dict| dict.get("features")),
        ),
    };
    let top_is_dict = class.as_str().is_some_and(|c| c.ends_with(".FeaturesDict"));
    let Some(dict) = dict.and_then(Value::as_object).filter(|_| top_is_dict) else {
        return Err(format!(
            "not a FeaturesDict of TFDS (its class: {class}); a reader of images needs one"
        ));
    };
    dict.iter()
        .map(|(key, value)| Ok((key.clone(), feature(key, value)?)))
        .collect()
}

/// One feature in either form: the legacy `content` or the proto's field named after the kind.
fn feature(key: &str, json: &Value) -> Result<Feature, String> {
    let (class, content) = match json.get("type") {
        Some(class) => (class.as_str(), json.get("content")),
        None => (json.get("pythonClassName").and_then(Value::as_str), None),
    };
    let class = class.ok_or_else(|| format!("feature {key} names no class"))?;
    let field = |proto: &str| content.or_else(|| json.get(proto)).unwrap_or(&Value::Null);
    let kind = class.rsplit('.').next().unwrap_or(class);
    Ok(match kind {
        "Image" => {
            let dtype = field("image").get("dtype").and_then(Value::as_str);
            Feature::Image {
                dtype: dtype.unwrap_or("uint8").to_string(),
            }
        }
        "ClassLabel" => {
            let label = field("classLabel");
            let count = label.get("numClasses").or_else(|| label.get("num_classes"));
            let count = count.and_then(|n| n.as_u64().or_else(|| n.as_str()?.parse().ok()));
            Feature::ClassLabel {
                num_classes: count
                    .ok_or_else(|| format!("class label {key} gives no number of classes"))?,
            }
        }
        _ => Feature::Other {
            class: class.to_string(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(json: &str) -> Result<BTreeMap<String, Feature>, String> {
        parse(&serde_json::from_str(json).unwrap())
    }

    /// The legacy form, as TFDS's own `FeatureConnector.to_json` documents it.
    #[test]
    fn the_legacy_form_is_read() {
        let features = parsed(
            r#"{"type": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
                "content": {
                  "input": {"type": "tensorflow_datasets.core.features.image_feature.Image",
                            "content": {"shape": [null, null, 3], "dtype": "uint8",
                                        "encoding_format": "png"}},
                  "target": {"type": "tensorflow_datasets.core.features.class_label_feature.ClassLabel",
                             "content": {"num_classes": 10}}}}"#,
        )
        .unwrap();
        assert_eq!(
            features["input"],
            Feature::Image {
                dtype: "uint8".into()
            }
        );
        assert_eq!(features["target"], Feature::ClassLabel { num_classes: 10 });
    }

    #[test]
    fn what_is_not_a_features_dict_is_named() {
        let not_dict = parsed(r#"{"pythonClassName": "x.Tensor", "tensor": {}}"#);
        assert!(
            not_dict
                .unwrap_err()
                .contains("not a FeaturesDict of TFDS (its class: \"x.Tensor\")")
        );
        let no_count = parsed(
            r#"{"pythonClassName": "a.FeaturesDict", "featuresDict": {"features": {
                "y": {"pythonClassName": "b.ClassLabel", "classLabel": {}}}}}"#,
        );
        assert_eq!(
            no_count.unwrap_err(),
            "class label y gives no number of classes"
        );
    }
}
