//! [`TfdsDataset`]: a dataset TFDS prepared, found by its folder as `tfds.load` finds it.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::{RecordFormat, RecordSlices};

use super::features::{Feature, Features};
use super::format::TfdsImageFormat;
use super::info::{self, DatasetInfo};
use super::split_spec;

/// A dataset of images and class labels that TensorFlow Datasets prepared (`tfds.load`,
/// `download_and_prepare`) in its TFRecord files: `<data_dir>/<name>[/<config>]/<version>/`,
/// holding `dataset_info.json`, `features.json`, `<label>.labels.txt` and the shards
/// `<name>-<split>.tfrecord-XXXXX-of-YYYYY`.
///
/// Its image and label are the features `as_supervised=True` yields (the dataset's supervised
/// keys), or where it has none its one `Image` and its one `ClassLabel`; [`with_keys`] picks
/// others.
///
/// ```no_run
/// # use std::{path::Path, sync::Arc};
/// use towers_data::{RecordDataset, tfds::TfdsDataset};
/// # fn main() -> towers_data::Result<()> {
/// let home = std::env::var("HOME").unwrap();
/// // tfds.load("cifar10", data_dir="~/tensorflow_datasets")'s files: the newest version.
/// let cifar = TfdsDataset::load(&Path::new(&home).join("tensorflow_datasets"), "cifar10")?;
/// let train = RecordDataset::open(Arc::new(cifar.image_format()), cifar.split_files("train")?)?;
/// # Ok(()) }
/// ```
///
/// [`with_keys`]: TfdsDataset::with_keys
#[derive(Debug, Clone)]
pub struct TfdsDataset {
    dir: PathBuf,
    info: DatasetInfo,
    features: Features,
    image_key: String,
    label_key: String,
    num_classes: usize,
}

impl TfdsDataset {
    /// The dataset in `path`: a version folder (`.../cifar10/3.0.2`, holding
    /// `dataset_info.json`), or a dataset's folder (`.../cifar10`, `.../imagenette` or
    /// `.../imagenette/full-size-v2`), of which the newest version prepared is taken, and of
    /// a dataset with configs the default one (TFDS's `.config/metadata.json`) or the only one.
    pub fn open(path: &Path) -> Result<Self> {
        Self::find(path)?.ok_or_else(|| Error::File {
            path: path.to_path_buf(),
            reason: "no dataset TFDS prepared here: no dataset_info.json in it or in a version \
                     folder (3.0.2) below it"
                .into(),
        })
    }

    /// [`open`](Self::open), but `None` where `path` (a folder) holds no dataset TFDS
    /// prepared, for callers that try other layouts then; a dataset there that cannot be read
    /// is still an error.
    pub fn find(path: &Path) -> Result<Option<Self>> {
        Self::find_in(path, DataDir::Named)
    }

    /// [`find`](Self::find), but `None` for TFDS's `data_dir` too: for a caller that looks
    /// for one dataset in it first.
    pub(crate) fn find_dataset(path: &Path) -> Result<Option<Self>> {
        Self::find_in(path, DataDir::Passed)
    }

    fn find_in(path: &Path, data_dir: DataDir) -> Result<Option<Self>> {
        let Some(dir) = version_dir(path, data_dir)? else {
            return Ok(None);
        };
        let info = DatasetInfo::read(&dir)?;
        let features = Features::read(&dir)?;
        let (image_key, label_key) = default_keys(&dir, &info, &features)?;
        Self::with_features(dir, info, features, &image_key, &label_key).map(Some)
    }

    /// The dataset `tfds.load(name, data_dir=data_dir)` reads: `name` as `tfds.load` takes it,
    /// `cifar10`, `cifar10:3.0.2`, `imagenette/full-size-v2` or `imagenette/full-size-v2:1.0.0`.
    pub fn load(data_dir: &Path, name: &str) -> Result<Self> {
        let (name, version) = match name.split_once(':') {
            Some((name, version)) => (name, Some(version)),
            None => (name, None),
        };
        if !info::stays_below(name) || name.is_empty() {
            return Err(Error::Config(format!(
                "{name:?} is not a TFDS dataset name (`name`, `name/config`, with `:version`)"
            )));
        }
        let folder = data_dir.join(name);
        Self::open(&match version {
            Some(version) => folder.join(version),
            None => folder,
        })
    }

