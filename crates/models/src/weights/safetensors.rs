//! Weights in the safetensors format, named by module path (`mixed_5b.branch_1.0.conv.weight`,
//! the names burn-store's `SafetensorsStore` uses too), all f32: the export of a trained model,
//! and a reader of one, for [`restore`](super::restore). A PyTorch state dict saved as
//! safetensors (Hugging Face's and timm's `model.safetensors`) is read through the model's
//! torchvision names instead ([`open_safetensors`]).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use burn::module::Module;
use safetensors::SafeTensors;
use safetensors::tensor::{Dtype, TensorView};

use super::by_path::ByPath;
use super::byte_values::each;
use super::error::{Result, WeightsError};
use super::restore::WeightSource;
use super::torch_names::TorchNamed;
use super::torch_source::{StoredTensor, TorchSource};
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
    by_module_path(path, &parsed(path, bytes)?)
}

/// The tensors of `file` (the file at `path`) by module path, as f32.
fn by_module_path(path: &Path, file: &SafeTensors) -> Result<ByPath> {
    let mut tensors = BTreeMap::new();
    for (name, view) in file.tensors() {
        let values = decoded(&view).map_err(|reason| WeightsError::tensor(path, &name, reason))?;
        tensors.insert(name, values);
    }
    Ok(ByPath::new(path, tensors))
}

/// The safetensors file at `path` for the parameters of `M`: an export of ours as
/// [`read_safetensors`] reads it, or a PyTorch state dict saved as safetensors (Hugging
/// Face's and timm's `model.safetensors`, torchvision's keys) through `M`'s torchvision names,
/// as its `.pth` would be read. A file without our tag (`format: burn-towers` in its
/// metadata: burn-store's own writes none) is a state dict when it has its batch norms' step
/// counters (`num_batches_tracked`, which PyTorch keeps and we do not), or, where a conversion
/// kept only its floating-point tensors, batch norms with running statistics but without our
/// `gamma` (PyTorch's is `weight`). A file without batch norms names its tensors alike either
/// way, and is read by module path.
pub fn open_safetensors<M: TorchNamed>(path: &Path) -> Result<Box<dyn WeightSource>> {
    let bytes = std::fs::read(path).map_err(WeightsError::io(path))?;
    let file = parsed(path, &bytes)?;
    // `SafeTensors` keeps the header's metadata to itself: read it again, for the tag.
    let (_, header) = SafeTensors::read_metadata(&bytes).expect("parsed above");
    let ours = (header.metadata().as_ref())
        .and_then(|metadata| metadata.get("format"))
        .is_some_and(|format| format == "burn-towers");
    let names = file.names();
    let ends = |suffix: &str| names.iter().any(|name| name.ends_with(suffix));
    let counters = ends(".num_batches_tracked");
    // Batch norms with running statistics but without our `gamma` (PyTorch's `weight`).
    let torch_norms = ends(".running_mean") && !ends(".gamma");
    if ours || !(counters || torch_norms) {
        return Ok(Box::new(by_module_path(path, &file)?));
    }
    let tensors = file.tensors().into_iter();
    let tensors = tensors.map(|(name, view)| (name, StoredTensor::Decoded(decoded(&view))));
    Ok(Box::new(TorchSource::of_tensors::<M>(
        path,
        tensors.collect(),
    )))
}

/// The safetensors file of `bytes`, or a format error naming `path`.
fn parsed<'a>(path: &Path, bytes: &'a [u8]) -> Result<SafeTensors<'a>> {
    SafeTensors::deserialize(bytes)
        .map_err(|e| WeightsError::format(path, "not a safetensors file").caused_by(e))
}

/// The shape and values of a floating-point tensor (little-endian, as safetensors stores
/// every tensor), as f32; why not for any other.
fn decoded(view: &TensorView) -> std::result::Result<(Vec<usize>, Vec<f32>), String> {
    let data = view.data();
    let values = match view.dtype() {
        Dtype::F32 => each(data, f32::from_le_bytes),
        Dtype::F64 => each(data, |b| f64::from_le_bytes(b) as f32),
        Dtype::F16 => each(data, |b| half::f16::from_le_bytes(b).to_f32()),
        Dtype::BF16 => each(data, |b| half::bf16::from_le_bytes(b).to_f32()),
        other => return Err(format!("{other:?}; only floating-point tensors are read")),
    };
    Ok((view.shape().to_vec(), values))
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

    /// An export of ours is read by module path whether tagged or not (burn-store writes no
    /// tag); only an untagged file with PyTorch's batch-norm counters, or with batch-norm
    /// statistics beside PyTorch's names for its scales, is read as a state dict, through
    /// torchvision's names, which transpose `fc.weight`.
    #[test]
    fn exports_of_ours_are_read_by_module_path_tagged_or_not() {
        use crate::nets::ResNet18;
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, tagged: bool, norm: &str| {
            let mut tensors = vec![("fc.weight", vec![2usize, 3], vec![0f32, 1., 2., 3., 4., 5.])];
            let scale = if norm == "ours" {
                "bn1.gamma"
            } else {
                "bn1.weight"
            };
            if norm != "none" {
                tensors.push((scale, vec![1], vec![1.]));
                tensors.push(("bn1.running_mean", vec![1], vec![0.]));
            }
            if norm == "counted" {
                tensors.push(("bn1.num_batches_tracked", vec![1], vec![3.]));
            }
            let bytes: Vec<(&str, Vec<usize>, Vec<u8>)> = (tensors.iter())
                .map(|(name, shape, values)| {
                    let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
                    (*name, shape.clone(), bytes)
                })
                .collect();
            let views = bytes.iter().map(|(name, shape, bytes)| {
                (
                    *name,
                    TensorView::new(Dtype::F32, shape.clone(), bytes).unwrap(),
                )
            });
            let tag = tagged.then(|| [("format".into(), "burn-towers".into())].into());
            let path = dir.path().join(name);
            std::fs::write(&path, safetensors::serialize(views, tag).unwrap()).unwrap();
            path
        };
        let weight_shape = |path: &Path| {
            let mut source = open_safetensors::<ResNet18>(path).unwrap();
            source.tensor("fc.weight").unwrap().unwrap().shape
        };
        assert_eq!(weight_shape(&write("tagged", true, "counted")), [2, 3]);
        assert_eq!(weight_shape(&write("untagged", false, "none")), [2, 3]);
        assert_eq!(
            weight_shape(&write("untagged_norms", false, "ours")),
            [2, 3]
        );
        assert_eq!(weight_shape(&write("state_dict", false, "counted")), [3, 2]);
        assert_eq!(weight_shape(&write("floats_only", false, "torch")), [3, 2]);
    }
}
