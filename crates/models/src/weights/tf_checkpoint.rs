//! A reader of TensorFlow's checkpoints. V2 (the "tensor bundle" of `tf.train.Saver`, TF 1.x
//! and 2.x): `PREFIX.index`, a sorted table of `BundleEntryProto`s keyed by tensor name (the
//! empty key holds the `BundleHeaderProto`), and `PREFIX.data-SSSSS-of-NNNNN`, the tensors'
//! bytes. V1 (one file, TF before 0.12 and TF-slim's published checkpoints):
//! `tf_checkpoint_v1.rs`. Independent of any model: names, dtypes, shapes and values; a
//! partitioned variable read whole, as TF restores it (`tensor_slices.rs`); a TF2 object-based
//! checkpoint's variables by their own names (`tf_object_names.rs`); a SavedModel's
//! `variables/`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use prost::Message;
use prost::encoding::decode_varint;

use super::byte_values::each;
use super::error::{Result, WeightsError};
use super::table::{self, mask_crc, read_table};
use super::tensor_slices::{SliceBox, assemble, slice_key};
use super::tf_checkpoint_v1::SlicesFile;
use super::tf_object_names::{OBJECT_GRAPH_KEY, variable_names};
use super::tf_proto::{BundleEntry, BundleHeader, TensorSlice};

/// A tensor's element type, as `tensorflow.DataType` numbers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TfDType {
    /// `DT_FLOAT`.
    Float,
    /// `DT_DOUBLE`, read as f32.
    Double,
    /// `DT_HALF`, read as f32.
    Half,
    /// `DT_BFLOAT16`, read as f32.
    BFloat16,
    /// `DT_INT8`, `DT_INT16`, `DT_INT32`, `DT_INT64` and the unsigned ones, read as i64:
    /// the element size in bytes and signedness.
    Int {
        /// Bytes per element: 1, 2, 4 or 8.
        bytes: usize,
        /// Whether the type is signed (`DT_INT*`) or unsigned (`DT_UINT*`).
        signed: bool,
    },
    /// `DT_BOOL`.
    Bool,
    /// `DT_STRING`.
    String,
    /// Anything else (complex, resource, variant, quantized): listed, not readable.
    Other(i32),
}

impl TfDType {
    pub(super) fn from_proto(dtype: i32) -> Self {
        let int = |bytes, signed| Self::Int { bytes, signed };
        match dtype {
            1 => Self::Float,
            2 => Self::Double,
            3 => int(4, true),
            4 => int(1, false),
            5 => int(2, true),
            6 => int(1, true),
            7 => Self::String,
            9 => int(8, true),
            10 => Self::Bool,
            14 => Self::BFloat16,
            17 => int(2, false),
            19 => Self::Half,
            22 => int(4, false),
            23 => int(8, false),
            other => Self::Other(other),
        }
    }

    /// Bytes per element; `None` for strings and unreadable types.
    pub(super) fn size(self) -> Option<usize> {
        match self {
            Self::Float => Some(4),
            Self::Double => Some(8),
            Self::Half | Self::BFloat16 => Some(2),
            Self::Int { bytes, .. } => Some(bytes),
            Self::Bool => Some(1),
            Self::String | Self::Other(_) => None,
        }
    }
}

/// A tensor's type and shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// Element type.
    pub dtype: TfDType,
    /// Dimensions, outermost first (`[]` for a scalar).
    pub shape: Vec<usize>,
}

/// A tensor's values, converted: floating types to f32, integers to i64.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TfValues {
    /// f32, f64, f16 or bf16 values.
    Float(Vec<f32>),
    /// Integer values of any width (`global_step` is an int64).
    Int(Vec<i64>),
    /// Booleans.
    Bool(Vec<bool>),
    /// Byte strings.
    String(Vec<Vec<u8>>),
}

/// An open checkpoint: a V2 one's index read and checked and its data shards found, or a V1
/// file read.
#[derive(Debug)]
pub struct TfCheckpoint {
    /// The V2 prefix, or the V1 file.
    prefix: PathBuf,
    format: Format,
    /// A TF2 object-based checkpoint's tensors by the names they are listed by: a variable's
    /// own name where it has one, else the tensor's key; `None` for a checkpoint keyed by
    /// names already.
    object_names: Option<BTreeMap<String, String>>,
}

#[derive(Debug)]
enum Format {
    V2 {
        /// The path of each data shard a tensor lives in, by shard number.
        shards: BTreeMap<usize, PathBuf>,
        tensors: BTreeMap<String, Entry>,
    },
    V1(SlicesFile),
}