    /// The same dataset with its images under `image_key` and its labels under `label_key`: an
    /// error names a key the dataset lacks or whose feature is not an 8-bit `Image` or a
    /// `ClassLabel`.
    pub fn with_keys(self, image_key: &str, label_key: &str) -> Result<Self> {
        Self::with_features(self.dir, self.info, self.features, image_key, label_key)
    }

    fn with_features(
        dir: PathBuf,
        info: DatasetInfo,
        features: Features,
        image_key: &str,
        label_key: &str,
    ) -> Result<Self> {
        let bad = |reason: String| Error::File {
            path: dir.join(super::features::FILE_NAME),
            reason,
        };
        let num_classes = match features.0.get(label_key) {
            Some(&Feature::ClassLabel { num_classes })
                if (1..=MAX_CLASSES).contains(&num_classes) =>
            {
                num_classes as usize
            }
            Some(Feature::ClassLabel { num_classes }) => {
                return Err(bad(format!(
                    "class label {label_key} has {num_classes} classes; 1 to {MAX_CLASSES} are read"
                )));
            }
            other => return Err(bad(not_a(label_key, "a ClassLabel", other))),
        };
        match features.0.get(image_key) {
            Some(Feature::Image { dtype }) if dtype == "uint8" => {}
            Some(Feature::Image { dtype }) => {
                return Err(bad(format!(
                    "image {image_key} holds {dtype} pixels; 8-bit images (uint8) are read"
                )));
            }
            other => return Err(bad(not_a(image_key, "an Image", other))),
        }
        Ok(Self {
            dir,
            info,
            features,
            image_key: image_key.to_string(),
            label_key: label_key.to_string(),
            num_classes,
        })
    }

    /// The version folder the files are in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The dataset's name (`cifar10`).
    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// Its version (`3.0.2`).
    pub fn version(&self) -> &str {
        &self.info.version
    }

    /// Its builder config (`full-size-v2`), when it has configs.
    pub fn config(&self) -> Option<&str> {
        self.info.config_name.as_deref()
    }

    /// Its splits' names, as `dataset_info.json` lists them.
    pub fn splits(&self) -> Vec<&str> {
        self.info.split_names()
    }

    /// Whether it has the split `split`.
    pub fn has_split(&self, split: &str) -> bool {
        self.info.split(split).is_some()
    }

    /// The feature key of the images.
    pub fn image_key(&self) -> &str {
        &self.image_key
    }

    /// The feature key of the labels.
    pub fn label_key(&self) -> &str {
        &self.label_key
    }

    /// The classes the labels are in: `0..num_classes`.
    pub fn num_classes(&self) -> usize {
        self.num_classes
    }

    /// The classes' names, from `<label key>.labels.txt` (as TFDS's `ClassLabel.names`),
    /// when the dataset names them; an error names a file whose count of names is not the
    /// number of classes.
    pub fn class_names(&self) -> Result<Option<Vec<String>>> {
        let path = self.dir.join(format!("{}.labels.txt", self.label_key));
        if !path.is_file() {
            return Ok(None);
        }
        let text = info::read_metadata(&path)?;
        // TFDS's `_load_names_from_file`: lines stripped, empty ones dropped.
        let text = String::from_utf8_lossy(&text);
        let names: Vec<String> = text
            .split('\n')
            .map(str::trim)
            .filter(|name| !name.is_empty())
            .map(str::to_string)
            .collect();
        if names.len() != self.num_classes {
            return Err(Error::File {
                path,
                reason: format!(
                    "{} class names where features.json says {} classes",
                    names.len(),
                    self.num_classes
                ),
            });
        }
        Ok(Some(names))
    }

    /// The examples of `split`, where `dataset_info.json` counts them.
    pub fn num_examples(&self, split: &str) -> Option<u64> {
        self.info.split(split)?.num_examples()
    }

    /// The shards of `split`, in order, checked to exist: an error names a split the dataset
    /// lacks (and those it has) or a missing shard.
    pub fn split_files(&self, split: &str) -> Result<Vec<PathBuf>> {
        let Some(info) = self.info.split(split) else {
            return Err(Error::File {
                path: self.dir.join(info::FILE_NAME),
                reason: format!(
                    "no split {split:?}: the dataset has {}",
                    self.splits().join(", ")
                ),
            });
        };
        let paths = info.shard_paths(&self.dir, &self.info.name)?;
        if paths.is_empty() {
            return Err(Error::File {
                path: self.dir.join(info::FILE_NAME),
                reason: format!("split {split} has no shards"),
            });
        }
        let count = paths.len();
        for (index, path) in paths.iter().enumerate() {
            if !path.is_file() {
                return Err(Error::File {
                    path: path.clone(),
                    reason: format!(
                        "missing: shard {index} of the {count} of split {split} that \
                         dataset_info.json lists (a copy not finished?)"
                    ),
                });
            }
        }
        Ok(paths)
    }

