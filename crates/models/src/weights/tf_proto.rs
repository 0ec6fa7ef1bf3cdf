//! The protos of a TF checkpoint's index (`tensor_bundle.proto`, with the parts of
//! `tensor_shape.proto`, `versions.proto` and `types.proto` it uses), declared with prost's
//! derive so no `protoc` is needed at build time.

/// `tensorflow.BundleHeaderProto`: the value of the empty key.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct BundleHeader {
    /// Number of `.data-SSSSS-of-NNNNN` shards.
    #[prost(int32, tag = "1")]
    pub num_shards: i32,
    /// 0 little-endian, 1 big-endian.
    #[prost(int32, tag = "2")]
    pub endianness: i32,
    /// The writer's format version.
    #[prost(message, optional, tag = "3")]
    pub version: Option<VersionDef>,
}

/// `tensorflow.VersionDef`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct VersionDef {
    /// The writer's version.
    #[prost(int32, tag = "1")]
    pub producer: i32,
    /// The oldest reader that can read it.
    #[prost(int32, tag = "2")]
    pub min_consumer: i32,
}

/// `tensorflow.BundleEntryProto`: where one tensor lies and what it is.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct BundleEntry {
    /// `tensorflow.DataType`.
    #[prost(int32, tag = "1")]
    pub dtype: i32,
    /// The tensor's shape.
    #[prost(message, optional, tag = "2")]
    pub shape: Option<TensorShape>,
    /// Which data shard holds it.
    #[prost(int32, tag = "3")]
    pub shard_id: i32,
    /// Byte offset in the shard.
    #[prost(int64, tag = "4")]
    pub offset: i64,
    /// Byte length in the shard.
    #[prost(int64, tag = "5")]
    pub size: i64,
    /// Masked CRC32C of those bytes.
    #[prost(fixed32, tag = "6")]
    pub crc32c: u32,
    /// A partitioned variable's slices, each an entry of its own (`tensor_slices.rs`).
    #[prost(message, repeated, tag = "7")]
    pub slices: Vec<TensorSlice>,
}

/// `tensorflow.TensorShapeProto`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct TensorShape {
    /// The dimensions, outermost first.
    #[prost(message, repeated, tag = "2")]
    pub dim: Vec<Dim>,
    /// Set when the rank is unknown.
    #[prost(bool, tag = "3")]
    pub unknown_rank: bool,
}

/// `tensorflow.TensorShapeProto.Dim`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Dim {
    /// The size (-1 when unknown).
    #[prost(int64, tag = "1")]
    pub size: i64,
}

/// `tensorflow.SavedTensorSlices`: each value of a V1 checkpoint's table (`saved_tensor_slice
/// .proto`). The empty key holds the `meta`, every other key one slice's `data`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct SavedTensorSlices {
    /// The tensors of the checkpoint (the empty key's value only).
    #[prost(message, optional, tag = "1")]
    pub meta: Option<SavedTensorSliceMeta>,
    /// One slice of one tensor, with its values.
    #[prost(message, optional, tag = "2")]
    pub data: Option<SavedSlice>,
}

/// `tensorflow.SavedTensorSliceMeta`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct SavedTensorSliceMeta {
    /// Each tensor's name, shape, type and slices.
    #[prost(message, repeated, tag = "1")]
    pub tensor: Vec<SavedSliceMeta>,
}

/// `tensorflow.SavedSliceMeta`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct SavedSliceMeta {
    /// The tensor's name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Its whole shape.
    #[prost(message, optional, tag = "2")]
    pub shape: Option<TensorShape>,
    /// `tensorflow.DataType`.
    #[prost(int32, tag = "3")]
    pub r#type: i32,
    /// The slices saved of it: one whole one, unless it was partitioned.
    #[prost(message, repeated, tag = "4")]
    pub slice: Vec<TensorSlice>,
}