/// What a path given for a checkpoint stands for.
enum Resolved {
    /// A V2 checkpoint's prefix.
    Prefix(PathBuf),
    /// A V1 checkpoint's file.
    V1File(PathBuf),
}

#[derive(Debug)]
struct Entry {
    info: TensorInfo,
    shard: usize,
    offset: u64,
    size: u64,
    crc: u32,
    /// A partitioned variable's slices, each with the entry of its bytes (its own bytes are
    /// none); empty for any other tensor.
    slices: Vec<(SliceBox, Entry)>,
}

impl TfCheckpoint {
    /// Opens the checkpoint at `path`: a V2 prefix (`model.ckpt-1000`), its `.index`, a data
    /// shard or its `.meta`; a V1 file (or its `.meta`); a directory whose `checkpoint`
    /// state file names the newest of them; or a SavedModel (its folder or `saved_model.pb`),
    /// whose `variables/` are an object-based checkpoint.
    pub fn open(path: &Path) -> Result<Self> {
        match resolve(path)? {
            Resolved::Prefix(prefix) => Self::open_v2(prefix),
            Resolved::V1File(file) => Ok(Self {
                format: Format::V1(SlicesFile::open(&file)?),
                prefix: file,
                object_names: None,
            }),
        }
    }

    fn open_v2(prefix: PathBuf) -> Result<Self> {
        let index = suffixed(&prefix, ".index");
        let bytes = std::fs::read(&index).map_err(WeightsError::io(&index))?;
        let mut header = None;
        let mut entries = BTreeMap::new();
        for (key, value) in read_table(&index, &bytes)? {
            if key.is_empty() {
                header = Some(BundleHeader::decode(value.as_slice()).map_err(|e| {
                    WeightsError::format(&index, "unreadable bundle header").caused_by(e)
                })?);
                continue;
            }
            let entry = BundleEntry::decode(value.as_slice()).map_err(|e| {
                let name = String::from_utf8_lossy(&key);
                WeightsError::tensor(&index, name.as_ref(), "unreadable entry").caused_by(e)
            })?;
            entries.insert(key, entry);
        }
        let entries = tensor_entries(&index, entries)?;
        let header = header.ok_or_else(|| {
            WeightsError::format(
                &index,
                "no bundle header: not a TensorFlow V2 checkpoint index",
            )
        })?;
        if header.endianness != 0 {
            return Err(WeightsError::format(
                &index,
                "big-endian checkpoints are not supported",
            ));
        }
        let shards = find_shards(&prefix, header.num_shards, &entries)?;
        let mut checkpoint = Self {
            prefix,
            format: Format::V2 {
                shards,
                tensors: entries,
            },
            object_names: None,
        };
        checkpoint.object_names = checkpoint.object_names()?;
        Ok(checkpoint)
    }

    /// Every tensor by the name it is listed by, when this is a TF2 object-based checkpoint
    /// (it holds an object graph): see `tf_object_names.rs`.
    fn object_names(&self) -> Result<Option<BTreeMap<String, String>>> {
        let Format::V2 { tensors, .. } = &self.format else {
            return Ok(None);
        };
        if !tensors.contains_key(OBJECT_GRAPH_KEY) {
            return Ok(None);
        }
        let TfValues::String(graph) = self.read(OBJECT_GRAPH_KEY)? else {
            let reason = "not a string tensor: not an object graph";
            return Err(WeightsError::tensor(self.index(), OBJECT_GRAPH_KEY, reason));
        };
        let graph = graph.first().map_or(&[][..], Vec::as_slice);
        // A tensor's value as the index describes it; a partitioned variable's is its own.
        let fingerprint = |key: &str| {
            let entry = tensors.get(key)?;
            Some(match entry.slices.is_empty() {
                true => format!("{:?} {} {}", entry.info, entry.size, entry.crc),
                false => key.to_string(),
            })
        };
        let named = variable_names(graph, fingerprint).map_err(|e| {
            WeightsError::tensor(self.index(), OBJECT_GRAPH_KEY, "not an object graph").caused_by(e)
        })?;
        let renamed: BTreeSet<&String> = named.values().flatten().collect();
        let unnamed = (tensors.keys())
            .filter(|key| !renamed.contains(key))
            .map(|key| (key.clone(), key.clone()));
        let mut listing: BTreeMap<String, String> = unnamed.collect();
        listing.extend(
            named
                .into_iter()
                .map(|(name, keys)| (name, keys[0].clone())),
        );
        Ok(Some(listing))
    }

