//! `dataset_info.json`: what TFDS says of a prepared dataset (its name, version, file format and
//! splits with their shards), as `tfds.core.DatasetInfo` writes it: the `DatasetInfo` proto in
//! proto3's JSON form, where 64-bit integers are strings (`"shardLengths": ["50000"]`).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{Error, Result};

/// The name of the file in a prepared dataset's folder.
pub(super) const FILE_NAME: &str = "dataset_info.json";

/// The file TFDS writes when no split says otherwise (`naming.DEFAULT_FILENAME_TEMPLATE`).
const DEFAULT_TEMPLATE: &str = "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}";

/// The most shards a split may list: TFDS's largest datasets have a few thousand a split; a
/// count far over that (`"numShards": "18446744073709551615"`) would name paths without end.
const MAX_SHARDS: usize = 1 << 20;

/// The largest JSON file read: real ones are kilobytes (ImageNet's, with its statistics, about
/// 100 KB); a file far larger is not TFDS's, and is refused before it is read.
const MAX_JSON_BYTES: u64 = 64 << 20;

/// The parts of `dataset_info.json` a reader needs.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct DatasetInfo {
    pub name: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub config_name: Option<String>,
    /// `tfrecord` when absent (older TFDS wrote none: it wrote only TFRecords).
    #[serde(default)]
    pub file_format: Option<String>,
    #[serde(default)]
    pub splits: Vec<SplitInfo>,
    /// The `(input, output)` features of `as_supervised=True`.
    #[serde(default)]
    pub supervised_keys: Option<serde_json::Value>,
}

/// One split and its shards.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SplitInfo {
    pub name: String,
    /// Records per shard, in shard order.
    #[serde(default)]
    pub shard_lengths: Vec<ProtoInt>,
    /// Shards, where an old file gives no lengths.
    #[serde(default)]
    pub num_shards: Option<ProtoInt>,
    #[serde(default)]
    pub filepath_template: Option<String>,
}

/// A proto3 JSON 64-bit integer: a string, or a number from a hand-written file.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(try_from = "serde_json::Value")]
pub(super) struct ProtoInt(pub u64);

impl TryFrom<serde_json::Value> for ProtoInt {
    type Error = String;

    fn try_from(value: serde_json::Value) -> Result<Self, String> {
        let parsed = match &value {
            serde_json::Value::String(text) => text.parse().ok(),
            serde_json::Value::Number(number) => number.as_u64(),
            _ => None,
        };
        parsed
            .map(ProtoInt)
            .ok_or_else(|| format!("{value} is not a count"))
    }
}

impl DatasetInfo {
    /// Reads `dir`'s `dataset_info.json`.
    pub(super) fn read(dir: &Path) -> Result<Self> {
        let path = dir.join(FILE_NAME);
        let info: Self = read_json(&path)?;
        if let Some(format) = info.file_format.as_deref().filter(|f| *f != "tfrecord") {
            return Err(Error::File {
                path,
                reason: format!(
                    "the dataset was prepared as {format} files; only TFRecord files are read \
                     (prepare it with file_format='tfrecord', TFDS's default)"
                ),
            });
        }
        Ok(info)
    }

    /// The split named `name`.
    pub(super) fn split(&self, name: &str) -> Option<&SplitInfo> {
        self.splits.iter().find(|split| split.name == name)
    }

    /// The names of the splits, in the file's order.
    pub(super) fn split_names(&self) -> Vec<&str> {
        self.splits
            .iter()
            .map(|split| split.name.as_str())
            .collect()
    }

    /// The `(image, label)` feature keys of `as_supervised=True`, in either form TFDS wrote:
    /// `{"tuple": {"items": [{"featureKey": ..}, ..]}}` (4.6 on) or `{"input": .., "output": ..}`.
    pub(super) fn supervised_keys(&self) -> Option<(String, String)> {
        let keys = self.supervised_keys.as_ref()?;
        let text = |value: &serde_json::Value| value.as_str().map(str::to_string);
        if let (Some(input), Some(output)) = (keys.get("input"), keys.get("output")) {
            return Some((text(input)?, text(output)?));
        }
        let items = keys.get("tuple")?.get("items")?.as_array()?;
        match items.as_slice() {
            [input, output] => Some((
                text(input.get("featureKey")?)?,
                text(output.get("featureKey")?)?,
            )),
            _ => None,
        }
    }
}

