//! Datasets TensorFlow Datasets 4.9.10 prepared (scripts/tf_fixtures/tfds_prepared.py): TFDS's
//! own `cifar10` builder on a tiny download, and a `tf_flowers`-like builder of JPEGs with a
//! config, two versions and three shards, read as `tfds.load(..., shuffle_files=False)` read
//! them: each record's label, size and the sha256 of its decoded pixels, in order.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use burn::data::dataset::Dataset;
use sha2::{Digest, Sha256};
use towers_data::cifar10::{Cifar10Dir, Layout};
use towers_data::inception::ShardWriter;
use towers_data::tf_example::ImageRecord;
use towers_data::tfds::{TfdsDataset, TfdsImageFormat};
use towers_data::transforms::Identity;
use towers_data::{Example, HostBatch, Pipeline, PipelineConfig, RecordDataset, RecordFormat};
use towers_testing::{assert_error_names, report};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tfds")
}

/// One record as `tfds.load` read it: label, height, width, sha256 of the RGB bytes.
type Read = (i64, usize, usize, String);

/// What `tfds.load` read from `name`'s split (`cifar10-3.0.2-train`).
fn tfds_read(name: &str) -> Vec<Read> {
    let path = fixtures().join("expected").join(format!("{name}.tsv"));
    let text = std::fs::read_to_string(path).unwrap();
    let rows = text.lines().skip(1).map(|line| {
        let fields: Vec<&str> = line.split('\t').collect();
        let number = |i: usize| fields[i].parse::<usize>().unwrap();
        (
            number(0) as i64,
            number(1),
            number(2),
            fields[3].to_string(),
        )
    });
    rows.collect()
}

/// Every example of `files`, read as `tfds.load` reports them; `scale` takes a value back to
/// its byte (255 for images in [0, 1], 1 for CIFAR-10's 0..=255).
fn ours(format: Arc<dyn RecordFormat>, files: Vec<PathBuf>, scale: f32) -> Vec<Read> {
    let dataset = RecordDataset::open(format, files).unwrap();
    let read = |example: Example| {
        let [height, width, _] = example.image.shape();
        let bytes = example
            .image
            .data()
            .iter()
            .map(|v| (v * scale).round() as u8);
        let bytes: Vec<u8> = bytes.collect();
        let digest = format!("{:x}", Sha256::digest(&bytes));
        (example.label, height, width, digest)
    };
    (0..dataset.len())
        .map(|i| read(dataset.get(i).unwrap()))
        .collect()
}

fn split(dataset: &TfdsDataset, split: &str) -> Vec<Read> {
    let files = dataset.split_files(split).unwrap();
    ours(Arc::new(dataset.image_format()), files, 255.0)
}

#[test]
fn tfds_cifar10_reads_as_tfds_load_reads_it() {
    let cifar = TfdsDataset::load(&fixtures(), "cifar10").unwrap();
    assert_eq!(
        (cifar.name(), cifar.version(), cifar.config()),
        ("cifar10", "3.0.2", None)
    );
    assert_eq!(cifar.splits(), ["train", "test"]);
    assert_eq!((cifar.image_key(), cifar.label_key()), ("image", "label"));
    assert_eq!(
        (cifar.num_examples("train"), cifar.num_classes()),
        (Some(40), 10)
    );
    let names = cifar.class_names().unwrap().unwrap();
    assert_eq!(
        (names[0].as_str(), names[9].as_str()),
        ("airplane", "truck")
    );
    for name in ["train", "test"] {
        let theirs = tfds_read(&format!("cifar10-3.0.2-{name}"));
        assert_eq!(split(&cifar, name), theirs, "{name}");
    }
}

#[test]
fn cifar10_dir_takes_tfds_data_dir_with_the_tutorials_values() {
    for dir in [
        fixtures(),
        fixtures().join("cifar10"),
        fixtures().join("cifar10/3.0.2"),
    ] {
        let cifar = Cifar10Dir::find(&dir).unwrap();
        assert_eq!(cifar.layout(), Layout::Tfds);
        assert_eq!(cifar.dir(), fixtures().join("cifar10/3.0.2"));
        // Values 0..=255, as the binary layout's.
        let test = ours(cifar.format(), cifar.test_files().unwrap(), 1.0);
        assert_eq!(test, tfds_read("cifar10-3.0.2-test"));
        assert_eq!(cifar.train_files().unwrap().len(), 1);
    }
    let other = Cifar10Dir::find(&fixtures().join("tiny_flowers")).unwrap_err();
    let msg = report(&other);
    assert_error_names(
        &msg,
        &["1.1.0", "TFDS's tiny_flowers (3 classes), not cifar10"],
    );
}