    /// Whether `path` (anything [`open`](Self::open) takes) is a TF2 object-based checkpoint
    /// or SavedModel ([`is_object_based`](Self::is_object_based)): only a V2 checkpoint's index
    /// and object graph are read (a V1 file, read whole when opened, is never one).
    pub fn is_object_based_at(path: &Path) -> bool {
        match resolve(path) {
            Ok(Resolved::Prefix(prefix)) => {
                Self::open_v2(prefix).is_ok_and(|c| c.is_object_based())
            }
            _ => false,
        }
    }

    /// Whether this is a TF2 object-based checkpoint (`tf.train.Checkpoint`, a SavedModel's
    /// variables), whose variables are listed by their own names: those of the object graph
    /// it holds, not its keys (paths through Python objects).
    pub fn is_object_based(&self) -> bool {
        self.object_names.is_some()
    }

    /// The key in the file of the tensor listed as `name` (itself but in an object-based
    /// checkpoint).
    fn key<'a>(&'a self, name: &'a str) -> &'a str {
        let renamed = self.object_names.as_ref().and_then(|names| names.get(name));
        renamed.map_or(name, String::as_str)
    }

    /// The checkpoint's prefix (a V1 checkpoint's file).
    pub fn prefix(&self) -> &Path {
        &self.prefix
    }

    /// Every tensor name and its type and shape, in name order.
    /// (An object-based checkpoint's variables by their own names: see
    /// [`is_object_based`](Self::is_object_based).)
    pub fn tensors(&self) -> Box<dyn Iterator<Item = (&str, &TensorInfo)> + '_> {
        if let (Some(names), Format::V2 { tensors, .. }) = (&self.object_names, &self.format) {
            return Box::new((names.iter()).map(|(name, key)| (name.as_str(), &tensors[key].info)));
        }
        match &self.format {
            Format::V2 { tensors, .. } => {
                Box::new(tensors.iter().map(|(name, e)| (name.as_str(), &e.info)))
            }
            Format::V1(file) => Box::new(file.tensors()),
        }
    }

    /// The type and shape of `name`, if the checkpoint has it.
    pub fn info(&self, name: &str) -> Option<&TensorInfo> {
        let name = self.key(name);
        match &self.format {
            Format::V2 { tensors, .. } => tensors.get(name).map(|e| &e.info),
            Format::V1(file) => file.info(name),
        }
    }

    /// The values of `name`, after checking their size and checksum.
    pub fn read(&self, name: &str) -> Result<TfValues> {
        let (shards, tensors) = match &self.format {
            Format::V2 { shards, tensors } => (shards, tensors),
            Format::V1(file) => return file.read(&self.prefix, name),
        };
        let entry = tensors
            .get(self.key(name))
            .ok_or_else(|| WeightsError::tensor(self.index(), name, "not in the checkpoint"))?;
        if entry.slices.is_empty() {
            return read_stored(shards, name, entry);
        }
        let parts = (entry.stored(name).into_iter().zip(&entry.slices))
            .map(|((label, part), (slice, _))| {
                Ok((slice.clone(), read_stored(shards, &label, part)?))
            })
            .collect::<Result<_>>()?;
        assemble(&entry.info.shape, parts)
            .map_err(|reason| WeightsError::tensor(self.index(), name, reason))
    }

    /// The values of the floating-point tensor `name` as f32.
    pub fn read_f32(&self, name: &str) -> Result<Vec<f32>> {
        match self.read(name)? {
            TfValues::Float(values) => Ok(values),
            _ => Err(WeightsError::tensor(
                self.index(),
                name,
                format!(
                    "a {:?} tensor, not a floating-point one",
                    self.info(name).map(|info| info.dtype)
                ),
            )),
        }
    }

    /// The file that lists the tensors: a V2 checkpoint's index (`PREFIX.index`), a V1
    /// checkpoint's file (its prefix): the file errors about the checkpoint name.
    pub fn index(&self) -> PathBuf {
        match self.format {
            Format::V2 { .. } => suffixed(&self.prefix, ".index"),
            Format::V1(_) => self.prefix.clone(),
        }
    }
}

