//! ImageNet as TF's Inception trainer reads it: TFRecord shards (`train-00000-of-01024`,
//! `validation-00000-of-00128`) of `tf.train.Example`s with JPEG images, labels `1..=1000`
//! (0 is the background class, so 1001 outputs) and object boxes.
//!
//! - [`TfExampleFormat`]: the [`RecordFormat`](crate::RecordFormat) of those shards.
//! - [`train_files`] / [`validation_files`]: a folder's shards, checked.
//! - [`ShardWriter`]: writes shards in the same layout; [`BuiltinShards`] fills a temporary
//!   folder with synthetic JPEG examples (the `inception` example's built-in data).
//! - The preprocessing is [`InceptionTrain`](crate::transforms::InceptionTrain) /
//!   [`InceptionEval`](crate::transforms::InceptionEval).

use std::path::{Path, PathBuf};

use burn::config::Config;
use rand::{RngExt, SeedableRng};

use crate::atomic_file::AtomicFile;
use crate::bounding_box::BoundingBox;
use crate::codec::encode_jpeg;
use crate::error::{Error, Result};
use crate::format::record_error;
use crate::format::record_format::{EncodedRecord, checked_label, tfrecord_of_encoded_images};
use crate::format::synthetic::{BuiltinDir, ClassLook, synthetic_image};
use crate::format::tf_example::ImageRecord;
use crate::format::tfrecord::{self, TfRecordWriter};
use crate::rng::Rng;

/// Reads TFRecord shards of image `tf.train.Example`s; images come out RGB in [0, 1].
#[derive(Debug, Clone, Copy)]
pub struct TfExampleFormat {
    num_classes: usize,
    label_offset: i64,
}

impl TfExampleFormat {
    /// Labels must fall in `0..num_classes` (1001 for TF's ImageNet layout).
    pub fn new(num_classes: usize) -> Self {
        Self {
            num_classes,
            label_offset: 0,
        }
    }

    /// Adds `offset` to every stored label before the range check: `-1` maps TF's
    /// `1..=1000` to `0..1000` for a 1000-class model.
    pub fn with_label_offset(self, offset: i64) -> Self {
        Self {
            label_offset: offset,
            ..self
        }
    }
}

impl TfExampleFormat {
    /// The record's Example, its label offset and checked.
    fn encoded_record(&self, path: &Path, record: usize, bytes: &[u8]) -> Result<EncodedRecord> {
        let data = tfrecord::record_data(path, record, bytes)?;
        let parsed =
            ImageRecord::parse(data).map_err(|reason| record_error(path, record, reason))?;
        let offset = self.label_offset;
        let label = checked_label(path, record, parsed.label, offset, self.num_classes)?;
        Ok(EncodedRecord {
            encoded: parsed.encoded,
            label,
            boxes: parsed.boxes,
        })
    }
}

tfrecord_of_encoded_images!(TfExampleFormat);

/// The name of shard `index` of `count`: `{prefix}-{index:05}-of-{count:05}`.
pub fn shard_name(prefix: &str, index: usize, count: usize) -> String {
    format!("{prefix}-{index:05}-of-{count:05}")
}

/// The `train-*-of-*` shards of `dir`, in name order.
pub fn train_files(dir: &Path) -> Result<Vec<PathBuf>> {
    shards(dir, "train")
}

/// The `validation-*-of-*` shards of `dir`, in name order.
pub fn validation_files(dir: &Path) -> Result<Vec<PathBuf>> {
    shards(dir, "validation")
}

fn shards(dir: &Path, prefix: &str) -> Result<Vec<PathBuf>> {
    let io = Error::io_at(dir);
    if !dir.is_dir() {
        return Err(Error::File {
            path: dir.to_path_buf(),
            reason: "no such directory (expected TFRecord shards)".into(),
        });
    }
    let pattern = format!("{prefix}-");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(&io)? {
        let path = entry.map_err(&io)?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        // Shards being written have hidden temporary names (see AtomicFile): never listed.
        if name.starts_with(&pattern) && name.contains("-of-") {
            files.push(path);
        }
    }
    if files.is_empty() {
        return Err(Error::File {
            path: dir.to_path_buf(),
            reason: format!("no {prefix}-XXXXX-of-YYYYY shards"),
        });
    }
    files.sort();
    Ok(files)
}

/// Writes examples into `count` shards of consecutive records, as TF's converter does. Each
/// shard is an [`AtomicFile`]: written under a temporary name and renamed when complete, so a
/// crash never leaves a half-written shard under a real name.
pub struct ShardWriter {
    dir: PathBuf,
    prefix: String,
    count: usize,
    per_shard: usize,
    written: usize,
    current: Option<(PathBuf, TfRecordWriter<AtomicFile>)>,
    finished: Vec<PathBuf>,
}

