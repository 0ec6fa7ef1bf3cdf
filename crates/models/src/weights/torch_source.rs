//! A PyTorch `.pth` state dict (torchvision's) seen through a model's parameter paths: the
//! model names each parameter's `state_dict` key and layout ([`TorchNamed`]), this reads the
//! file with the pickle reader burn-store uses (`pytorch-reader`) and converts. The state dict
//! may also sit inside a training checkpoint or under a wrapper's prefix
//! (`torch_state_dict.rs`).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use pytorch_reader::{DType, PytorchError, PytorchReader, Tensor};
use tempfile::NamedTempFile;

use super::byte_values::{decoded_limit, each};
use super::error::{Result, WeightsError};
use super::restore::{SourceTensor, WeightSource};
use super::torch_names::{TorchLayout, TorchNamed, TorchParameter};
use super::torch_state_dict::StateDictPlace;
use super::torch_zip_copy;

/// A `torch.save(model.state_dict())` file as a [`WeightSource`] for one model type; also a
/// training checkpoint holding one (`{"state_dict": ..., "optimizer": ...}`), the state dict
/// of a wrapped model (`module.`, `_orig_mod.`): see `torch_state_dict.rs` for where it is
/// looked for; and a state dict saved as safetensors (Hugging Face's and timm's
/// `model.safetensors`: [`open_safetensors`](super::open_safetensors)).
pub struct TorchSource {
    path: PathBuf,
    tensors: HashMap<String, StoredTensor>,
    names: fn(&str) -> Vec<TorchParameter>,
    companions: fn(&str) -> Vec<String>,
    /// Where the state dict sits in the file, once a parameter was found.
    place: StateDictPlace,
    accounted: BTreeSet<String>,
    /// The copy `tensors` are read from, for a zip the zip crate misreads
    /// (`torch_zip_copy.rs`): deleted with the source.
    _readable_copy: Option<NamedTempFile>,
}

/// A tensor of the file: read from it when asked for (`torch.save`'s files), or decoded
/// already (a safetensors file, read whole), or why it cannot be.
pub(crate) enum StoredTensor {
    Pickled(Tensor),
    Decoded(std::result::Result<(Vec<usize>, Vec<f32>), String>),
}

impl TorchSource {
    /// The state dict at `path` (tensors are read when asked for) for the parameters of `M`.
    pub fn open<M: TorchNamed>(path: &Path) -> Result<Self> {
        let not_torch = |e| WeightsError::format(path, "not a PyTorch state dict").caused_by(e);
        let (reader, readable_copy) = match PytorchReader::new(path) {
            Ok(reader) => (reader, None),
            // A zip the zip crate misreads (see `torch_zip_copy.rs`); where the copy fails
            // too, the file's own error is the one to show.
            Err(error @ PytorchError::Zip(_)) => {
                let copy = torch_zip_copy::readable_copy(path).map_err(|_| not_torch(error))?;
                let reader = PytorchReader::new(copy.path()).map_err(not_torch)?;
                (reader, Some(copy))
            }
            Err(error) => return Err(not_torch(error)),
        };
        let tensors = reader.into_tensors().into_iter();
        let tensors = tensors.map(|(key, tensor)| (key, StoredTensor::Pickled(tensor)));
        let mut source = Self::of_tensors::<M>(path, tensors.collect());
        source._readable_copy = readable_copy;
        Ok(source)
    }

    /// A state dict of `tensors`, from the file at `path`, for the parameters of `M`.
    pub(crate) fn of_tensors<M: TorchNamed>(
        path: &Path,
        tensors: HashMap<String, StoredTensor>,
    ) -> Self {
        Self {
            path: path.to_path_buf(),
            tensors,
            names: M::torch_parameters,
            companions: M::companions,
            place: StateDictPlace::default(),
            accounted: BTreeSet::new(),
            _readable_copy: None,
        }
    }

    /// [`TorchSource::read`] for the coverage-guided fuzz target (`fuzz/`), which reads every
    /// tensor of the file, named or not.
    #[doc(hidden)]
    pub fn read_key(&self, key: &str) -> Result<Option<(Vec<usize>, Vec<f32>)>> {
        self.read(key)
    }

    /// The values of tensor `key` as f32 and its shape; `None` when the file has none.
    fn read(&self, key: &str) -> Result<Option<(Vec<usize>, Vec<f32>)>> {
        let Some(tensor) = self.tensors.get(key) else {
            return Ok(None);
        };
        let bad = |reason: String| WeightsError::tensor(&self.path, key, reason);
        match tensor {
            StoredTensor::Pickled(tensor) => {
                // A view's values are gathered whole: a broadcast one (stride 0) of a few bytes
                // in the file may claim any size.
                let file_len = std::fs::metadata(&self.path).map_or(0, |m| m.len());
                let limit = decoded_limit(file_len);
                if tensor.byte_len() as u64 > limit {
                    return Err(bad(format!(
                        "{} bytes of values for a file of {file_len} bytes, more than the \
                         {limit} a weights file may hold (a view, such as a broadcast one, \
                         larger than its storage)",
                        tensor.byte_len()
                    )));
                }
                let bytes = (tensor.read()).map_err(|e| {
                    WeightsError::tensor(&self.path, key, "unreadable").caused_by(e)
                })?;
                let values = to_f32(tensor.dtype(), &bytes).map_err(bad)?;
                Ok(Some((tensor.shape().to_vec(), values)))
            }
            StoredTensor::Decoded(decoded) => decoded.clone().map(Some).map_err(bad),
        }
    }
}