/// The values of `entry` (a tensor's, or a partitioned variable's slice, `label` in errors),
/// after checking their size and checksum.
fn read_stored(shards: &BTreeMap<usize, PathBuf>, label: &str, entry: &Entry) -> Result<TfValues> {
    let shard = &shards[&entry.shard];
    let bad = |reason: String| WeightsError::tensor(shard, label, reason);
    // Inside the shard: checked at `open` (`find_shards`), against the shard's size then.
    let len = usize::try_from(entry.size).map_err(|_| bad("too large to read".into()))?;
    let mut bytes = vec![0u8; len];
    let mut file = File::open(shard).map_err(WeightsError::io(shard))?;
    file.seek(SeekFrom::Start(entry.offset))
        .and_then(|_| file.read_exact(&mut bytes))
        .map_err(WeightsError::io(shard))?;
    // The checksum before the values: a string tensor's values take up to 32 bytes per
    // byte read, and only bytes TF wrote should cost that.
    let crc = match entry.info.dtype {
        TfDType::String => string_crc(&string_layout(&entry.info, &bytes).map_err(bad)?),
        _ => crc32c::crc32c(&bytes),
    };
    if mask_crc(crc) != entry.crc {
        return Err(bad("bad checksum: the data shard is corrupt".into()));
    }
    let values = decode(&entry.info, &bytes).map_err(bad)?;
    Ok(values)
}

impl Entry {
    fn new(index: &Path, name: &str, entry: BundleEntry) -> Result<Self> {
        let bad = |reason: &str| WeightsError::tensor(index, name, reason);
        let shape = entry.shape.unwrap_or_default();
        if shape.unknown_rank {
            return Err(bad("unknown rank"));
        }
        let shape = shape
            .dim
            .iter()
            .map(|d| usize::try_from(d.size).map_err(|_| bad("a negative dimension")))
            .collect::<Result<Vec<_>>>()?;
        let (Ok(shard), Ok(offset), Ok(size)) = (
            usize::try_from(entry.shard_id),
            u64::try_from(entry.offset),
            u64::try_from(entry.size),
        ) else {
            return Err(bad("a negative shard, offset or size"));
        };
        let info = TensorInfo {
            dtype: TfDType::from_proto(entry.dtype),
            shape,
        };
        let sliced = !entry.slices.is_empty();
        if info.dtype == TfDType::String && !sliced {
            // Each string's length takes at least one byte: a shape claiming more strings
            // than bytes is corrupt, and would cost memory per string claimed.
            let strings = element_count(&info.shape);
            if strings.is_none_or(|n| n > size) {
                return Err(bad(&format!(
                    "{size} bytes for a string tensor of shape {:?}: fewer than one byte per \
                     string",
                    info.shape
                )));
            }
        }
        if let Some(element) = info.dtype.size() {
            let expected = info
                .shape
                .iter()
                .try_fold(element as u64, |n, &d| n.checked_mul(d as u64));
            if expected != Some(size) && !sliced {
                return Err(bad(&format!(
                    "{size} bytes for a {:?} tensor of shape {:?}",
                    info.dtype, info.shape
                )));
            }
        }
        Ok(Self {
            info,
            shard,
            offset,
            size,
            crc: entry.crc32c,
            slices: Vec::new(),
        })
    }

    /// Where its bytes lie: itself, or a partitioned variable's slices, each with the name
    /// errors give it (`name (slice 0,3:0,4)`).
    fn stored<'a>(&'a self, name: &str) -> Vec<(String, &'a Entry)> {
        match self.slices.is_empty() {
            true => vec![(name.to_string(), self)],
            false => (self.slices.iter())
                .map(|(slice, part)| (format!("{name} (slice {slice})"), part))
                .collect(),
        }
    }
}

/// The tensors of an index's `entries` (by key): a partitioned variable's entry with the
/// entries of its slices, which are not tensors of their own (TF keys them by name and slice:
/// `slice_key`). A slice listed but not in the index, or not of the slice's type and shape,
/// is an error naming it.
fn tensor_entries(
    index: &Path,
    mut entries: BTreeMap<Vec<u8>, BundleEntry>,
) -> Result<BTreeMap<String, Entry>> {
    let slice_keys: Vec<Vec<u8>> = (entries.iter())
        .flat_map(|(key, entry)| {
            let name = String::from_utf8_lossy(key);
            (entry.slices.iter()).map(move |slice| slice_key(&name, slice))
        })
        .collect();
    let slice_entries: BTreeMap<Vec<u8>, BundleEntry> = (slice_keys.iter())
        .filter_map(|key| Some((key.clone(), entries.remove(key)?)))
        .collect();
    let mut tensors = BTreeMap::new();
    for (key, entry) in entries {
        let name = String::from_utf8_lossy(&key).into_owned();
        let slices = entry.slices.clone();
        let mut tensor = Entry::new(index, &name, entry)?;
        for slice in &slices {
            let part = slice_part(index, &name, &tensor.info, slice, &slice_entries)?;
            tensor.slices.push(part);
        }
        if let Some(shard) = shared_bytes(&tensor.slices) {
            return Err(WeightsError::tensor(
                index,
                &name,
                format!("its slices lie on the same bytes of data shard {shard}: a corrupt index"),
            ));
        }
        tensors.insert(name, tensor);
    }
    Ok(tensors)
}