impl SplitInfo {
    /// How many shards the split has.
    pub(super) fn shard_count(&self) -> usize {
        match (self.shard_lengths.len(), self.num_shards) {
            (0, Some(ProtoInt(count))) => count as usize,
            (lengths, _) => lengths,
        }
    }

    /// Its records, where the file counts them.
    pub(super) fn num_examples(&self) -> Option<u64> {
        let lengths = self.shard_lengths.iter().map(|length| length.0);
        (!self.shard_lengths.is_empty()).then(|| lengths.sum())
    }

    /// The path of each shard in `dir`, in shard order, as TFDS names them
    /// (`naming.ShardedFileTemplate`): the split's template (TFDS's default where there is
    /// none) with the dataset's name, the split's, `tfrecord`, and shard numbers of at least 5
    /// digits.
    pub(super) fn shard_paths(&self, dir: &Path, dataset: &str) -> Result<Vec<PathBuf>> {
        let template = self
            .filepath_template
            .as_deref()
            .unwrap_or(DEFAULT_TEMPLATE);
        let count = self.shard_count();
        if count > MAX_SHARDS {
            return Err(Error::File {
                path: dir.join(FILE_NAME),
                reason: format!(
                    "split {} claims {count} shards; at most {MAX_SHARDS} are read",
                    self.name
                ),
            });
        }
        let digits = count.to_string().len().max(5);
        (0..count)
            .map(|index| {
                let index = format!("{index:0digits$}");
                let total = format!("{count:0digits$}");
                let values = [
                    ("DATASET", dataset.to_string()),
                    ("SPLIT", self.name.clone()),
                    ("FILEFORMAT", "tfrecord".to_string()),
                    ("SHARD_INDEX", index.clone()),
                    ("NUM_SHARDS", total.clone()),
                    ("SHARD_X_OF_Y", format!("{index}-of-{total}")),
                ];
                let name = fill_template(template, &values).map_err(|reason| Error::File {
                    path: dir.join(FILE_NAME),
                    reason: format!("split {}: {reason}", self.name),
                })?;
                Ok(dir.join(name))
            })
            .collect()
    }
}

/// `template` with each `{NAME}` replaced by its value: an unknown name, a brace left open or
/// a path that would leave the dataset's folder is an error.
fn fill_template(template: &str, values: &[(&str, String)]) -> Result<String, String> {
    let mut filled = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        filled.push_str(&rest[..open]);
        let close = rest[open..]
            .find('}')
            .ok_or_else(|| format!("filepathTemplate {template:?} leaves a brace open"))?;
        let name = &rest[open + 1..open + close];
        let value = values.iter().find(|(key, _)| *key == name).ok_or_else(|| {
            format!("filepathTemplate {template:?} names {{{name}}}, which TFDS does not fill")
        })?;
        filled.push_str(&value.1);
        rest = &rest[open + close + 1..];
    }
    filled.push_str(rest);
    match !stays_below(&filled) {
        true => Err(format!(
            "filepathTemplate {template:?} names {filled:?}, outside the dataset's folder"
        )),
        false => Ok(filled),
    }
}

/// Whether the relative path `path` names something below the folder it is joined to: no root,
/// no `..`, no `.` (a file name from metadata or a user never leaves the dataset's folder).
pub(super) fn stays_below(path: &str) -> bool {
    let mut parts = Path::new(path).components();
    parts.all(|part| matches!(part, std::path::Component::Normal(_)))
}

/// Reads the JSON file `path` into `T`, refusing one over [`MAX_JSON_BYTES`].
pub(super) fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text = read_metadata(path)?;
    serde_json::from_slice(&text).map_err(|error| Error::File {
        path: path.to_path_buf(),
        reason: format!("not TFDS's JSON: {error}"),
    })
}

