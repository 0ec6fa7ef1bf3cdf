//! What a Keras file says of its network besides its weights: the model configuration that a
//! Keras 3 `.keras` archive (`config.json`), a whole-model `.h5` (`model.save("x.h5")`, its
//! `model_config` attribute) and a tf-keras SavedModel (`keras_metadata.pb`) keep, and that
//! weights-only files (`save_weights`, the ImageNet files keras.applications downloads) and
//! Keras 3's SavedModels and TF checkpoints lack.
//!
//! Our models are built by the caller, so the configuration is read for what the weights alone
//! cannot say: whether keras.applications' EfficientNet was built for the ImageNet weights, and
//! so scales its normalized input (see [`KerasConfig::channel_scales`]).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::error::{Result, WeightsError};
use super::keras_file::{archived, hdf5, is_archive, strings};
use super::keras_metadata;
use super::tf_checkpoint::saved_model_dir;

/// A Keras file's model configuration (see the module's doc).
#[derive(Debug, Clone, PartialEq)]
pub struct KerasConfig {
    path: PathBuf,
    json: Value,
}

impl KerasConfig {
    /// The model configuration of the Keras file at `path` (`.h5`, `.hdf5`, `.keras`) or of
    /// the tf-keras SavedModel there (its folder or `saved_model.pb`), or `None` for a file of
    /// weights only, and for anything else (another SavedModel, a TF checkpoint). An archive's
    /// configuration is read within the same bound on memory as its weights.
    pub fn read(path: &Path) -> Result<Option<Self>> {
        let keras_file = path.extension().is_some_and(|e| e == "h5" || e == "hdf5");
        if !keras_file && !is_archive(path) {
            return match saved_model_dir(path) {
                Some(dir) => Self::of_saved_model(path, dir),
                None => Ok(None),
            };
        }
        let text = match is_archive(path) {
            true => archived(path, "config.json")?
                .map(|bytes| String::from_utf8_lossy(&bytes).into_owned()),
            false => {
                let file = hdf5(path)?;
                let root = (file.root_group()).map_err(|e| {
                    WeightsError::format(path, "unreadable HDF5 root group").caused_by(e)
                })?;
                strings(path, &root, "model_config")?.map(|chunks| chunks.concat())
            }
        };
        let Some(text) = text else {
            return Ok(None);
        };
        let json = serde_json::from_str(&without_python_numbers(&text)).map_err(|e| {
            WeightsError::format(path, "its model configuration is not JSON").caused_by(e)
        })?;
        Ok(Some(Self {
            path: path.to_path_buf(),
            json,
        }))
    }

    /// The configuration tf-keras kept beside the SavedModel folder `dir` (given as `path`).
    fn of_saved_model(path: &Path, dir: &Path) -> Result<Option<Self>> {
        let Some(metadata) = keras_metadata::root_metadata(dir)? else {
            return Ok(None);
        };
        let metadata = serde_json::from_str(&without_python_numbers(&metadata)).map_err(|e| {
            WeightsError::format(path, "its Keras metadata is not JSON").caused_by(e)
        })?;
        Ok(keras_metadata::model_config(metadata).map(|json| Self {
            path: path.to_path_buf(),
            json,
        }))
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The factors, one a channel, by which the network multiplies its input after its
    /// `Normalization` layer, or `None` when it does not. keras.applications' EfficientNet
    /// built for the ImageNet weights (`weights="imagenet"`) multiplies by `1 / √[0.229,
    /// 0.224, 0.225]` (TF issue 49930): Keras 3 with a `Rescaling` layer of one scale a channel,
    /// tf-keras with a `tf.math.multiply` layer. Built with `weights=None`, it does not. The
    /// first such layer counts, in a model nested in another (a transfer model) too.
    pub fn channel_scales(&self) -> Option<Vec<f64>> {
        let mut layers = Vec::new();
        layer_objects(&self.json, &mut layers);
        layers.into_iter().find_map(channel_scales_of)
    }
}

/// `text` with the numbers Python's `json` writes and JSON has not (`NaN`, `Infinity`,
/// `-Infinity`: Keras saves `ReLU(max_value=float("inf"))` so) made `null`, outside strings.
/// The configuration is read for layers' classes and scales, never for such a value.
fn without_python_numbers(text: &str) -> std::borrow::Cow<'_, str> {
    const NOT_JSON: [&str; 3] = ["-Infinity", "Infinity", "NaN"];
    if !NOT_JSON.iter().any(|word| text.contains(word)) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        let word = (!in_string)
            .then(|| NOT_JSON.iter().find(|word| rest.starts_with(**word)))
            .flatten();
        if let Some(word) = word {
            out.push_str("null");
            rest = &rest[word.len()..];
            continue;
        }
        match (in_string, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (_, false, '"') => in_string = !in_string,
            _ => {}
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out.into()
}

/// Every object of `json` with a `class_name` (a layer, a model, a dtype policy, ...), in
/// document order. serde_json refuses documents nested more than 128 deep, so the recursion is
/// bounded.
fn layer_objects<'a>(json: &'a Value, out: &mut Vec<&'a Value>) {
    match json {
        Value::Object(fields) => {
            if fields.contains_key("class_name") {
                out.push(json);
            }
            fields.values().for_each(|value| layer_objects(value, out));
        }
        Value::Array(values) => values.iter().for_each(|value| layer_objects(value, out)),
        _ => {}
    }
}