/// Slice `slice` of the partitioned variable `name` (of `info`) and the entry of its bytes,
/// found in `slice_entries` under TF's key for it and checked against the slice.
fn slice_part(
    index: &Path,
    name: &str,
    info: &TensorInfo,
    slice: &TensorSlice,
    slice_entries: &BTreeMap<Vec<u8>, BundleEntry>,
) -> Result<(SliceBox, Entry)> {
    let slice_box = SliceBox::of(slice, &info.shape)
        .map_err(|reason| WeightsError::tensor(index, name, reason))?;
    let label = format!("{name} (slice {slice_box})");
    let part = (slice_entries.get(&slice_key(name, slice)).cloned())
        .ok_or_else(|| WeightsError::tensor(index, &label, "listed, but not in the index"))?;
    // A slice's entry that lists slices of its own is no slice TF writes.
    let nested = !part.slices.is_empty();
    let part = Entry::new(index, &label, part)?;
    let expected = (info.dtype, slice_box.shape());
    if (part.info.dtype, &part.info.shape) != (expected.0, &expected.1) || nested {
        return Err(WeightsError::tensor(
            index,
            &label,
            format!(
                "a {:?} slice of shape {:?}, where {expected:?} was listed",
                part.info.dtype, part.info.shape
            ),
        ));
    }
    Ok((slice_box, part))
}

/// The shard in which two of `slices` (of one tensor) share bytes, if any. TF writes each slice
/// on bytes of its own; slices sharing them would let a small file claim a tensor of any size.
fn shared_bytes(slices: &[(SliceBox, Entry)]) -> Option<usize> {
    let mut spans: Vec<(usize, u64, u64)> = (slices.iter())
        .map(|(_, part)| {
            (
                part.shard,
                part.offset,
                part.offset.saturating_add(part.size),
            )
        })
        .collect();
    spans.sort_unstable();
    (spans.windows(2))
        .find(|pair| pair[0].0 == pair[1].0 && pair[0].2 > pair[1].1)
        .map(|pair| pair[0].0)
}

/// The data shards the tensors live in, by shard number; a shard that a tensor needs and
/// that is missing, or too short for the bytes the index says the tensor has there, is an
/// error naming both (so a tensor claiming 2^40 bytes is refused here, before anything is
/// read). Only those shards are looked for: the header may claim any count (a corrupt one,
/// 2^31 - 1), and listing every claimed shard would take time and memory without bound.
fn find_shards(
    prefix: &Path,
    num_shards: i32,
    entries: &BTreeMap<String, Entry>,
) -> Result<BTreeMap<usize, PathBuf>> {
    let n = usize::try_from(num_shards).unwrap_or(0);
    let mut shards = BTreeMap::new();
    let mut lengths = BTreeMap::new();
    let stored = entries.iter().flat_map(|(name, entry)| entry.stored(name));
    for (name, entry) in stored {
        if entry.shard >= n {
            return Err(WeightsError::tensor(
                suffixed(prefix, ".index"),
                &name,
                format!("in shard {}, of {n}", entry.shard),
            ));
        }
        let path = suffixed(prefix, &format!(".data-{:05}-of-{n:05}", entry.shard));
        let shard_len = match lengths.get(&entry.shard) {
            Some(&len) => len,
            None => {
                let Ok(metadata) = std::fs::metadata(&path) else {
                    return Err(WeightsError::tensor(
                        path,
                        &name,
                        "this data shard is missing",
                    ));
                };
                lengths.insert(entry.shard, metadata.len());
                metadata.len()
            }
        };
        if entry
            .offset
            .checked_add(entry.size)
            .is_none_or(|end| end > shard_len)
        {
            return Err(WeightsError::tensor(
                path,
                &name,
                format!(
                    "the index puts it at bytes {}..+{}, past the end of this shard ({shard_len} \
                     bytes): truncated, or a corrupt index",
                    entry.offset, entry.size
                ),
            ));
        }
        shards.insert(entry.shard, path);
    }
    Ok(shards)
}

/// What `path` stands for (see [`TfCheckpoint::open`]): a SavedModel, its variables; a
/// directory, its newest checkpoint.
fn resolve(path: &Path) -> Result<Resolved> {
    if let Some(variables) = saved_model_variables(path)? {
        return Ok(Resolved::Prefix(variables));
    }
    match path.is_dir() {
        true => resolve_file(&latest_in(path)?),
        false => resolve_file(path),
    }
}

