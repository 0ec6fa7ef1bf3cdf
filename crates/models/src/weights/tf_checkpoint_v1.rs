//! A reader of TensorFlow's V1 checkpoints (`tf.train.Saver(write_version=V1)`, the default
//! before TF 0.12): one file, a table like a V2 index (`table.rs`) whose empty key holds the
//! tensors' names, shapes and types, and whose other keys hold each tensor's values inline, as
//! a `TensorProto` (`saved_tensor_slice.proto`). TF-slim's published ImageNet checkpoints
//! (`inception_v3_2016_08_28.tar.gz`'s `inception_v3.ckpt`) are V1 files.
//!
//! The whole file is read (its blocks' CRC32C checked by the table reader), so memory is that
//! of the file; each tensor's `TensorProto` is decoded when it is read. A partitioned variable
//! (several slices) is read whole, as TF restores it (`tensor_slices.rs`).

use std::collections::BTreeMap;
use std::path::Path;

use prost::Message;

use super::error::{Result, WeightsError};
use super::table::read_table;
use super::tensor_slices::{SliceBox, assemble};
use super::tf_checkpoint::{TensorInfo, TfDType, TfValues, decode, element_count};
use super::tf_proto::{SavedSliceMeta, SavedTensorSlices, TensorProto};

/// The tensors of a V1 checkpoint file, each with its values still encoded.
#[derive(Debug)]
pub(super) struct SlicesFile {
    tensors: BTreeMap<String, V1Tensor>,
}

#[derive(Debug)]
struct V1Tensor {
    info: TensorInfo,
    /// The slices the tensor list names (one whole one, unless the variable was partitioned),
    /// each with its `TensorProto` once found.
    parts: Vec<(SliceBox, Option<Vec<u8>>)>,
}

impl SlicesFile {
    /// Reads the V1 checkpoint `path`: its table, the tensors its meta lists, and their
    /// slices. A slice of a tensor the meta does not list, or that it does not list of the
    /// tensor, is an error naming it.
    pub(super) fn open(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(WeightsError::io(path))?;
        let mut meta = None;
        let mut slices = Vec::new();
        for (key, value) in read_table(path, &bytes)? {
            let saved = SavedTensorSlices::decode(value.as_slice()).map_err(|e| {
                let key = String::from_utf8_lossy(&key).into_owned();
                WeightsError::format(path, format!("unreadable entry {key:?}")).caused_by(e)
            })?;
            match key.is_empty() {
                true => meta = saved.meta,
                false => slices.extend(saved.data),
            }
        }
        let meta = meta.ok_or_else(|| {
            WeightsError::format(path, "no tensor list (the empty key): not a V1 checkpoint")
        })?;
        let mut tensors = BTreeMap::new();
        for tensor in meta.tensor {
            let (name, tensor) = V1Tensor::listed(path, tensor)?;
            tensors.insert(name, tensor);
        }
        for slice in slices {
            let bad = |reason: String| WeightsError::tensor(path, &slice.name, reason);
            let tensor = tensors
                .get_mut(&slice.name)
                .ok_or_else(|| bad("not listed".into()))?;
            let saved =
                SliceBox::of(&slice.slice.unwrap_or_default(), &tensor.info.shape).map_err(bad)?;
            let (_, values) = (tensor.parts.iter_mut())
                .find(|(listed, _)| *listed == saved)
                .ok_or_else(|| bad(format!("a slice {saved} the tensor list does not name")))?;
            let data = slice
                .data
                .ok_or_else(|| bad(format!("slice {saved} without values")))?;
            *values = Some(data.encode_to_vec());
        }
        Ok(Self { tensors })
    }

    /// Every tensor name and its type and shape, in name order.
    pub(super) fn tensors(&self) -> impl Iterator<Item = (&str, &TensorInfo)> {
        (self.tensors.iter()).map(|(name, tensor)| (name.as_str(), &tensor.info))
    }

    /// The type and shape of `name`, if the checkpoint has it.
    pub(super) fn info(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.get(name).map(|tensor| &tensor.info)
    }

