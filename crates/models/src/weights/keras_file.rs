//! A Keras weights file as a list of layers and their weights: Keras 2's HDF5 format
//! (`save_weights("x.h5")`, and the ImageNet weights keras.applications downloads), Keras 3's
//! `.weights.h5`, and the weights inside a Keras 3 `.keras` archive; also a Keras model saved
//! by TF2 (a SavedModel, `tf.train.Checkpoint`), whose variables' own names are Keras's
//! `layer/weight` ([`KerasFile::from_checkpoint`]).
//!
//! Keras 2 lists its layers in the root's `layer_names` attribute, and each layer's weights in
//! its group's `weight_names` (`conv2d_1/kernel:0`, a dataset under the layer's group); a
//! whole-model file (`model.save("x.h5")`) keeps the same under `model_weights`. Keras 3 keeps
//! `layers/<name>/vars/<i>`, the weights numbered in the order the layer creates them, without
//! names. Files are read with `hdf5-reader` (see `Cargo.toml`).

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};

use hdf5_reader::group::Group;
use hdf5_reader::{Datatype, Hdf5File, OpenOptions};

use super::byte_values::{decoded_limit, each};
use super::error::{Result, WeightsError};
use super::tf_checkpoint::TfCheckpoint;

/// One weight of a layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KerasWeight {
    /// What it is within its layer: `kernel`, `bias`, `beta`, `moving_mean`, ...
    pub(crate) name: String,
    /// Its dataset's path in the file (`conv2d_1/conv2d_1/kernel:0`, `layers/conv2d/vars/0`).
    pub(crate) dataset: String,
}

/// A layer with weights, by its Keras name (`conv2d_5`, `batch_normalization_5`, `predictions`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KerasLayer {
    pub(crate) name: String,
    pub(crate) weights: Vec<KerasWeight>,
}

/// What a file's layer names say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LayerNames {
    /// Each layer's own name, given by the code or numbered by class as Keras created it
    /// (`conv2d_5` is the sixth `Conv2D` created, in a process that created no other): Keras
    /// 2's, and Keras 3's where the file records them (the `name` of each layer's `vars`).
    Own,
    /// Keras 3's groups where the file records no own names: names by class, numbered in the
    /// order of the model's layers (`conv2d_5` is the sixth `Conv2D` of `model.layers`, a
    /// `Dense` is `dense`).
    ByClass,
}

/// An open Keras weights file.
pub(crate) struct KerasFile {
    path: PathBuf,
    storage: Storage,
    pub(crate) names: LayerNames,
    /// Its layers with weights, in the file's order.
    pub(crate) layers: Vec<KerasLayer>,
}

impl KerasFile {
    /// The file at `path`: an HDF5 file of Keras 2 or 3, or a `.keras` archive.
    pub(crate) fn open(path: &Path) -> Result<Self> {
        let not_keras = |reason: &str| WeightsError::format(path, reason);
        let file = hdf5(path)?;
        let root = file
            .root_group()
            .map_err(|e| not_keras("unreadable HDF5 root group").caused_by(e))?;
        let (names, layers) = match (keras2_layers(path, &root)?, root.group("layers")) {
            (Some(layers), _) => (LayerNames::Own, layers),
            (None, Ok(group)) => {
                let mut layers = Vec::new();
                keras3_layers(path, &group, "layers", &mut layers, &mut HashSet::new())?;
                own_names(layers)
            }
            (None, Err(_)) => {
                return Err(not_keras(
                    "no `layer_names` (Keras 2) or `layers` group (Keras 3): not a Keras \
                     weights file",
                ));
            }
        };
        Ok(Self {
            path: path.to_path_buf(),
            storage: Storage::Hdf5(file),
            names,
            layers,
        })
    }