/// The SavedModel folder `path` names (the folder, or its `saved_model.pb` or `.pbtxt`), if it
/// is one.
pub(super) fn saved_model_dir(path: &Path) -> Option<&Path> {
    const GRAPHS: [&str; 2] = ["saved_model.pb", "saved_model.pbtxt"];
    let is_graph = |path: &Path| GRAPHS.iter().any(|graph| path.ends_with(graph));
    let dir = match path.is_dir() {
        true => path,
        false if is_graph(path) => path.parent().unwrap_or(Path::new(".")),
        false => return None,
    };
    GRAPHS
        .iter()
        .any(|graph| dir.join(graph).is_file())
        .then_some(dir)
}

/// The prefix of a SavedModel's variables (`DIR/variables/variables`, an object-based
/// checkpoint), when `path` is a SavedModel ([`saved_model_dir`]); `None` when it is not. A
/// SavedModel without variables is an error.
fn saved_model_variables(path: &Path) -> Result<Option<PathBuf>> {
    let Some(dir) = saved_model_dir(path) else {
        return Ok(None);
    };
    let prefix = dir.join("variables").join("variables");
    match suffixed(&prefix, ".index").is_file() {
        true => Ok(Some(prefix)),
        false => Err(WeightsError::format(
            dir,
            "a SavedModel without variables (`variables/variables.index`): its weights, if it \
             has any, are constants in its graph, which is not read",
        )),
    }
}

/// The checkpoint the file or prefix `path` stands for, with a clear error for a file that is
/// not one.
fn resolve_file(path: &Path) -> Result<Resolved> {
    let text = path.to_string_lossy();
    if let Some(prefix) = text.strip_suffix(".index") {
        return Ok(Resolved::Prefix(PathBuf::from(prefix)));
    }
    if let Some((prefix, shard)) = text.rsplit_once(".data-")
        && shard.contains("-of-")
    {
        return Ok(Resolved::Prefix(PathBuf::from(prefix)));
    }
    if suffixed(path, ".index").exists() {
        return Ok(Resolved::Prefix(path.to_path_buf()));
    }
    // TF 1.x's `.meta` (the graph) beside the checkpoint it was saved with.
    if let Some(checkpoint) = text.strip_suffix(".meta").map(Path::new)
        && (suffixed(checkpoint, ".index").exists() || checkpoint.is_file())
    {
        return resolve_file(checkpoint);
    }
    if !path.is_file() {
        return Err(WeightsError::format(
            path,
            "no checkpoint here: neither PREFIX.index nor a directory with a `checkpoint` file",
        ));
    }
    let mut file = File::open(path).map_err(WeightsError::io(path))?;
    match ends_in_table_magic(&mut file) {
        true => Ok(Resolved::V1File(path.to_path_buf())),
        false => Err(WeightsError::format(
            path,
            "not a TensorFlow checkpoint (no PREFIX.index beside it, nor a V1 checkpoint)",
        )),
    }
}

/// Whether the file `path` is a TF V1 checkpoint: a table (its magic in its last 8 bytes), where
/// a V2 checkpoint is a prefix with an `.index` beside it. Only the last bytes are read.
pub fn is_v1_checkpoint(path: &Path) -> bool {
    File::open(path).is_ok_and(|mut file| ends_in_table_magic(&mut file))
}

/// Whether `file` ends in a table's magic.
fn ends_in_table_magic(file: &mut File) -> bool {
    let mut tail = [0u8; 8];
    file.seek(SeekFrom::End(-8)).is_ok()
        && file.read_exact(&mut tail).is_ok()
        && u64::from_le_bytes(tail) == table::MAGIC
}

/// The newest prefix of a train directory, from its `checkpoint` state file
/// (`model_checkpoint_path: "model.ckpt-1000"`, relative to the directory or absolute). An
/// absolute one that is gone (a train directory moved or copied from another machine: TF 1's
/// `Saver` writes absolute paths) is taken from the directory itself where it is there.
fn latest_in(dir: &Path) -> Result<PathBuf> {
    let state = dir.join("checkpoint");
    let text = std::fs::read_to_string(&state).map_err(WeightsError::io(&state))?;
    let prefix = prefix_from_state(dir, &text)?;
    let exists = |prefix: &Path| prefix.exists() || suffixed(prefix, ".index").exists();
    let beside = prefix.file_name().map(|name| dir.join(name));
    match beside {
        Some(beside) if prefix.is_absolute() && !exists(&prefix) && exists(&beside) => Ok(beside),
        _ => Ok(prefix),
    }
}

