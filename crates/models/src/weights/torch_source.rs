//! A PyTorch `.pth` state dict (torchvision's) seen through a model's parameter paths: the
//! model names each parameter's `state_dict` key and layout ([`TorchNamed`]), this reads the
//! file with the pickle reader burn-store uses (`pytorch-reader`) and converts.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use pytorch_reader::{DType, PytorchReader, Tensor};

use super::error::{Result, WeightsError};
use super::restore::{SourceTensor, WeightSource};
use super::torch_names::{TorchLayout, TorchNamed, TorchParameter, first_held};

/// A `torch.save(model.state_dict())` file as a [`WeightSource`] for one model type.
pub struct TorchSource {
    path: PathBuf,
    tensors: HashMap<String, Tensor>,
    names: fn(&str) -> Vec<TorchParameter>,
    companions: fn(&str) -> Vec<String>,
    accounted: BTreeSet<String>,
}

impl TorchSource {
    /// The state dict at `path` (tensors are read when asked for) for the parameters of `M`.
    pub fn open<M: TorchNamed>(path: &Path) -> Result<Self> {
        let reader = PytorchReader::new(path)
            .map_err(|e| WeightsError::format(path, "not a PyTorch state dict").caused_by(e))?;
        Ok(Self {
            path: path.to_path_buf(),
            tensors: reader.into_tensors(),
            names: M::torch_parameters,
            companions: M::companions,
            accounted: BTreeSet::new(),
        })
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
        let bytes = (tensor.read())
            .map_err(|e| WeightsError::tensor(&self.path, key, "unreadable").caused_by(e))?;
        let values = to_f32(tensor.dtype(), &bytes).map_err(bad)?;
        Ok(Some((tensor.shape().to_vec(), values)))
    }
}

impl WeightSource for TorchSource {
    fn path(&self) -> &Path {
        &self.path
    }

    fn tensor(&mut self, path: &str) -> Result<Option<SourceTensor>> {
        let holds = |key: &str| self.tensors.contains_key(key);
        let Some(TorchParameter { key, layout }) = first_held((self.names)(path), holds) else {
            return Ok(None);
        };
        self.accounted.insert(key.clone());
        self.accounted.extend((self.companions)(&key));
        let Some((shape, values)) = self.read(&key)? else {
            return Ok(None);
        };
        let (shape, values) = match layout {
            TorchLayout::Same => (shape, values),
            TorchLayout::Transposed => transposed(shape, values),
            TorchLayout::ScaledBy(scale_key) => {
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

    fn unused(&self) -> Vec<String> {
        let mut unused: Vec<String> = self
            .tensors
            .keys()
            .filter(|key| !self.accounted.contains(*key))
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
        DType::F32 => bytes
            .chunks_exact(4)
            .map(|b| f32::from_ne_bytes(b.try_into().expect("4 bytes")))
            .collect(),
        DType::F64 => bytes
            .chunks_exact(8)
            .map(|b| f64::from_ne_bytes(b.try_into().expect("8 bytes")) as f32)
            .collect(),
        DType::F16 => bytes
            .chunks_exact(2)
            .map(|b| half::f16::from_ne_bytes([b[0], b[1]]).to_f32())
            .collect(),
        DType::BF16 => bytes
            .chunks_exact(2)
            .map(|b| half::bf16::from_ne_bytes([b[0], b[1]]).to_f32())
            .collect(),
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