    /// The Keras model whose variables the TF2 object-based `checkpoint` (a SavedModel's
    /// `variables/`, a `tf.train.Checkpoint`) lists by their own names, `layer/weight`
    /// (`conv2d_5/kernel`, tf-keras's MobileNetV3's `Conv/BatchNorm/gamma`): each layer its own
    /// name, as in a Keras 2 file. Tensors not so named (the object graph, a `save_counter`)
    /// are no layer's.
    pub(crate) fn from_checkpoint(checkpoint: TfCheckpoint) -> Self {
        let mut layers: Vec<KerasLayer> = Vec::new();
        let named = checkpoint
            .tensors()
            .filter_map(|(name, _)| Some((name, name.rsplit_once('/')?)));
        for (name, (layer, weight)) in named {
            let weight = KerasWeight {
                name: weight.to_string(),
                dataset: name.to_string(),
            };
            // Listed in name order: a layer's weights come together.
            match layers.last_mut().filter(|last| last.name == layer) {
                Some(last) => last.weights.push(weight),
                None => layers.push(KerasLayer {
                    name: layer.to_string(),
                    weights: vec![weight],
                }),
            }
        }
        let mut path = checkpoint.prefix().as_os_str().to_owned();
        path.push(".index");
        Self {
            path: path.into(),
            storage: Storage::Checkpoint(checkpoint),
            names: LayerNames::Own,
            layers,
        }
    }

    /// The file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Every weight of every layer, in the file's order.
    pub(crate) fn weights(&self) -> impl Iterator<Item = &KerasWeight> {
        self.layers.iter().flat_map(|layer| &layer.weights)
    }

    /// The values of `weight` as f32, row-major, and its shape.
    pub(crate) fn read(&self, weight: &KerasWeight) -> Result<(Vec<usize>, Vec<f32>)> {
        let file = match &self.storage {
            Storage::Hdf5(file) => file,
            Storage::Checkpoint(checkpoint) => {
                let values = checkpoint.read_f32(&weight.dataset)?;
                let info = checkpoint.info(&weight.dataset).expect("a listed tensor");
                return Ok((info.shape.clone(), values));
            }
        };
        let bad = |reason: &str| WeightsError::tensor(&self.path, &weight.dataset, reason);
        let dataset = (file.dataset(&weight.dataset))
            .map_err(|e| bad("not a readable dataset").caused_by(e))?;
        let shape = dataset.shape().iter().map(|&d| d as usize).collect();
        let unreadable = |e| bad("unreadable values").caused_by(e);
        let values = match dataset.dtype() {
            Datatype::FloatingPoint { size: 4, .. } => {
                dataset
                    .read_array::<f32>()
                    .map_err(unreadable)?
                    .into_raw_vec_and_offset()
                    .0
            }
            Datatype::FloatingPoint { size: 8, .. } => {
                let values = dataset.read_array::<f64>().map_err(unreadable)?;
                values.iter().map(|&v| v as f32).collect()
            }
            Datatype::FloatingPoint { size: 2, .. } => {
                let bytes = dataset.read_native_bytes().map_err(unreadable)?;
                each(&bytes, |b| half::f16::from_ne_bytes(b).to_f32())
            }
            // HDF5 has no bfloat16: h5py stores Keras 3's as 2 opaque bytes (little-endian, as
            // numpy holds them) and names the type in the dataset's `dtype` attribute.
            Datatype::Opaque { size: 2, .. } if is_bfloat16(&dataset) => {
                let bytes = dataset.read_native_bytes().map_err(unreadable)?;
                each(&bytes, |b| half::bf16::from_le_bytes(b).to_f32())
            }
            other => {
                return Err(bad(&format!(
                    "{other:?}; only floating-point weights are read"
                )));
            }
        };
        Ok((shape, values))
    }
}

/// Where a [`KerasFile`]'s weights are.
enum Storage {
    /// An HDF5 file of Keras's.
    Hdf5(Hdf5File),
    /// A TF2 object-based checkpoint of a Keras model.
    Checkpoint(TfCheckpoint),
}

/// Whether `dataset`'s `dtype` attribute names bfloat16, as h5py writes Keras 3's.
fn is_bfloat16(dataset: &hdf5_reader::Dataset) -> bool {
    (dataset.attribute("dtype").and_then(|a| a.read_string())).is_ok_and(|d| d == "bfloat16")
}