/// The newest prefix named by the text of `dir`'s `checkpoint` state file, its escapes undone
/// (protobuf's text format, which TF writes it in, escapes `"`, `\\` and bytes that are not
/// printable ASCII). The entry point of the coverage-guided fuzz target (`fuzz/`), which
/// skips the file.
#[doc(hidden)]
pub fn prefix_from_state(dir: &Path, text: &str) -> Result<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let state = dir.join("checkpoint");
    let latest = text
        .lines()
        .find_map(|line| line.trim().strip_prefix("model_checkpoint_path:"))
        .and_then(|value| value.trim().strip_prefix('"')?.strip_suffix('"'))
        .ok_or_else(|| WeightsError::format(&state, "no model_checkpoint_path line"))?;
    let latest = unescaped(latest)
        .ok_or_else(|| WeightsError::format(&state, "a bad escape in model_checkpoint_path"))?;
    Ok(dir.join(std::ffi::OsStr::from_bytes(&latest)))
}

/// The bytes protobuf's text format escapes in `text` stand for (C's escapes: `\n \t \r \"
/// \' \\`, one to three octal digits, `\x` and one or two hex digits); `None` for an escape
/// that is none of them.
fn unescaped(text: &str) -> Option<Vec<u8>> {
    let mut bytes = text.bytes().peekable();
    let mut out = Vec::with_capacity(text.len());
    while let Some(byte) = bytes.next() {
        if byte != b'\\' {
            out.push(byte);
            continue;
        }
        out.push(match bytes.next()? {
            b'n' => b'\n',
            b't' => b'\t',
            b'r' => b'\r',
            escaped @ (b'"' | b'\'' | b'\\') => escaped,
            b'x' => {
                number(&mut bytes, 16, 0, 2)
                    .filter(|&(_, taken)| taken > 0)?
                    .0
            }
            octal @ b'0'..=b'7' => number(&mut bytes, 8, u32::from(octal - b'0'), 2)?.0,
            _ => return None,
        });
    }
    Some(out)
}

/// `value` followed by up to `most` more digits of `radix` taken from `bytes`, as a byte, and
/// how many digits were taken; `None` past 255.
fn number(
    bytes: &mut std::iter::Peekable<std::str::Bytes<'_>>,
    radix: u32,
    mut value: u32,
    most: usize,
) -> Option<(u8, usize)> {
    let mut taken = 0;
    while taken < most {
        let Some(digit) = bytes.peek().and_then(|&b| char::from(b).to_digit(radix)) else {
            break;
        };
        value = value * radix + digit;
        bytes.next();
        taken += 1;
    }
    Some((u8::try_from(value).ok()?, taken))
}

fn suffixed(prefix: &Path, suffix: &str) -> PathBuf {
    let mut path = prefix.as_os_str().to_owned();
    path.push(suffix);
    PathBuf::from(path)
}

/// The values of a tensor whose bytes (already size-checked for fixed-size types) are `bytes`.
pub(super) fn decode(info: &TensorInfo, bytes: &[u8]) -> Result<TfValues, String> {
    Ok(match info.dtype {
        TfDType::Float => TfValues::Float(each(bytes, f32::from_le_bytes)),
        TfDType::Double => TfValues::Float(each(bytes, |b| f64::from_le_bytes(b) as f32)),
        TfDType::Half => TfValues::Float(each(bytes, |b| half::f16::from_le_bytes(b).to_f32())),
        TfDType::BFloat16 => {
            TfValues::Float(each(bytes, |b| half::bf16::from_le_bytes(b).to_f32()))
        }
        TfDType::Int { bytes: n, signed } => TfValues::Int(
            bytes
                .chunks_exact(n)
                .map(|c| {
                    let fill = if signed && c[n - 1] & 0x80 != 0 {
                        0xff
                    } else {
                        0
                    };
                    let mut wide = [fill; 8];
                    wide[..n].copy_from_slice(c);
                    i64::from_le_bytes(wide)
                })
                .collect(),
        ),
        TfDType::Bool => TfValues::Bool(bytes.iter().map(|&b| b != 0).collect()),
        TfDType::String => TfValues::String(string_layout(info, bytes)?.strings()),
        TfDType::Other(dtype) => return Err(format!("DataType {dtype} is not supported")),
    })
}

/// The number of elements of a tensor of `shape`, if it fits in a u64.
pub(super) fn element_count(shape: &[usize]) -> Option<u64> {
    shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d as u64))
}

