//! Weights in the safetensors format, named by module path (`mixed_5b.branch_1.0.conv.weight`,
//! the names burn-store's `SafetensorsStore` uses too), all f32: the export of a trained model,
//! and a reader of one, for [`restore`](super::restore).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use burn::module::Module;
use safetensors::tensor::{Dtype, TensorView};

use super::by_path::ByPath;
use super::error::{Result, WeightsError};
use crate::params::walk_values;

/// Every float tensor of `model` (parameters and batch-norm moving statistics) as the bytes of
/// a safetensors file, with `metadata` in its header.
pub fn to_safetensors<M: Module>(
    model: &M,
    metadata: HashMap<String, String>,
) -> std::result::Result<Vec<u8>, String> {
    let tensors: Vec<(String, Vec<usize>, Vec<u8>)> = walk_values(model)
        .into_iter()
        .map(|(path, shape, values)| {
            let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            (path, shape, bytes)
        })
        .collect();
    let views = tensors
        .iter()
        .map(|(path, shape, bytes)| {
            let view =
                TensorView::new(Dtype::F32, shape.clone(), bytes).map_err(|e| e.to_string())?;
            Ok((path.as_str(), view))
        })
        .collect::<std::result::Result<Vec<_>, String>>()?;
    safetensors::serialize(views, Some(metadata)).map_err(|e| e.to_string())
}

/// Reads a safetensors file written by [`to_safetensors`] (or any with f32 tensors named by
/// module path); its header is checked against the file's real length.
pub fn read_safetensors(path: &Path) -> Result<ByPath> {
    let bytes = std::fs::read(path).map_err(WeightsError::io(path))?;
    safetensors_from_bytes(path, &bytes)
}

/// [`read_safetensors`] of a file already read: `bytes` are the file at `path` (which errors
/// name). The entry point of the coverage-guided fuzz target (`fuzz/`), which skips the file.
#[doc(hidden)]
pub fn safetensors_from_bytes(path: &Path, bytes: &[u8]) -> Result<ByPath> {
    let file = safetensors::SafeTensors::deserialize(bytes)
        .map_err(|e| WeightsError::format(path, "not a safetensors file").caused_by(e))?;
    let mut tensors = BTreeMap::new();
    for (name, view) in file.tensors() {
        if view.dtype() != Dtype::F32 {
            let reason = format!("{:?}; only F32 tensors are read", view.dtype());
            return Err(WeightsError::tensor(path, name, reason));
        }
        let values = view
            .data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
            .collect();
        tensors.insert(name, (view.shape().to_vec(), values));
    }
    Ok(ByPath::new(path, tensors))
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    /// Bytes that are not a safetensors file: a format error naming the file, whose `source()`
    /// is the safetensors crate's own error as a value, kept out of the message.
    #[test]
    fn the_parsers_error_is_the_source_not_text() {
        let path = Path::new("model.safetensors");
        let Err(error) = safetensors_from_bytes(path, b"not a safetensors file at all") else {
            panic!("garbage parsed");
        };
        assert_eq!(
            error.to_string(),
            "model.safetensors: not a safetensors file"
        );
        let source = error.source().expect("the parser's error");
        assert!(
            source
                .downcast_ref::<safetensors::SafeTensorError>()
                .is_some(),
            "{source:?}"
        );
    }
}