/// The HDF5 file at `path`, or inside it when it is a `.keras` archive, its reads limited to
/// [`decoded_limit`] bytes.
pub(crate) fn hdf5(path: &Path) -> Result<Hdf5File> {
    let file = match is_archive(path) {
        true => {
            const WEIGHTS: &str = "model.weights.h5";
            let bytes = archived(path, WEIGHTS)?.ok_or_else(|| {
                WeightsError::format(path, format!("no `{WEIGHTS}` in the archive"))
            })?;
            let options = read_limit(bytes.len() as u64);
            Hdf5File::from_vec_with_options(bytes, options)
        }
        false => {
            let len = std::fs::metadata(path)
                .map_err(WeightsError::io(path))?
                .len();
            Hdf5File::open_with_options(path, read_limit(len))
        }
    };
    file.map_err(|e| WeightsError::format(path, "not an HDF5 file").caused_by(e))
}

/// Whether `path` names a Keras 3 `.keras` archive (a zip), by its extension as Keras does.
pub(crate) fn is_archive(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "keras")
}

/// `hdf5-reader`'s options for a file of `len` bytes: no weight decodes to more than
/// [`decoded_limit`] (it reads any size unless told).
fn read_limit(len: u64) -> OpenOptions {
    let limit = usize::try_from(decoded_limit(len)).unwrap_or(usize::MAX);
    OpenOptions::default().with_max_read_bytes(limit)
}

/// The file `entry` inside the Keras 3 `.keras` archive at `path` (`model.weights.h5`,
/// `config.json`), of at most [`decoded_limit`] bytes; `None` when the archive has none.
pub(crate) fn archived(path: &Path, entry: &str) -> Result<Option<Vec<u8>>> {
    let file = std::fs::File::open(path).map_err(WeightsError::io(path))?;
    let limit = decoded_limit(file.metadata().map_err(WeightsError::io(path))?.len());
    let not_keras = |reason: &str| WeightsError::format(path, reason);
    let mut archive =
        zip::ZipArchive::new(file).map_err(|e| not_keras("not a .keras archive").caused_by(e))?;
    let entry_file = match archive.by_name(entry) {
        Ok(entry_file) => entry_file,
        Err(zip::result::ZipError::FileNotFound) => return Ok(None),
        Err(e) => return Err(not_keras(&format!("`{entry}` unreadable")).caused_by(e)),
    };
    let mut bytes = Vec::new();
    (entry_file.take(limit + 1).read_to_end(&mut bytes))
        .map_err(|e| not_keras(&format!("`{entry}` unreadable")).caused_by(e))?;
    if bytes.len() as u64 > limit {
        return Err(not_keras(&format!(
            "`{entry}` decompresses to more than {limit} bytes, 16 times the archive (Keras \
             stores it uncompressed)"
        )));
    }
    Ok(Some(bytes))
}

/// Keras 2's layers: the `layer_names` of `root` (or of its `model_weights` in a whole-model
/// file); `None` when it has none.
fn keras2_layers(path: &Path, root: &Group) -> Result<Option<Vec<KerasLayer>>> {
    let (top, prefix) = match root.group("model_weights") {
        Ok(group) => (group, "model_weights/"),
        Err(_) => (root.clone(), ""),
    };
    let Some(names) = strings(path, &top, "layer_names")? else {
        return Ok(None);
    };
    let mut layers: Vec<KerasLayer> = Vec::new();
    for name in names {
        let group = group_at(&top, &name).map_err(|e| {
            WeightsError::tensor(path, &name, "a layer named in `layer_names` has no group")
                .caused_by(e)
        })?;
        for weight in strings(path, &group, "weight_names")?.unwrap_or_default() {
            // A layer's own weights are `{name}/kernel:0`, its name with slashes or not
            // (tf-keras's MobileNetV3 names layers as scopes: `Conv/BatchNorm`).
            let own = weight
                .strip_prefix(name.as_str())
                .is_some_and(|w| w.starts_with('/'));
            let layer = match own {
                true => name.clone(),
                false => layer_of(&weight).unwrap_or(&name).to_string(),
            };
            let weight = KerasWeight {
                name: short_name(&weight).to_string(),
                dataset: format!("{prefix}{name}/{weight}"),
            };
            // A nested model lists its trainable weights before the others: a batch norm's
            // beta comes long before its moving statistics.
            match layers.iter_mut().rev().find(|known| known.name == layer) {
                Some(known) => known.weights.push(weight),
                None => layers.push(KerasLayer {
                    name: layer,
                    weights: vec![weight],
                }),
            }
        }
    }
    Ok(Some(layers))
}