#[test]
fn the_pipeline_reads_tfds_images_as_their_decoding_does() {
    let cifar = TfdsDataset::load(&fixtures(), "cifar10").unwrap();
    let format: Arc<dyn RecordFormat> = Arc::new(cifar.image_format());
    let files = cifar.split_files("test").unwrap();
    let config = PipelineConfig::eval(4);
    let pipeline = Pipeline::start(
        config,
        Arc::clone(&format),
        files.clone(),
        Arc::new(Identity),
    );
    let batches: Vec<HostBatch> = pipeline
        .unwrap()
        .collect::<towers_data::Result<_>>()
        .unwrap();
    let dataset = RecordDataset::open(format, files).unwrap();
    let decoded: Vec<Example> = (0..dataset.len())
        .map(|i| dataset.get(i).unwrap())
        .collect();
    let labels: Vec<i64> = batches.iter().flat_map(|b| b.labels().to_vec()).collect();
    assert_eq!(labels, decoded.iter().map(|e| e.label).collect::<Vec<_>>());
    let first = batches[0].images().to_vec();
    let planes = decoded[0].image.clone().into_chw();
    assert_eq!(first[..planes.len()], planes[..]);
}

#[test]
fn the_newest_version_of_the_default_config_is_taken() {
    let flowers = TfdsDataset::open(&fixtures().join("tiny_flowers")).unwrap();
    assert_eq!(
        (flowers.version(), flowers.config()),
        ("1.1.0", Some("small"))
    );
    assert_eq!(flowers.split_files("train").unwrap().len(), 3);
    let names = flowers.class_names().unwrap();
    assert_eq!(names.unwrap(), ["daisy", "rose", "tulip"]);
    for name in ["train", "validation"] {
        let theirs = tfds_read(&format!("tiny_flowers-small-1.1.0-{name}"));
        assert_eq!(split(&flowers, name), theirs, "{name}");
    }
    let msg = report(&TfdsDataset::open(&fixtures()).unwrap_err());
    assert_error_names(&msg, &["data_dir, holding [\"cifar10\", \"tiny_flowers\"]"]);
    let older = TfdsDataset::load(&fixtures(), "tiny_flowers/small:1.0.0").unwrap();
    assert_eq!(older.version(), "1.0.0");
    let theirs = tfds_read("tiny_flowers-small-1.0.0-train");
    assert_eq!(split(&older, "train"), theirs);
}

/// A copy of the tiny flowers' version 1.1.0 to break.
fn flowers_copy() -> (tempfile::TempDir, PathBuf) {
    let temp = tempfile::tempdir().unwrap();
    let from = fixtures().join("tiny_flowers/small/1.1.0");
    let to = temp.path().join("tiny_flowers/small/1.1.0");
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(&from).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
    }
    (temp, to)
}

/// `dir`'s JSON file `name` with `edit` applied.
fn edit_json(dir: &Path, name: &str, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = dir.join(name);
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut json);
    std::fs::write(path, serde_json::to_vec(&json).unwrap()).unwrap();
}

#[test]
fn a_missing_shard_or_split_is_named() {
    let (_temp, dir) = flowers_copy();
    let shard = dir.join("tiny_flowers-train.tfrecord-00001-of-00003");
    std::fs::remove_file(&shard).unwrap();
    let flowers = TfdsDataset::open(&dir).unwrap();
    let msg = report(&flowers.split_files("train").unwrap_err());
    assert_error_names(
        &msg,
        &[
            "tiny_flowers-train.tfrecord-00001-of-00003",
            "shard 1 of the 3",
        ],
    );
    let msg = report(&flowers.split_files("test").unwrap_err());
    assert_error_names(
        &msg,
        &[
            "dataset_info.json",
            "no split \"test\"",
            "train, validation",
        ],
    );
}

#[test]
fn a_label_past_the_classes_is_named_with_its_record() {
    let (_temp, dir) = flowers_copy();
    edit_json(&dir, "features.json", |json| {
        json["featuresDict"]["features"]["label"]["classLabel"]["numClasses"] = "2".into();
    });
    let flowers = TfdsDataset::open(&dir).unwrap();
    let msg = report(&flowers.class_names().unwrap_err());
    assert_error_names(
        &msg,
        &["label.labels.txt", "3 class names", "says 2 classes"],
    );
    let labels = tfds_read("tiny_flowers-small-1.1.0-train");
    let first_tulip = labels.iter().position(|read| read.0 == 2).unwrap();
    assert!(first_tulip < 8, "the first shard holds a label 2");
    let files = flowers.split_files("train").unwrap();
    let dataset = RecordDataset::open(Arc::new(flowers.image_format()), files);
    let msg = report(&dataset.unwrap().try_get(first_tulip).unwrap_err());
    let record = format!("record {first_tulip}");
    assert_error_names(
        &msg,
        &["00000-of-00003", &record, "label 2 out of range 0..2"],
    );
}