/// A string tensor's bytes, parsed without copying: TF's layout is `n` varint64 lengths, a
/// masked CRC32C of them, then the strings' bytes back to back.
struct StringLayout<'a> {
    /// Each string's length (at most one per byte of the tensor: a varint takes one or more).
    lengths: Vec<usize>,
    /// The strings' bytes, exactly as long as the lengths add up to.
    data: &'a [u8],
}

/// The layout of the string tensor `info` whose bytes are `bytes`.
fn string_layout<'a>(info: &TensorInfo, bytes: &'a [u8]) -> Result<StringLayout<'a>, String> {
    let n = element_count(&info.shape)
        .filter(|&n| n <= bytes.len() as u64)
        .ok_or("more strings than bytes")? as usize;
    let mut rest = bytes;
    let mut lengths = Vec::with_capacity(n);
    let mut total = 0usize;
    for _ in 0..n {
        let len = decode_varint(&mut rest).map_err(|e| format!("bad string length: {e}"))?;
        let len = usize::try_from(len)
            .ok()
            .filter(|&len| len <= bytes.len())
            .ok_or("a string runs past the tensor's bytes")?;
        total = total.checked_add(len).ok_or("string lengths overflow")?;
        lengths.push(len);
    }
    let data = rest.get(4..).ok_or("truncated string tensor")?;
    let data = data
        .get(..total)
        .ok_or("a string runs past the tensor's bytes")?;
    Ok(StringLayout { lengths, data })
}

impl StringLayout<'_> {
    /// The strings, copied out.
    fn strings(&self) -> Vec<Vec<u8>> {
        let mut rest = self.data;
        let mut strings = Vec::with_capacity(self.lengths.len());
        for &len in &self.lengths {
            let (string, after) = rest.split_at(len);
            strings.push(string.to_vec());
            rest = after;
        }
        strings
    }
}

/// The CRC32C TF records for a string tensor: over each length as a little-endian u32 (u64
/// past 4 GiB; not the varints written), the masked CRC of those, then the strings' bytes.
fn string_crc(layout: &StringLayout<'_>) -> u32 {
    let lengths = layout
        .lengths
        .iter()
        .fold(0, |crc, &len| match u32::try_from(len) {
            Ok(len) => crc32c::crc32c_append(crc, &len.to_le_bytes()),
            Err(_) => crc32c::crc32c_append(crc, &(len as u64).to_le_bytes()),
        });
    let crc = crc32c::crc32c_append(lengths, &mask_crc(lengths).to_le_bytes());
    crc32c::crc32c_append(crc, layout.data)
}

#[cfg(test)]
mod tests {
    use towers_testing::assert_error_names;

    use super::*;

    /// The state file's name as TF 2.21 escapes it (`update_checkpoint_state` of
    /// `we"ird\ é<TAB>x<0x01>-5`), and escapes that are not.
    #[test]
    fn the_state_files_escapes_are_undone_as_tf_writes_them() {
        let written = r#"we\"ird\\ é\tx\001-5"#;
        assert_eq!(
            unescaped(written).unwrap(),
            "we\"ird\\ é\tx\u{1}-5".as_bytes()
        );
        assert_eq!(unescaped(r"\x41\x4a\101\0").unwrap(), b"AJA\0");
        for bad in [r"\q", r"\x", r"\777", "end\\"] {
            assert_eq!(unescaped(bad), None, "{bad}");
        }
    }

    /// A header may claim any number of shards (found by fuzzing: a corrupt index claiming
    /// 2^31 - 1 made the reader list and stat every one, gigabytes of paths): only the shards
    /// tensors live in are looked for, and a tensor beyond the claimed count is an error.
    #[test]
    fn only_the_shards_tensors_live_in_are_looked_for() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("model.ckpt-1");
        let claimed = i32::MAX;
        let shard = suffixed(&prefix, &format!(".data-00000-of-{claimed:05}"));
        std::fs::write(&shard, [0u8; 4]).unwrap();
        let entry = |shard| Entry {
            info: TensorInfo {
                dtype: TfDType::Float,
                shape: vec![1],
            },
            shard,
            offset: 0,
            size: 4,
            crc: 0,
            slices: Vec::new(),
        };
        let entries = BTreeMap::from([("w".to_string(), entry(0))]);
        let shards = find_shards(&prefix, claimed, &entries).unwrap();
        assert_eq!(shards.len(), 1);
        assert_eq!(shards[&0], shard);
        let beyond = BTreeMap::from([("w".to_string(), entry(3))]);
        let error = find_shards(&prefix, 2, &beyond).unwrap_err().to_string();
        assert_error_names(&error, &["in shard 3, of 2"]);
    }
}