/// The group at `path` below `top`, one level at a time: tf-keras's MobileNetV3 names its
/// layers with slashes (`Conv/BatchNorm`), which HDF5 nests as groups.
fn group_at(top: &Group, path: &str) -> Result<Group, hdf5_reader::error::Error> {
    let mut group = top.clone();
    for part in path.split('/') {
        group = group.group(part)?;
    }
    Ok(group)
}

/// The layer a Keras 2 weight belongs to, by its name: `conv2d_1` for `conv2d_1/kernel:0`.
/// A nested model (`include_top=False` InceptionV3 inside a model of one's own) is one layer
/// of the file whose weights keep their own layers' names (`conv2d/kernel:0` under
/// `inception_v3`), slashes included (tf-keras's MobileNetV3:
/// `expanded_conv_3/squeeze_excite/Conv/kernel:0`, not the stem's `Conv`).
fn layer_of(weight: &str) -> Option<&str> {
    weight.rsplit_once('/').map(|(layer, _)| layer)
}

/// `conv2d_1/kernel:0` as `kernel`: the part after the last `/`, without TF's `:0`.
pub(crate) fn short_name(weight: &str) -> &str {
    let last = weight.rsplit('/').next().unwrap_or(weight);
    last.split(':').next().unwrap_or(last)
}

/// The strings of attribute `name` of `group`: `None` without it, none for an empty one (Keras
/// writes a layer without weights an empty float array). Keras 2 splits an attribute over
/// 64 KB into `name0`, `name1`, ... (HDF5's limit on an attribute's size).
pub(crate) fn strings(path: &Path, group: &Group, name: &str) -> Result<Option<Vec<String>>> {
    let read = |attribute: hdf5_reader::Attribute| {
        match attribute.num_elements() {
            Ok(0) => Ok(Vec::new()),
            _ => attribute.read_strings(),
        }
        .map_err(|e| {
            WeightsError::tensor(
                path,
                format!("{}@{name}", group.name()),
                "not a list of strings",
            )
            .caused_by(e)
        })
    };
    if let Ok(attribute) = group.attribute(name) {
        return read(attribute).map(Some);
    }
    let mut chunks = Vec::new();
    while let Ok(attribute) = group.attribute(&format!("{name}{}", chunks.len())) {
        chunks.push(read(attribute)?);
    }
    Ok((!chunks.is_empty()).then(|| chunks.concat()))
}

/// How deep Keras 3's models may nest in a weights file: a model of models nests a few, and
/// a hostile file thousands, whose walk would overflow the stack (an abort, not an error).
const MOST_NESTED_MODELS: usize = 32;

