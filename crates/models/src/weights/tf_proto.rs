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
    /// Present for partitioned variables (unsupported here).
    #[prost(bytes = "vec", repeated, tag = "7")]
    pub slices: Vec<Vec<u8>>,
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