impl ShardWriter {
    /// A writer of `total` examples into `count` shards named `{prefix}-XXXXX-of-YYYYY` in
    /// `dir` (created if missing).
    pub fn create(dir: &Path, prefix: &str, count: usize, total: usize) -> Result<Self> {
        if count == 0 || total < count {
            return Err(Error::Config(format!(
                "cannot write {total} examples into {count} shards"
            )));
        }
        std::fs::create_dir_all(dir).map_err(Error::io_at(dir))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            prefix: prefix.to_string(),
            count,
            per_shard: total.div_ceil(count),
            written: 0,
            current: None,
            finished: Vec::new(),
        })
    }

    /// Appends one example to the current shard, starting the next shard when it is full.
    pub fn write(&mut self, record: &ImageRecord) -> Result<()> {
        let shard = self.written / self.per_shard;
        if shard >= self.count {
            return Err(Error::Config(format!(
                "more examples than the {} declared",
                self.count * self.per_shard
            )));
        }
        if self.finished.len() < shard {
            self.finish_current()?;
        }
        if self.current.is_none() {
            let path = self.dir.join(shard_name(&self.prefix, shard, self.count));
            let file = AtomicFile::create(&path).map_err(Error::io_at(&path))?;
            self.current = Some((path, TfRecordWriter::new(file)));
        }
        let (path, writer) = self.current.as_mut().expect("opened above");
        writer.write(&record.encode()).map_err(Error::io_at(path))?;
        self.written += 1;
        Ok(())
    }

    fn finish_current(&mut self) -> Result<()> {
        if let Some((path, writer)) = self.current.take() {
            let file = writer.into_inner().map_err(Error::io_at(&path))?;
            file.commit().map_err(Error::io_at(&path))?;
            self.finished.push(path);
        }
        Ok(())
    }

    /// Completes the last shard and returns the paths of all shards written.
    pub fn finish(mut self) -> Result<Vec<PathBuf>> {
        self.finish_current()?;
        Ok(self.finished)
    }
}

/// Sizes of a [`BuiltinShards`] dataset: [`new`](Self::new) with the classes and image size,
/// `with_*` for the rest, as Burn's configs.
#[derive(Config, Debug, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct BuiltinShardsConfig {
    /// Classes; labels are written `1..=num_classes` (TF's layout: a model needs
    /// `num_classes + 1` outputs, or a label offset of -1).
    pub num_classes: usize,
    /// Training shards and examples in each.
    #[config(default = 4)]
    pub train_shards: usize,
    /// Validation shards.
    #[config(default = 1)]
    pub validation_shards: usize,
    /// Examples per shard.
    #[config(default = 128)]
    pub per_shard: usize,
    /// Typical side of the stored JPEGs; each image's sides vary from 3/4 to 5/4 of it.
    pub image_size: usize,
    /// Seed of the images.
    #[config(default = 1)]
    pub seed: u64,
}

/// A synthetic ImageNet-layout dataset in a temporary folder, deleted on drop (and by a second
/// Ctrl-C's exit): JPEG examples with a class pattern inside an object box (also stored as the
/// example's box), in `train-*` and `validation-*` shards read back through
/// [`TfExampleFormat`].
#[derive(Debug)]
pub struct BuiltinShards {
    dir: BuiltinDir,
}

impl BuiltinShards {
    /// Writes the dataset.
    pub fn create(config: BuiltinShardsConfig) -> Result<Self> {
        let dir = BuiltinDir::create("towers-imagenet-")?;
        let mut rng = Rng::seed_from_u64(config.seed);
        for (prefix, shards) in [
            ("train", config.train_shards),
            ("validation", config.validation_shards),
        ] {
            let total = shards * config.per_shard;
            let mut writer = ShardWriter::create(dir.path(), prefix, shards, total)?;
            for i in 0..total {
                writer.write(&synthetic_record(i % config.num_classes, &config, &mut rng))?;
            }
            writer.finish()?;
        }
        Ok(Self { dir })
    }

    /// The folder of shards.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

fn synthetic_record(class: usize, config: &BuiltinShardsConfig, rng: &mut Rng) -> ImageRecord {
    let side = |rng: &mut Rng| {
        rng.random_range(config.image_size * 3 / 4..=config.image_size * 5 / 4)
            .max(8)
    };
    let (height, width) = (side(rng), side(rng));
    let corner = |rng: &mut Rng| rng.random_range(0.0f32..0.4);
    let (top, left) = (corner(rng), corner(rng));
    let object = BoundingBox {
        ymin: top,
        xmin: left,
        ymax: top + rng.random_range(0.5f32..=0.6),
        xmax: left + rng.random_range(0.5f32..=0.6),
    };
    let look = ClassLook::distortion_proof(class, config.num_classes);
    let image = synthetic_image(look, height, width, object, rng);
    ImageRecord {
        encoded: encode_jpeg(&image, 90),
        label: class as i64 + 1,
        text: Some(format!("class {class}")),
        boxes: vec![object],
        height: Some(height as i64),
        width: Some(width as i64),
        filename: Some(format!(
            "synthetic_{class}_{:08x}.JPEG",
            rng.random::<u32>()
        )),
    }
}

#[cfg(test)]
mod tests {
    use towers_testing::{assert_error_names, report};