/// Keras 3's layers: `layers/<name>/vars/<i>`, in the file's (alphabetical) order of names,
/// a nested model's (`layers/functional/layers/...`) in its place, each with the own name its
/// `vars` records, if any. Weights have no names in the file; those of a layer named as Keras
/// names batch norms take their names in the order a `BatchNormalization` creates them, a
/// `Normalization`'s `mean`, `variance` and `count`, every other layer's `kernel` and `bias` (a
/// name for the weights the readers of known models look up; any others are named by their
/// number). `seen` holds the addresses of the `layers` groups walked so far: HDF5's links can
/// make a group its own descendant, which Keras never writes, and a walk into one would not
/// end.
fn keras3_layers(
    path: &Path,
    layers: &Group,
    at: &str,
    out: &mut Vec<(KerasLayer, Option<String>)>,
    seen: &mut HashSet<u64>,
) -> Result<()> {
    // (An HDF5 name holds no `/`: each `/layers` in the path is one model deeper.)
    if at.matches("/layers").count() > MOST_NESTED_MODELS {
        return Err(WeightsError::format(
            path,
            format!(
                "`{at}`: models nested more than {MOST_NESTED_MODELS} deep (Keras nests a few)"
            ),
        ));
    }
    if !seen.insert(layers.address()) {
        return Err(WeightsError::format(
            path,
            format!("`{at}` is a group met before (a cycle of links, which Keras never writes)"),
        ));
    }
    let unreadable = |e| WeightsError::format(path, format!("`{at}` is unreadable")).caused_by(e);
    let (names, _) = layers.member_names().map_err(unreadable)?;
    for name in names {
        let layer = layers.group(&name).map_err(unreadable)?;
        if let Ok(nested) = layer.group("layers") {
            keras3_layers(path, &nested, &format!("{at}/{name}/layers"), out, seen)?;
        }
        let Ok(vars) = layer.group("vars") else {
            continue;
        };
        let (_, mut indices) = vars.member_names().map_err(unreadable)?;
        indices.sort_by_key(|index| index.parse::<usize>().unwrap_or(usize::MAX));
        let names = positional_names(&name, indices.len());
        let weights: Vec<KerasWeight> = indices
            .iter()
            .enumerate()
            .map(|(i, index)| KerasWeight {
                name: names.get(i).map_or(index.clone(), |n| n.to_string()),
                dataset: format!("{at}/{name}/vars/{index}"),
            })
            .collect();
        if !weights.is_empty() {
            let own_name = strings(path, &vars, "name")?.and_then(|names| names.into_iter().next());
            out.push((KerasLayer { name, weights }, own_name));
        }
    }
    Ok(())
}

/// Keras 3's `layers` by their own names where the file records one for every layer (Keras
/// 3.6 and later), else by their groups' names.
fn own_names(layers: Vec<(KerasLayer, Option<String>)>) -> (LayerNames, Vec<KerasLayer>) {
    if !layers.iter().all(|(_, own)| own.is_some()) {
        return (
            LayerNames::ByClass,
            layers.into_iter().map(|(layer, _)| layer).collect(),
        );
    }
    let renamed = layers.into_iter().map(|(layer, own)| KerasLayer {
        name: own.unwrap_or(layer.name),
        weights: layer.weights,
    });
    (LayerNames::Own, renamed.collect())
}