    /// The records of the split spec `spec`, as `tfds.load(..., split=spec)` reads them
    /// (`train`, `train[:80%]`, `train[-10:]`, `train[1shard:]`, `validation+train[:10%]`,
    /// `all`; percents rounded to the closest record, ties to even): their files in order and
    /// the format that reads the records selected ([`RecordSlices`] of
    /// [`image_format`](Self::image_format)). An error names a spec TFDS refuses, a split that
    /// selects no record, and a file two parts of the spec read (take them as one part).
    pub fn slice(&self, spec: &str) -> Result<(RecordSlices, Vec<PathBuf>)> {
        self.slice_with(spec, Arc::new(self.image_format()))
    }

    /// [`slice`](Self::slice) with the records read by `format` (the image format with a
    /// label offset, say).
    pub fn slice_with(
        &self,
        spec: &str,
        format: Arc<dyn RecordFormat>,
    ) -> Result<(RecordSlices, Vec<PathBuf>)> {
        let ranges = self.slice_ranges(spec)?;
        let files = ranges.iter().map(|(file, _)| file.clone()).collect();
        Ok((RecordSlices::new(format, ranges), files))
    }

    /// The files [`slice`](Self::slice) reads, in order, each with the range of its records
    /// read.
    fn slice_ranges(&self, spec: &str) -> Result<Vec<(PathBuf, Range<usize>)>> {
        let bad = |reason: String| Error::Config(format!("TFDS split {spec:?}: {reason}"));
        let parts = split_spec::parse(spec, &self.info).map_err(bad)?;
        let mut ranges: Vec<(PathBuf, Range<usize>)> = Vec::new();
        for part in parts {
            let files = self.split_files(&part.split)?;
            let split = self.info.split(&part.split).expect("parse found the split");
            let lengths = split.shard_lengths.iter().map(|length| length.0);
            let mut start = 0;
            for (file, length) in files.into_iter().zip(lengths) {
                let end = start + length;
                let (from, to) = (part.records.start.max(start), part.records.end.min(end));
                if from < to {
                    if ranges.iter().any(|(seen, _)| *seen == file) {
                        let name = file.display();
                        return Err(bad(format!("two of its parts read {name}")));
                    }
                    ranges.push((file, (from - start) as usize..(to - start) as usize));
                }
                start = end;
            }
        }
        if ranges.is_empty() {
            return Err(bad("it selects no record".into()));
        }
        Ok(ranges)
    }

    /// The format of its records: its image and label, labels checked against its classes.
    pub fn image_format(&self) -> TfdsImageFormat {
        TfdsImageFormat::new(&self.image_key, &self.label_key, self.num_classes)
    }
}

/// The most classes a label may have: a model's output layer is made that wide, so a count no
/// dataset has (ImageNet-21k's is 21,843) is refused before a model is.
const MAX_CLASSES: u64 = 1 << 24;

/// What is wrong with `key` as the `want` feature.
fn not_a(key: &str, want: &str, found: Option<&Feature>) -> String {
    match found {
        None => format!("no feature {key} (wanted its {want})"),
        Some(Feature::Other { class }) => format!("feature {key} is a {class}, not {want}"),
        Some(other) => format!("feature {key} is not {want} but {other:?}"),
    }
}

/// The supervised keys, or the one image and one class label.
fn default_keys(dir: &Path, info: &DatasetInfo, features: &Features) -> Result<(String, String)> {
    if let Some(keys) = info.supervised_keys() {
        return Ok(keys);
    }
    let images = features.keys_where(|f| matches!(f, Feature::Image { .. }));
    let labels = features.keys_where(|f| matches!(f, Feature::ClassLabel { .. }));
    match (images.as_slice(), labels.as_slice()) {
        ([image], [label]) => Ok((image.to_string(), label.to_string())),
        _ => Err(Error::File {
            path: dir.join(super::features::FILE_NAME),
            reason: format!(
                "no supervised keys, and not one image and one class label to take instead \
                 (images: [{}], class labels: [{}]): pick them with TfdsDataset::with_keys",
                images.join(", "),
                labels.join(", ")
            ),
        }),
    }
}