    /// The values of `name` (of `path`), checked against its type and shape.
    pub(super) fn read(&self, path: &Path, name: &str) -> Result<TfValues> {
        let bad = |reason: String| WeightsError::tensor(path, name, reason);
        let tensor = (self.tensors.get(name)).ok_or_else(|| bad("not in the checkpoint".into()))?;
        if tensor.parts.is_empty() {
            return Err(bad(
                "listed without a slice: its values are not in the file".into(),
            ));
        }
        let mut parts = Vec::with_capacity(tensor.parts.len());
        for (slice, encoded) in &tensor.parts {
            let encoded = encoded.as_ref().ok_or_else(|| {
                bad(format!(
                    "slice {slice} is listed, but its values are not in the file"
                ))
            })?;
            let proto = TensorProto::decode(encoded.as_slice()).map_err(|e| {
                WeightsError::tensor(path, name, format!("slice {slice}: unreadable values"))
                    .caused_by(e)
            })?;
            let info = TensorInfo {
                dtype: tensor.info.dtype,
                shape: slice.shape(),
            };
            let values =
                values(&info, proto).map_err(|reason| bad(format!("slice {slice}: {reason}")))?;
            parts.push((slice.clone(), values));
        }
        assemble(&tensor.info.shape, parts).map_err(bad)
    }
}

impl V1Tensor {
    /// A tensor as the meta lists it, with its slices: its values come with them.
    fn listed(path: &Path, tensor: SavedSliceMeta) -> Result<(String, Self)> {
        let bad = |reason: &str| WeightsError::tensor(path, &tensor.name, reason);
        let shape = tensor.shape.unwrap_or_default();
        if shape.unknown_rank {
            return Err(bad("unknown rank"));
        }
        let shape = (shape.dim.iter())
            .map(|d| usize::try_from(d.size).map_err(|_| bad("a negative dimension")))
            .collect::<Result<Vec<_>>>()?;
        let parts = (tensor.slice.iter())
            .map(|slice| Ok((SliceBox::of(slice, &shape).map_err(|r| bad(&r))?, None)))
            .collect::<Result<_>>()?;
        let info = TensorInfo {
            dtype: TfDType::from_proto(tensor.r#type),
            shape,
        };
        Ok((tensor.name, Self { info, parts }))
    }
}

/// The values of `proto` for a tensor of `info`: as many as its shape holds, in the list TF's
/// V1 saver writes for its type, or as raw bytes.
fn values(info: &TensorInfo, proto: TensorProto) -> Result<TfValues, String> {
    // TF's V1 saver leaves the values' own type unset (0): the tensor list's is the type.
    if proto.dtype != 0 && TfDType::from_proto(proto.dtype) != info.dtype {
        return Err(format!(
            "values of DataType {}, where the tensor list says {:?}",
            proto.dtype, info.dtype
        ));
    }
    let count = element_count(&info.shape).ok_or("a shape too large to hold")?;
    if !proto.tensor_content.is_empty() {
        let element = info
            .dtype
            .size()
            .ok_or("raw bytes of a type without a fixed size")?;
        if Some(proto.tensor_content.len() as u64) != count.checked_mul(element as u64) {
            return Err(format!(
                "{} bytes for a {:?} tensor of shape {:?}",
                proto.tensor_content.len(),
                info.dtype,
                info.shape
            ));
        }
        return decode(info, &proto.tensor_content);
    }
    let values = match info.dtype {
        TfDType::Float => TfValues::Float(proto.float_val),
        TfDType::Double => TfValues::Float(proto.double_val.iter().map(|&v| v as f32).collect()),
        TfDType::Half => TfValues::Float(halves(&proto.half_val, half::f16::from_bits)),
        TfDType::BFloat16 => TfValues::Float(halves(&proto.half_val, half::bf16::from_bits)),
        TfDType::Int {
            bytes: 8,
            signed: true,
        } => TfValues::Int(proto.int64_val),
        TfDType::Int {
            bytes: 8,
            signed: false,
        } => TfValues::Int(proto.uint64_val.iter().map(|&v| v as i64).collect()),
        TfDType::Int {
            bytes: 4,
            signed: false,
        } => TfValues::Int(proto.uint32_val.iter().map(|&v| i64::from(v)).collect()),
        TfDType::Int { .. } => TfValues::Int(proto.int_val.iter().map(|&v| i64::from(v)).collect()),
        TfDType::Bool => TfValues::Bool(proto.bool_val),
        TfDType::String => TfValues::String(proto.string_val),
        TfDType::Other(dtype) => return Err(format!("DataType {dtype} is not supported")),
    };
    let held = match &values {
        TfValues::Float(v) => v.len(),
        TfValues::Int(v) => v.len(),
        TfValues::Bool(v) => v.len(),
        TfValues::String(v) => v.len(),
    };
    match held as u64 == count {
        true => Ok(values),
        false => Err(format!(
            "{held} values for a {:?} tensor of shape {:?}",
            info.dtype, info.shape
        )),
    }
}

/// 16-bit values, each held in the low bits of an `i32`, as f32.
fn halves<T: Into<f32>>(bits: &[i32], from_bits: fn(u16) -> T) -> Vec<f32> {
    bits.iter().map(|&b| from_bits(b as u16).into()).collect()
}