/// The names of a Keras 3 layer's `count` weights, from its name.
fn positional_names(layer: &str, count: usize) -> &'static [&'static str] {
    match (layer.starts_with("batch_normalization"), count) {
        (true, 3) => &["beta", "moving_mean", "moving_variance"],
        (true, 4) => &["gamma", "beta", "moving_mean", "moving_variance"],
        (true, _) => &[],
        (false, _) if layer.starts_with("depthwise_conv2d") => &["depthwise_kernel", "bias"],
        (false, _) if layer.starts_with("normalization") => &["mean", "variance", "count"],
        (false, _) => &["kernel", "bias"],
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// `tests/data/keras/`: one small network's weights in each of Keras's files
    /// (`scripts/tf_fixtures/keras_weight_files.py`).
    pub(in crate::weights) fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/keras")
            .join(name)
    }

    /// A layer as a file should hold it: its name, its index `i` among the network's layers
    /// with weights (`model.layers`, a nested model's in its place), its weights' names.
    type Layer = (&'static str, usize, &'static [&'static str]);

    const BATCH_NORM: &[&str] = &["beta", "moving_mean", "moving_variance"];

    /// The small network's layers, as Keras 2 names them.
    const KERAS2: [Layer; 4] = [
        ("conv2d", 0, &["kernel"]),
        ("batch_normalization", 1, BATCH_NORM),
        (
            "batch_normalization_1",
            2,
            &["gamma", "beta", "moving_mean", "moving_variance"],
        ),
        ("predictions", 3, &["kernel", "bias"]),
    ];

    /// Asserts that the file holds `expected`'s layers in that order, each weight where the
    /// script put it: element k of weight j of layer i is `i + j / 10 + k / 1000`.
    fn reads_every_weight(name: &str, names: LayerNames, expected: &[Layer]) {
        let file = KerasFile::open(&fixture(name)).unwrap();
        assert_eq!(file.names, names, "{name}");
        let layers: Vec<(&str, Vec<&str>)> = (file.layers.iter())
            .map(|l| {
                (
                    l.name.as_str(),
                    l.weights.iter().map(|w| w.name.as_str()).collect(),
                )
            })
            .collect();
        let want: Vec<(&str, Vec<&str>)> =
            expected.iter().map(|&(n, _, w)| (n, w.to_vec())).collect();
        assert_eq!(layers, want, "{name}");
        for (layer, &(_, i, _)) in file.layers.iter().zip(expected) {
            for (j, weight) in layer.weights.iter().enumerate() {
                let (shape, values) = file.read(weight).unwrap();
                assert_eq!(values.len(), shape.iter().product::<usize>());
                for (k, &value) in values.iter().enumerate() {
                    let want = i as f32 + j as f32 / 10.0 + k as f32 / 1000.0;
                    assert!(
                        (value - want).abs() < 1e-6,
                        "{name}: {}[{k}]",
                        weight.dataset
                    );
                }
            }
        }
    }

    #[test]
    fn keras_2_files_read_layer_by_layer() {
        reads_every_weight("keras2.h5", LayerNames::Own, &KERAS2);
        reads_every_weight("keras2_fixed_strings.h5", LayerNames::Own, &KERAS2);
        reads_every_weight("model_keras2.h5", LayerNames::Own, &KERAS2);
    }

    /// Keras 3's groups come in alphabetical order, each layer by the own name its `vars`
    /// records; without those names (Keras 3.0-3.5), by the group's, named by class.
    #[test]
    fn keras_3_files_read_layer_by_layer() {
        let [conv, norm, scaled_norm, (_, i, weights)] = KERAS2;
        let keras3 = [norm, scaled_norm, conv, ("predictions", i, weights)];
        reads_every_weight("model.weights.h5", LayerNames::Own, &keras3);
        reads_every_weight("model.keras", LayerNames::Own, &keras3);
        let by_class = [norm, scaled_norm, conv, ("dense", i, weights)];
        reads_every_weight("unnamed.weights.h5", LayerNames::ByClass, &by_class);
    }

    /// A nested model's layers, Keras 2's weights of each layer gathered (it lists a nested
    /// model's trainable weights first), every weight where the script put it.
    #[test]
    fn a_nested_models_layers_read_as_the_files_own() {
        let keras2: [Layer; 5] = [
            ("conv2d", 0, &["kernel"]),
            ("batch_normalization", 1, BATCH_NORM),
            ("conv2d_1", 2, &["kernel"]),
            ("batch_normalization_1", 3, BATCH_NORM),
            ("dense", 4, &["kernel", "bias"]),
        ];
        let keras3 = [keras2[4], keras2[1], keras2[3], keras2[0], keras2[2]];
        reads_every_weight("nested_keras2.h5", LayerNames::Own, &keras2);
        reads_every_weight("nested.weights.h5", LayerNames::Own, &keras3);
    }

    /// Without a read limit, the file's claim of 2^28 values (1 GiB) was allocated and read as
    /// zeros; a claim near the machine's memory woke the OOM killer.
    #[test]
    fn a_weight_claiming_more_than_the_file_can_hold_is_an_error() {
        let path = fixture("huge_claim.h5");
        let file = KerasFile::open(&path).unwrap();
        let error = file.read(&file.layers[0].weights[0]).err().unwrap();
        let cause = std::error::Error::source(&error).map(|e| e.to_string());
        let error = format!("{error}: {}", cause.unwrap_or_default());
        for words in [
            "huge_claim.h5: tensor `conv2d/conv2d/kernel:0`: unreadable values: ",
            "read of 268435456 elements (1073741824 bytes) exceeds the 67108864 byte read limit",
        ] {
            assert!(error.contains(words), "{error}");
        }
    }

    /// A nested model's `layers` linked to a group above it: before, the walk into nested
    /// models recursed until the stack overflowed (the Keras fuzz target's find).
    #[test]
    fn a_cycle_of_nested_models_is_an_error() {
        let error = KerasFile::open(&fixture("linked_cycle.weights.h5"))
            .err()
            .unwrap();
        let words = "linked_cycle.weights.h5: `layers/functional/layers` is a group met before";
        assert!(error.to_string().contains(words), "{error}");
    }

    /// Keras 3's bfloat16, float16 and float64 weights (`dtypes.weights.h5`, h5py's opaque
    /// 2-byte type for bfloat16) read as Keras 3.15 loads them back (`dtypes.json`).
    #[test]
    fn every_float_type_keras_saves_reads_as_keras_loads_it() {
        let file = KerasFile::open(&fixture("dtypes.weights.h5")).unwrap();
        let text = std::fs::read_to_string(fixture("dtypes.json")).unwrap();
        let expected: std::collections::BTreeMap<String, Vec<f32>> =
            serde_json::from_str(&text).unwrap();
        let datasets: Vec<&str> = file.weights().map(|w| w.dataset.as_str()).collect();
        assert_eq!(
            datasets,
            expected.keys().map(String::as_str).collect::<Vec<_>>()
        );
        for weight in file.weights() {
            let (_, values) = file.read(weight).unwrap();
            assert_eq!(values, expected[&weight.dataset], "{}", weight.dataset);
        }
    }

    /// Models nested 40 deep: an error naming the file and the depth, before the walk could
    /// go thousands deep and overflow the stack.
    #[test]
    fn models_nested_too_deep_are_an_error() {
        let error = KerasFile::open(&fixture("deep_layers.weights.h5"))
            .err()
            .unwrap();
        let words = ["deep_layers.weights.h5", "models nested more than 32 deep"];
        assert!(
            words.iter().all(|w| error.to_string().contains(w)),
            "{error}"
        );
    }

    #[test]
    fn a_file_of_other_bytes_is_no_keras_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("weights.h5");
        std::fs::write(&path, b"not HDF5 at all").unwrap();
        let error = KerasFile::open(&path).err().unwrap().to_string();
        assert!(
            error.starts_with(&format!("{}: not an HDF5 file", path.display())),
            "{error}"
        );

        let path = dir.path().join("model.keras");
        let mut archive = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
        archive
            .start_file("config.json", zip::write::SimpleFileOptions::default())
            .unwrap();
        archive.finish().unwrap();
        let error = KerasFile::open(&path).err().unwrap().to_string();
        assert!(
            error.contains("no `model.weights.h5` in the archive"),
            "{error}"
        );
    }

    /// Without the limit, the 70 MiB of zeros were read; a deflated entry decompresses up to
    /// a thousandfold.
    #[test]
    fn a_keras_archive_decompressing_to_more_than_16_times_its_size_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bomb.keras");
        let mut archive = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
        let deflated = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        archive.start_file("model.weights.h5", deflated).unwrap();
        std::io::Write::write_all(&mut archive, &vec![0; 70 << 20]).unwrap();
        archive.finish().unwrap();
        let error = KerasFile::open(&path).err().unwrap().to_string();
        let words = "bomb.keras: `model.weights.h5` decompresses to more than 67108864 bytes";
        assert!(error.contains(words), "{error}");
    }

    /// Every prefix of a Keras file opens and reads, or fails naming the file: never a panic.
    #[test]
    fn a_truncated_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cut.h5");
        let bytes = std::fs::read(fixture("keras2.h5")).unwrap();
        let mut failures = 0;
        for len in (0..bytes.len()).step_by(97) {
            std::fs::write(&path, &bytes[..len]).unwrap();
            let read = KerasFile::open(&path).and_then(|file| {
                file.weights()
                    .map(|weight| file.read(weight))
                    .collect::<Result<Vec<_>>>()
            });
            if let Err(error) = read {
                assert!(
                    error.to_string().starts_with(&path.display().to_string()),
                    "{error}"
                );
                failures += 1;
            }
        }
        // The weights lie at the file's end: almost every prefix lacks some.
        assert!(failures > bytes.len() / 97 / 2, "{failures}");
    }
}