/// What a search for a dataset makes of TFDS's `data_dir`, a folder of datasets.
#[derive(Clone, Copy, PartialEq, Eq)]
enum DataDir {
    /// An error listing its datasets, to name one.
    Named,
    /// No dataset.
    Passed,
}

/// The version folder `path` is, or the newest in it (in its default or only config's folder);
/// `None` where `path` holds no dataset TFDS prepared.
fn version_dir(path: &Path, data_dir: DataDir) -> Result<Option<PathBuf>> {
    if path.join(info::FILE_NAME).is_file() {
        return Ok(Some(path.to_path_buf()));
    }
    if !path.is_dir() {
        return Err(Error::File {
            path: path.to_path_buf(),
            reason: "no such directory (expected a dataset TFDS prepared)".into(),
        });
    }
    if let Some(newest) = newest_version(path)? {
        return Ok(Some(newest));
    }
    // Folders with versions are a dataset's configs, or the datasets of TFDS's `data_dir`:
    // a config's versions name it as their config.
    let mut configs = Vec::new();
    let mut datasets = Vec::new();
    for folder in subfolders(path)? {
        let Ok(Some(version)) = newest_version(&folder) else {
            if subfolders(&folder)?.iter().any(|sub| has_versions(sub)) {
                datasets.push(folder); // A dataset with configs.
            }
            continue;
        };
        let info = DatasetInfo::read(&version).ok();
        let config = info.and_then(|info| info.config_name);
        match config.as_deref() == folder.file_name().and_then(|name| name.to_str()) {
            true => configs.push(folder),
            false => datasets.push(folder),
        }
    }
    let names = |folders: &[PathBuf]| -> Vec<String> {
        let names = folders.iter().filter_map(|f| f.file_name());
        let mut names: Vec<String> = names.map(|n| n.to_string_lossy().into_owned()).collect();
        names.sort();
        names
    };
    let default = default_config(path).map(|name| path.join(name));
    let chosen = match (default, configs.as_slice()) {
        (_, []) if datasets.is_empty() || data_dir == DataDir::Passed => return Ok(None),
        (_, []) => {
            return Err(Error::File {
                path: path.to_path_buf(),
                reason: format!(
                    "TFDS's data_dir, holding {:?}: name the dataset's folder",
                    names(&datasets)
                ),
            });
        }
        (Some(default), _) if configs.contains(&default) => default,
        (_, [only]) => only.clone(),
        _ => {
            return Err(Error::File {
                path: path.to_path_buf(),
                reason: format!("several configs prepared, name one: {:?}", names(&configs)),
            });
        }
    };
    newest_version(&chosen)
}

/// Whether `dir` holds a version folder.
fn has_versions(dir: &Path) -> bool {
    newest_version(dir).is_ok_and(|version| version.is_some())
}

/// The newest `X.Y.Z` folder of `dir` holding `dataset_info.json`; folders TFDS left
/// unfinished (`incomplete.*`) are not versions.
fn newest_version(dir: &Path) -> Result<Option<PathBuf>> {
    // By name first: a folder of many files (an image folder's class) costs no file's stat.
    let versions = entries(dir)?.into_iter().filter_map(|folder| {
        let name = folder.file_name()?.to_str()?;
        let parts: Vec<u64> = name
            .split('.')
            .map(|p| p.parse().ok())
            .collect::<Option<_>>()?;
        let complete = parts.len() == 3 && folder.join(info::FILE_NAME).is_file();
        complete.then_some((parts, folder))
    });
    Ok(versions.max().map(|(_, folder)| folder))
}

/// The folders in `dir`.
fn subfolders(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut folders = entries(dir)?;
    folders.retain(|path| path.is_dir());
    Ok(folders)
}

/// The paths of `dir`'s entries, whatever they are.
fn entries(dir: &Path) -> Result<Vec<PathBuf>> {
    let io = Error::io_at(dir);
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(&io)? {
        paths.push(entry.map_err(&io)?.path());
    }
    Ok(paths)
}

/// The default config TFDS recorded for the dataset folder `dir`, if any.
fn default_config(dir: &Path) -> Option<String> {
    let path = dir.join(".config/metadata.json");
    let json: serde_json::Value = info::read_json(&path).ok()?;
    Some(json.get("default_config_name")?.as_str()?.to_string())
}
