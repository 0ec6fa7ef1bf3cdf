//! tf-keras's SavedModels (`model.save("dir")`, TF 2.x's default format) keep the Keras
//! model's configuration beside the graph, in `keras_metadata.pb`: a `SavedMetadata` proto
//! (tf-keras's `protobuf/saved_metadata.proto`) of one JSON text per saved object, the model's
//! (`root`) holding the `model_config` a whole-model `.h5` keeps as an attribute. Keras 3's
//! SavedModels (`tf.saved_model.save`, `model.export`) keep none.

use std::path::Path;

use prost::Message;
use serde_json::Value;

use super::error::{Result, WeightsError};

/// The file, beside `saved_model.pb`.
const FILE: &str = "keras_metadata.pb";

/// The largest file read (as TFDS's metadata): keras.applications' EfficientNetB0's is 0.5 MB,
/// B7's, the largest network read here, a few times that.
const MOST_BYTES: u64 = 64 << 20;

/// `SavedMetadata`: every saved object's metadata.
#[derive(Clone, PartialEq, prost::Message)]
struct SavedMetadata {
    #[prost(message, repeated, tag = "1")]
    nodes: Vec<SavedObject>,
}

/// `SavedObject`, the parts read here: its path from the root and its metadata.
#[derive(Clone, PartialEq, prost::Message)]
struct SavedObject {
    /// `root` for the model, `root.layer-3` for a layer.
    #[prost(string, tag = "3")]
    node_path: String,
    /// A JSON object, as Python's `json` writes one.
    #[prost(string, tag = "5")]
    metadata: String,
}

/// The metadata (JSON text) of the model the SavedModel folder `dir` holds, from its
/// `keras_metadata.pb`; `None` when it has none (not saved by tf-keras).
pub(super) fn root_metadata(dir: &Path) -> Result<Option<String>> {
    let path = dir.join(FILE);
    let Ok(metadata) = std::fs::metadata(&path) else {
        return Ok(None);
    };
    if metadata.len() > MOST_BYTES {
        return Err(WeightsError::format(
            &path,
            format!("{} bytes: more than the {MOST_BYTES} read", metadata.len()),
        ));
    }
    let bytes = std::fs::read(&path).map_err(WeightsError::io(&path))?;
    let saved = SavedMetadata::decode(bytes.as_slice())
        .map_err(|e| WeightsError::format(&path, "not tf-keras's SavedMetadata").caused_by(e))?;
    let root = saved
        .nodes
        .into_iter()
        .find(|node| node.node_path == "root");
    let root = root.ok_or_else(|| WeightsError::format(&path, "no `root` object: no model"))?;
    Ok(Some(root.metadata))
}

/// The model configuration in the root `metadata` (parsed): its `model_config`, as a
/// whole-model `.h5` keeps it (`{"class_name": ..., "config": ...}`); `None` without one (a
/// model tf-keras cannot rebuild from a configuration, a subclassed one).
pub(super) fn model_config(metadata: Value) -> Option<Value> {
    match metadata {
        Value::Object(mut fields) => fields.remove("model_config").filter(Value::is_object),
        _ => None,
    }
}