/// The bytes of the metadata file `path`, refusing one over [`MAX_JSON_BYTES`] unread.
pub(super) fn read_metadata(path: &Path) -> Result<Vec<u8>> {
    let size = std::fs::metadata(path).map_err(Error::io_at(path))?.len();
    if size > MAX_JSON_BYTES {
        return Err(Error::File {
            path: path.to_path_buf(),
            reason: format!(
                "{size} bytes: larger than any TFDS metadata file (at most {MAX_JSON_BYTES} read)"
            ),
        });
    }
    std::fs::read(path).map_err(Error::io_at(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(template: Option<&str>, lengths: &[u64]) -> SplitInfo {
        SplitInfo {
            name: "train".into(),
            shard_lengths: lengths.iter().map(|&n| ProtoInt(n)).collect(),
            num_shards: None,
            filepath_template: template.map(str::to_string),
        }
    }

    #[test]
    fn shards_are_named_as_tfds_names_them() {
        let names = |split: &SplitInfo| -> Vec<String> {
            let paths = split.shard_paths(Path::new(""), "mnist").unwrap();
            paths.iter().map(|p| p.display().to_string()).collect()
        };
        assert_eq!(
            names(&split(None, &[5, 5])),
            [
                "mnist-train.tfrecord-00000-of-00002",
                "mnist-train.tfrecord-00001-of-00002"
            ]
        );
        // TFDS widens the numbers past 5 digits when the count needs it.
        let wide = names(&split(None, &[1; 123_456]));
        assert_eq!(wide[7], "mnist-train.tfrecord-000007-of-123456");
        let custom = split(Some("{SPLIT}/data.{FILEFORMAT}-{SHARD_INDEX}"), &[1, 1, 1]);
        assert_eq!(names(&custom)[2], "train/data.tfrecord-00002");
    }

    #[test]
    fn a_template_tfds_would_not_fill_is_named() {
        let dir = Path::new("/data/mnist/3.0.1");
        for (template, says) in [
            ("{DATASET}-{SHARD}", "names {SHARD}"),
            ("{DATASET-{SPLIT}", "names {DATASET-{SPLIT}"),
            ("{SPLIT}-{SHARD_INDEX", "leaves a brace open"),
            ("../{SPLIT}-{SHARD_INDEX}", "outside the dataset's folder"),
            ("/etc/{SHARD_INDEX}", "outside the dataset's folder"),
        ] {
            let error = split(Some(template), &[1]).shard_paths(dir, "mnist");
            let message = error.unwrap_err().to_string();
            assert!(message.contains(says), "{template}: {message}");
            assert!(
                message.contains("dataset_info.json: split train"),
                "{message}"
            );
        }
    }

    #[test]
    fn counts_are_read_as_strings_or_numbers() {
        let info: SplitInfo =
            serde_json::from_str(r#"{"name": "test", "shardLengths": ["3", 4], "numBytes": "10"}"#)
                .unwrap();
        assert_eq!((info.shard_count(), info.num_examples()), (2, Some(7)));
        let old: SplitInfo = serde_json::from_str(r#"{"name": "test", "numShards": "3"}"#).unwrap();
        assert_eq!((old.shard_count(), old.num_examples()), (3, None));
        let endless = r#"{"name": "test", "numShards": "18446744073709551615"}"#;
        let endless: SplitInfo = serde_json::from_str(endless).unwrap();
        let error = endless
            .shard_paths(Path::new("d"), "x")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("claims 18446744073709551615 shards"),
            "{error}"
        );
        let bad = serde_json::from_str::<SplitInfo>(r#"{"name": "t", "shardLengths": ["-1"]}"#);
        assert!(
            bad.unwrap_err()
                .to_string()
                .contains("\"-1\" is not a count")
        );
    }

    #[test]
    fn supervised_keys_are_read_in_both_forms() {
        let info = |keys: &str| DatasetInfo {
            name: "d".into(),
            version: String::new(),
            config_name: None,
            file_format: None,
            splits: Vec::new(),
            supervised_keys: Some(serde_json::from_str(keys).unwrap()),
        };
        let new = r#"{"tuple": {"items": [{"featureKey": "img"}, {"featureKey": "y"}]}}"#;
        let pair = Some(("img".to_string(), "y".to_string()));
        assert_eq!(info(new).supervised_keys(), pair);
        assert_eq!(
            info(r#"{"input": "img", "output": "y"}"#).supervised_keys(),
            pair
        );
        assert_eq!(info(r#"{"dict": {}}"#).supervised_keys(), None);
    }
}