    use super::*;
    use crate::format::RecordFormat;

    fn small() -> BuiltinShardsConfig {
        BuiltinShardsConfig::new(3, 24)
            .with_train_shards(2)
            .with_per_shard(5)
    }

    #[test]
    fn builtin_shards_read_back_through_the_format() {
        let data = BuiltinShards::create(small()).unwrap();
        let files = train_files(data.dir()).unwrap();
        let names: Vec<_> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_str().unwrap().to_string())
            .collect();
        assert_eq!(names, ["train-00000-of-00002", "train-00001-of-00002"]);
        assert_eq!(validation_files(data.dir()).unwrap().len(), 1);
        let format = TfExampleFormat::new(4);
        let spans = format.index(&files[1]).unwrap();
        assert_eq!(spans.len(), 5);
        let bytes = std::fs::read(&files[1]).unwrap();
        let labels: Vec<i64> = spans
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let ex = format
                    .decode(&files[1], i, &bytes[s.offset as usize..][..s.len])
                    .unwrap();
                assert_eq!(ex.image.channels(), 3);
                assert!((18..=30).contains(&ex.image.height()));
                assert_eq!(ex.boxes.len(), 1);
                ex.label
            })
            .collect();
        // Records 5..10 of the classes in turn, stored 1-based.
        assert_eq!(labels, vec![3, 1, 2, 3, 1]);
    }

    fn shard_with(record: &ImageRecord) -> (tempfile::TempDir, PathBuf, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        let mut w = ShardWriter::create(dir.path(), "train", 1, 1).unwrap();
        w.write(record).unwrap();
        let path = w.finish().unwrap().remove(0);
        let bytes = std::fs::read(&path).unwrap();
        (dir, path, bytes[12..].to_vec())
    }

    #[test]
    fn corrupt_jpeg_and_bad_label_name_the_shard_and_record() {
        let image = crate::image::Image::from_hwc(vec![0.5; 8 * 8 * 3], 8, 8, 3);
        let good = ImageRecord {
            encoded: encode_jpeg(&image, 90),
            label: 5,
            ..Default::default()
        };
        let (_d, path, span) = shard_with(&good);
        assert_eq!(
            TfExampleFormat::new(6)
                .decode(&path, 0, &span)
                .unwrap()
                .label,
            5
        );
        assert_eq!(
            TfExampleFormat::new(6)
                .with_label_offset(-1)
                .decode(&path, 0, &span)
                .unwrap()
                .label,
            4
        );
        let msg = report(&TfExampleFormat::new(5).decode(&path, 0, &span).unwrap_err());
        assert_error_names(&msg, &["train-00000-of-00001", "record 0", "label 5"]);
        // A stored label at i64's end overflows with the offset: out of range, not a panic or
        // a wrapped label.
        let extreme = ImageRecord {
            label: i64::MIN,
            ..good.clone()
        };
        let (_d, path, span) = shard_with(&extreme);
        let error = TfExampleFormat::new(6)
            .with_label_offset(-1)
            .decode(&path, 0, &span)
            .unwrap_err();
        let msg = report(&error);
        assert_error_names(&msg, &["record 0", "out of range", &i64::MIN.to_string()]);

        let mut cut = good.clone();
        cut.encoded.truncate(cut.encoded.len() / 2);
        let (_d, path, span) = shard_with(&cut);
        let msg = report(&TfExampleFormat::new(6).decode(&path, 0, &span).unwrap_err());
        assert_error_names(&msg, &["train-00000-of-00001", "record 0", "corrupt image"]);
    }

    #[test]
    fn missing_folder_or_shards_are_named() {
        assert!(
            train_files(Path::new("/no/such/imagenet"))
                .unwrap_err()
                .to_string()
                .contains("no such directory")
        );
        let dir = tempfile::tempdir().unwrap();
        let msg = report(&validation_files(dir.path()).unwrap_err());
        assert_error_names(&msg, &["validation-XXXXX"]);
    }

    #[test]
    fn writer_splits_consecutive_records_and_leaves_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = ShardWriter::create(dir.path(), "validation", 3, 7).unwrap();
        for label in 0..7 {
            w.write(&ImageRecord {
                encoded: vec![1],
                label,
                ..Default::default()
            })
            .unwrap();
        }
        let paths = w.finish().unwrap();
        let counts: Vec<usize> = paths
            .iter()
            .map(|p| tfrecord::index(p).unwrap().len())
            .collect();
        assert_eq!(counts, vec![3, 3, 1]);
        // Exactly the three shards: no temporary file is left behind.
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "validation-00000-of-00003",
                "validation-00001-of-00003",
                "validation-00002-of-00003"
            ]
        );
    }
}