/// The factors a channel of `layer`, where it multiplies its input by one a channel: a
/// `Rescaling` with a list for its `scale` (Keras 3), or tf-keras's `tf.math.multiply` of a
/// constant `y` (its call's arguments, in the layer's `inbound_nodes`).
fn channel_scales_of(layer: &Value) -> Option<Vec<f64>> {
    let config = &layer["config"];
    match layer["class_name"].as_str()? {
        "Rescaling" => config["scale"].as_array().map(|scale| numbers(scale)),
        "TFOpLambda" if config["function"] == "math.multiply" => {
            let nodes = layer["inbound_nodes"].as_array()?;
            let mut arguments = nodes.iter().filter_map(Value::as_array).flatten();
            let y = arguments.find_map(|argument| argument.get("y"))?;
            Some(numbers(std::slice::from_ref(y))).filter(|factors| !factors.is_empty())
        }
        _ => None,
    }
}

/// The numbers of `values` and of the arrays among them, flattened in order.
fn numbers(values: &[Value]) -> Vec<f64> {
    let mut out = Vec::new();
    for value in values {
        match value {
            Value::Number(n) => out.extend(n.as_f64()),
            Value::Array(inner) => out.extend(numbers(inner)),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::weights::keras_file::tests::fixture;
    use serde_json::json;

    fn config(json: Value) -> KerasConfig {
        KerasConfig {
            path: PathBuf::from("model.keras"),
            json,
        }
    }

    /// Keras 3 saved `ReLU(max_value=inf)` with Python's bare `Infinity` in config.json
    /// (`relu_infinity.keras`, by Keras 3.15, which loads it): the configuration reads. The
    /// words inside strings stay.
    #[test]
    fn pythons_infinities_and_nans_read_as_null() {
        let read = KerasConfig::read(&fixture("relu_infinity.keras"))
            .unwrap()
            .unwrap();
        assert_eq!(read.channel_scales(), None);
        let text = r#"{"a": NaN, "b": [-Infinity, Infinity], "name": "NaN \"Infinity\""}"#;
        let parsed: Value = serde_json::from_str(&without_python_numbers(text)).unwrap();
        let expected = json!({"a": null, "b": [null, null], "name": "NaN \"Infinity\""});
        assert_eq!(parsed, expected);
    }

    #[test]
    fn whole_model_files_keep_a_configuration_and_weights_files_none() {
        for file in ["model.keras", "model_keras2.h5"] {
            let read = KerasConfig::read(&fixture(file)).unwrap();
            let read = read.unwrap_or_else(|| panic!("{file}: no configuration"));
            assert_eq!(read.json["class_name"], "Functional", "{file}");
            assert_eq!(read.channel_scales(), None, "{file}");
        }
        for file in ["keras2.h5", "model.weights.h5", "nested_keras2.h5"] {
            assert_eq!(KerasConfig::read(&fixture(file)).unwrap(), None, "{file}");
        }
    }

    /// EfficientNet's rescaling as Keras 3 (a `Rescaling` layer, here in a transfer model)
    /// and tf-keras (a `tf.math.multiply` layer) write it; a scalar `Rescaling` (its `1/255`)
    /// and other layers scale no channel.
    /// tf-keras's SavedModel keeps its model's configuration (`keras_metadata.pb`), by its
    /// folder or `saved_model.pb`; Keras 3's SavedModel and a TF2 checkpoint keep none
    /// (`tf2_object`, scripts/tf_fixtures/tf2_object_checkpoint.py).
    #[test]
    fn a_tf_keras_saved_model_keeps_its_configuration() {
        let object = fixture("../tf2_object");
        for saved in ["tf_keras_saved", "tf_keras_saved/saved_model.pb"] {
            let config = KerasConfig::read(&object.join(saved)).unwrap().unwrap();
            assert_eq!(config.json["class_name"], "Sequential", "{saved}");
            let layers = config.json["config"]["layers"].as_array().unwrap();
            let classes: Vec<&str> = (layers.iter())
                .filter_map(|layer| layer["class_name"].as_str())
                .collect();
            let expected = [
                "InputLayer",
                "Conv2D",
                "BatchNormalization",
                "DepthwiseConv2D",
                "Flatten",
                "Dropout",
                "Dense",
            ];
            assert_eq!(classes, expected, "{saved}");
        }
        for none in ["saved", "ckpt-1", "."] {
            assert_eq!(
                KerasConfig::read(&object.join(none)).unwrap(),
                None,
                "{none}"
            );
        }
    }

    #[test]
    fn channel_scales_are_found_as_each_keras_writes_them() {
        let scalar = json!({"class_name": "Rescaling", "config": {"scale": 0.0039, "offset": 0.0}});
        let keras3 = json!({"class_name": "Rescaling", "config": {"scale": [2.08, 2.11, 2.10]}});
        let nested = json!({"class_name": "Functional", "config": {"layers": [
            {"class_name": "InputLayer", "config": {}},
            {"class_name": "Functional", "config": {"layers": [scalar, keras3]}},
        ]}});
        assert_eq!(
            config(nested).channel_scales(),
            Some(vec![2.08, 2.11, 2.10])
        );

        let multiply = json!({"class_name": "TFOpLambda",
            "config": {"name": "tf.math.multiply", "function": "math.multiply"},
            "inbound_nodes": [["normalization", 0, 0, {"y": [[[[2.08, 2.11, 2.10]]]]}]]});
        let tf_keras =
            json!({"class_name": "Functional", "config": {"layers": [scalar, multiply]}});
        assert_eq!(
            config(tf_keras).channel_scales(),
            Some(vec![2.08, 2.11, 2.10])
        );

        let add = json!({"class_name": "TFOpLambda", "config": {"function": "math.add"},
            "inbound_nodes": [["normalization", 0, 0, {"y": [1.0, 2.0, 3.0]}]]});
        let plain = json!({"class_name": "Functional", "config": {"layers": [scalar, add]}});
        assert_eq!(config(plain).channel_scales(), None);
    }

    /// An archive whose configuration is no JSON, or JSON nested past serde_json's limit, is
    /// an error naming the file, not a panic or an overflowed stack.
    #[test]
    fn a_configuration_that_is_no_json_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in [
            ("cut.keras", "{\"class_name\": \"Functional\", ".to_string()),
            ("deep.keras", "[".repeat(1 << 20)),
        ] {
            let path = dir.path().join(name);
            let mut archive = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
            let options = zip::write::SimpleFileOptions::default();
            archive.start_file("config.json", options).unwrap();
            std::io::Write::write_all(&mut archive, text.as_bytes()).unwrap();
            archive.finish().unwrap();
            let error = KerasConfig::read(&path).err().unwrap().to_string();
            let words = format!("{}: its model configuration is not JSON", path.display());
            assert!(error.starts_with(&words), "{error}");
        }
    }
}