/// `tensorflow.TensorSliceProto`: per dimension, a start and a length (none: all of it).
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct TensorSlice {
    /// The extent in each dimension; none at all is the whole tensor too.
    #[prost(message, repeated, tag = "1")]
    pub extent: Vec<Extent>,
}

/// `tensorflow.TensorSliceProto.Extent`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Extent {
    /// The first index.
    #[prost(int64, tag = "1")]
    pub start: i64,
    /// How many; absent for the whole dimension.
    #[prost(int64, optional, tag = "2")]
    pub length: Option<i64>,
}

/// `tensorflow.SavedSlice`: one slice's values.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct SavedSlice {
    /// The tensor's name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Which slice of it.
    #[prost(message, optional, tag = "2")]
    pub slice: Option<TensorSlice>,
    /// The values.
    #[prost(message, optional, tag = "3")]
    pub data: Option<TensorProto>,
}

/// `tensorflow.TensorProto`, the fields a V1 checkpoint's values come in: the typed lists TF's
/// V1 saver writes (`saved_tensor_slice_util.h`), or raw little-endian bytes.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct TensorProto {
    /// `tensorflow.DataType`.
    #[prost(int32, tag = "1")]
    pub dtype: i32,
    /// The values as raw little-endian bytes, when not in a list below.
    #[prost(bytes = "vec", tag = "4")]
    pub tensor_content: Vec<u8>,
    /// `DT_FLOAT`.
    #[prost(float, repeated, tag = "5")]
    pub float_val: Vec<f32>,
    /// `DT_DOUBLE`.
    #[prost(double, repeated, tag = "6")]
    pub double_val: Vec<f64>,
    /// `DT_INT32`, `DT_INT16`, `DT_INT8`, `DT_UINT16`, `DT_UINT8`.
    #[prost(int32, repeated, tag = "7")]
    pub int_val: Vec<i32>,
    /// `DT_STRING`.
    #[prost(bytes = "vec", repeated, tag = "8")]
    pub string_val: Vec<Vec<u8>>,
    /// `DT_INT64`.
    #[prost(int64, repeated, tag = "10")]
    pub int64_val: Vec<i64>,
    /// `DT_BOOL`.
    #[prost(bool, repeated, tag = "11")]
    pub bool_val: Vec<bool>,
    /// `DT_HALF` and `DT_BFLOAT16`: each value's 16 bits.
    #[prost(int32, repeated, tag = "13")]
    pub half_val: Vec<i32>,
    /// `DT_UINT32`.
    #[prost(uint32, repeated, tag = "16")]
    pub uint32_val: Vec<u32>,
    /// `DT_UINT64`.
    #[prost(uint64, repeated, tag = "17")]
    pub uint64_val: Vec<u64>,
}

/// `tensorflow.TrackableObjectGraph`: the objects a TF2 object-based checkpoint saved
/// (`trackable_object_graph.proto`), the value of its `_CHECKPOINTABLE_OBJECT_GRAPH` tensor.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct TrackableObjectGraph {
    /// Every object, the root first.
    #[prost(message, repeated, tag = "1")]
    pub nodes: Vec<TrackableObject>,
}

/// `tensorflow.TrackableObjectGraph.TrackableObject`, the part read here: its tensors.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct TrackableObject {
    /// The tensors saved of it (a variable: its value).
    #[prost(message, repeated, tag = "2")]
    pub attributes: Vec<SerializedTensor>,
}

/// `tensorflow.TrackableObjectGraph.TrackableObject.SerializedTensor`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct SerializedTensor {
    /// What the tensor is to its object (`VARIABLE_VALUE` for a variable's value).
    #[prost(string, tag = "1")]
    pub name: String,
    /// The variable's own name, as it was created (`conv2d/kernel`); may be empty.
    #[prost(string, tag = "2")]
    pub full_name: String,
    /// Its key in the checkpoint (`model/_operations/1/_kernel/.ATTRIBUTES/VARIABLE_VALUE`).
    #[prost(string, tag = "3")]
    pub checkpoint_key: String,
}