#[test]
fn formats_features_and_keys_tfds_has_but_not_for_us_are_refused() {
    let (_temp, dir) = flowers_copy();
    let flowers = TfdsDataset::open(&dir).unwrap();
    let msg = report(&flowers.clone().with_keys("file_name", "label").unwrap_err());
    assert_error_names(&msg, &["features.json", "file_name", "Text, not an Image"]);
    let msg = report(&flowers.with_keys("image", "nope").unwrap_err());
    assert_error_names(&msg, &["no feature nope", "ClassLabel"]);
    for count in ["0", "16777217"] {
        edit_json(&dir, "features.json", |json| {
            json["featuresDict"]["features"]["label"]["classLabel"]["numClasses"] = count.into();
        });
        let msg = report(&TfdsDataset::open(&dir).unwrap_err());
        let says = format!("class label label has {count} classes; 1 to 16777216");
        assert_error_names(&msg, &["features.json", &says]);
    }
    edit_json(&dir, "dataset_info.json", |json| {
        json["fileFormat"] = "array_record".into();
    });
    let msg = report(&TfdsDataset::open(&dir).unwrap_err());
    assert_error_names(
        &msg,
        &[
            "dataset_info.json",
            "array_record",
            "file_format='tfrecord'",
        ],
    );
}

#[test]
fn without_supervised_keys_the_one_image_and_label_are_taken_or_the_choice_asked() {
    let (_temp, dir) = flowers_copy();
    edit_json(&dir, "dataset_info.json", |json| {
        json.as_object_mut().unwrap().remove("supervisedKeys");
    });
    let flowers = TfdsDataset::open(&dir).unwrap();
    assert_eq!(
        (flowers.image_key(), flowers.label_key()),
        ("image", "label")
    );
    edit_json(&dir, "features.json", |json| {
        let features = &mut json["featuresDict"]["features"];
        features["coarse"] = features["label"].clone();
    });
    let msg = report(&TfdsDataset::open(&dir).unwrap_err());
    assert_error_names(
        &msg,
        &["class labels: [coarse, label]", "TfdsDataset::with_keys"],
    );
}

#[test]
fn unfinished_preparations_and_huge_metadata_are_not_read() {
    let temp = tempfile::tempdir().unwrap();
    let unfinished = temp.path().join("ds/incomplete.X7Q2_1.0.0");
    std::fs::create_dir_all(&unfinished).unwrap();
    std::fs::write(unfinished.join("dataset_info.json"), "{}").unwrap();
    let msg = report(&TfdsDataset::open(&temp.path().join("ds")).unwrap_err());
    assert_error_names(&msg, &["no dataset TFDS prepared here"]);
    for name in ["../ds", "/etc", "", "./ds"] {
        let msg = report(&TfdsDataset::load(temp.path(), name).unwrap_err());
        assert_error_names(&msg, &["is not a TFDS dataset name"]);
    }
    let (_copy, dir) = flowers_copy();
    let info = std::fs::File::options()
        .write(true)
        .open(dir.join("dataset_info.json"));
    info.unwrap().set_len(65 << 20).unwrap();
    let msg = report(&TfdsDataset::open(&dir).unwrap_err());
    assert_error_names(
        &msg,
        &["dataset_info.json", "larger than any TFDS metadata file"],
    );
}

#[test]
fn a_record_without_the_image_key_names_the_keys_it_has() {
    let temp = tempfile::tempdir().unwrap();
    let mut writer = ShardWriter::create(temp.path(), "train", 1, 1).unwrap();
    let record = ImageRecord {
        encoded: vec![1, 2, 3],
        label: 1,
        ..ImageRecord::default()
    };
    writer.write(&record).unwrap();
    let files = writer.finish().unwrap();
    let format = TfdsImageFormat::new("image", "label", 3);
    let dataset = RecordDataset::open(Arc::new(format), files).unwrap();
    let msg = report(&dataset.try_get(0).unwrap_err());
    assert_error_names(
        &msg,
        &[
            "record 0",
            "missing key image (the example has: ",
            "image/encoded",
        ],
    );
}