impl WeightSource for TorchSource {
    fn path(&self) -> &Path {
        &self.path
    }

    fn tensor(&mut self, path: &str) -> Result<Option<SourceTensor>> {
        let candidates = (self.names)(path);
        let keys: Vec<&str> = candidates.iter().map(|c| c.key.as_str()).collect();
        let tensors = &self.tensors;
        let Some((prefix, held)) = self.place.find(&keys, |key| tensors.contains_key(key)) else {
            return Ok(None);
        };
        let TorchParameter { key: bare, layout } = candidates.into_iter().nth(held).expect("found");
        let in_file = |key: &str| format!("{prefix}{key}");
        let key = in_file(&bare);
        self.accounted.insert(key.clone());
        self.accounted
            .extend((self.companions)(&bare).iter().map(|c| in_file(c)));
        let Some((shape, values)) = self.read(&key)? else {
            return Ok(None);
        };
        let (shape, values) = match layout {
            TorchLayout::Same => (shape, values),
            TorchLayout::Transposed => transposed(shape, values),
            TorchLayout::ScaledBy(scale_key) => {
                let scale_key = in_file(&scale_key);
                let Some((_, scale)) = self.read(&scale_key)? else {
                    let reason = format!("its batch-norm scale `{scale_key}` is not in the file");
                    return Err(WeightsError::tensor(&self.path, key, reason));
                };
                let values = scaled(&shape, values, &scale)
                    .map_err(|reason| WeightsError::tensor(&self.path, &key, reason))?;
                (shape, values)
            }
        };
        Ok(Some(SourceTensor {
            name: key,
            shape,
            values,
        }))
    }

    fn note_when_nothing_fits(&self) -> Option<String> {
        Some(StateDictPlace::described())
    }

    fn unused(&self) -> Vec<String> {
        let mut unused: Vec<String> = self
            .tensors
            .keys()
            .filter(|key| self.place.covers(key) && !self.accounted.contains(*key))
            .cloned()
            .collect();
        unused.sort();
        unused
    }
}

/// A matrix `[rows, cols]` as `[cols, rows]`; any other shape unchanged, for
/// [`restore`](super::restore) to report the mismatch.
fn transposed(shape: Vec<usize>, values: Vec<f32>) -> (Vec<usize>, Vec<f32>) {
    let &[rows, cols] = shape.as_slice() else {
        return (shape, values);
    };
    let out = (0..rows * cols)
        .map(|n| values[(n % rows) * cols + n / rows])
        .collect();
    (vec![cols, rows], out)
}

/// `values` (of `shape`) with each slice along the first axis multiplied by its `scale`.
fn scaled(shape: &[usize], mut values: Vec<f32>, scale: &[f32]) -> Result<Vec<f32>, String> {
    if shape.first() != Some(&scale.len()) {
        return Err(format!(
            "shape {shape:?} does not match its batch-norm scale's {} channels",
            scale.len()
        ));
    }
    let per_channel = values.len() / scale.len().max(1);
    for (chunk, &s) in values.chunks_mut(per_channel.max(1)).zip(scale) {
        chunk.iter_mut().for_each(|v| *v *= s);
    }
    Ok(values)
}

/// Native-endian bytes of a floating-point tensor as f32.
fn to_f32(dtype: DType, bytes: &[u8]) -> Result<Vec<f32>, String> {
    let values = match dtype {
        DType::F32 => each(bytes, f32::from_ne_bytes),
        DType::F64 => each(bytes, |b| f64::from_ne_bytes(b) as f32),
        DType::F16 => each(bytes, |b| half::f16::from_ne_bytes(b).to_f32()),
        DType::BF16 => each(bytes, |b| half::bf16::from_ne_bytes(b).to_f32()),
        other => return Err(format!("{other:?}; only floating-point tensors are read")),
    };
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_linear_weight_is_transposed() {
        let (shape, values) = transposed(vec![2, 3], vec![1., 2., 3., 4., 5., 6.]);
        assert_eq!(shape, [3, 2]);
        assert_eq!(values, [1., 4., 2., 5., 3., 6.]);
    }

    #[test]
    fn each_output_channel_is_scaled_by_its_gamma() {
        let values = scaled(&[2, 1, 1, 2], vec![1., 2., 3., 4.], &[10., -1.]).unwrap();
        assert_eq!(values, [10., 20., -3., -4.]);
        assert!(scaled(&[3], vec![1., 2., 3.], &[1., 2.]).is_err());
    }

    #[test]
    fn half_precision_reads_as_f32() {
        let bytes: Vec<u8> = [1.5f32, -2.0]
            .iter()
            .flat_map(|&v| half::f16::from_f32(v).to_ne_bytes())
            .collect();
        assert_eq!(to_f32(DType::F16, &bytes).unwrap(), [1.5, -2.0]);
        assert!(to_f32(DType::I64, &[0; 8]).is_err());
    }
}