/// What `tfds.load(..., split=SPEC)` read of the tiny flowers: per spec and version, each
/// record's label and the sha256 of its pixels, in order.
fn tfds_slices() -> Vec<(String, String, i64, String)> {
    let text = std::fs::read_to_string(fixtures().join("expected/slices.tsv")).unwrap();
    let rows = text.lines().skip(1).map(|line| {
        let fields: Vec<&str> = line.split('\t').collect();
        let label = fields[2].parse().unwrap();
        (fields[0].into(), fields[1].into(), label, fields[3].into())
    });
    rows.collect()
}

#[test]
fn split_specs_read_as_tfds_load_reads_them() {
    let rows = tfds_slices();
    let mut specs: Vec<(&str, &str)> = rows.iter().map(|r| (&r.0[..], &r.1[..])).collect();
    specs.dedup();
    assert_eq!(specs.len(), 8, "the fixture's specs");
    for (spec, version) in specs {
        let name = format!("tiny_flowers/small:{version}");
        let flowers = TfdsDataset::load(&fixtures(), &name).unwrap();
        let (format, files) = flowers.slice(spec).unwrap();
        let read: Vec<(i64, String)> = ours(Arc::new(format), files, 255.0)
            .into_iter()
            .map(|(label, _, _, sha)| (label, sha))
            .collect();
        let theirs: Vec<(i64, String)> = rows
            .iter()
            .filter(|r| r.0 == spec && r.1 == version)
            .map(|r| (r.2, r.3.clone()))
            .collect();
        assert_eq!(read, theirs, "{spec} of {version}");
    }
}

#[test]
fn a_slice_names_records_by_their_place_in_the_file_and_a_short_shard() {
    let (_temp, dir) = flowers_copy();
    edit_json(&dir, "features.json", |json| {
        json["featuresDict"]["features"]["label"]["classLabel"]["numClasses"] = "2".into();
    });
    let flowers = TfdsDataset::open(&dir).unwrap();
    let labels = tfds_read("tiny_flowers-small-1.1.0-train");
    let tulip = 8 + labels[8..16].iter().position(|read| read.0 == 2).unwrap();
    let spec = format!("train[{}:]", tulip);
    let (format, files) = flowers.slice(&spec).unwrap();
    let dataset = RecordDataset::open(Arc::new(format), files).unwrap();
    let msg = report(&dataset.try_get(0).unwrap_err());
    let record = format!("record {}", tulip - 8);
    assert_error_names(&msg, &["00001-of-00003", &record, "label 2 out of range"]);
    let msg = report(&flowers.slice("train[:10%]+train[1:2]").unwrap_err());
    assert_error_names(&msg, &["two of its parts read", "00000-of-00003"]);
    let msg = report(&flowers.slice("train[3:3]").unwrap_err());
    assert_error_names(&msg, &["train[3:3]", "selects no record"]);
    // A shard cut at a record's end: fewer records than dataset_info.json counts.
    let shard = dir.join("tiny_flowers-train.tfrecord-00002-of-00003");
    let spans = towers_data::tfrecord::index(&shard).unwrap();
    let cut = spans[7].offset - 12;
    std::fs::File::options()
        .write(true)
        .open(&shard)
        .unwrap()
        .set_len(cut)
        .unwrap();
    let (format, files) = flowers.slice("train[-2:]").unwrap();
    let msg = report(&RecordDataset::open(Arc::new(format), files).unwrap_err());
    assert_error_names(&msg, &["00002-of-00003", "holds 7 records", "records 6..8"]);
}

/// A compressed shard's records would be indexed in its decompressed copy, which a slice's
/// ranges do not name: refused, where reading the whole file reads it.
#[test]
fn a_compressed_shard_is_read_whole_but_not_sliced() {
    use std::io::Write;
    let (_temp, dir) = flowers_copy();
    let shard = dir.join("tiny_flowers-train.tfrecord-00000-of-00003");
    let plain = std::fs::read(&shard).unwrap();
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gzip.write_all(&plain).unwrap();
    std::fs::write(&shard, gzip.finish().unwrap()).unwrap();
    let flowers = TfdsDataset::open(&dir).unwrap();
    let whole = split(&flowers, "train");
    assert_eq!(whole, tfds_read("tiny_flowers-small-1.1.0-train"));
    let (format, files) = flowers.slice("train[:3]").unwrap();
    let msg = report(&RecordDataset::open(Arc::new(format), files).unwrap_err());
    assert_error_names(
        &msg,
        &["00000-of-00003", "GZIP data", "decompress it first"],
    );
}
