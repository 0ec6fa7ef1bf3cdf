//! Datasets TensorFlow Datasets prepared: `dataset_info.json` and `features.json` as TFDS 4.9.10
//! wrote them (`crates/data/tests/data/tfds`), mutated, each opened beside the other's real
//! file and the real shards: the split's shards stay in the dataset's folder, and what a record
//! decodes to is a label within the classes.

use std::path::{Path, PathBuf};

use burn_towers::data::RecordFormat;
use burn_towers::data::tfds::TfdsDataset;
use burn_towers::data::tfrecord;

use crate::fuzz;
use crate::mutate::mutated;

/// The real version folders whose metadata seed the target.
fn fixture_versions() -> [PathBuf; 2] {
    let tfds = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/data/tests/data/tfds");
    [
        tfds.join("cifar10/3.0.2"),
        tfds.join("tiny_flowers/small/1.1.0"),
    ]
}

/// A copy of the tiny flowers' version folder, whose `name` file each input replaces.
fn copy_of_flowers(into: &Path) -> PathBuf {
    let [_, flowers] = fixture_versions();
    std::fs::create_dir_all(into).unwrap();
    for entry in std::fs::read_dir(&flowers).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, into.join(path.file_name().unwrap())).unwrap();
    }
    into.to_path_buf()
}

/// Opens the dataset in `dir` and reads the first record of each of its splits' shards.
fn open_and_read(dir: &Path) -> bool {
    let Ok(dataset) = TfdsDataset::open(dir) else {
        return false;
    };
    let _ = dataset.class_names();
    let format = dataset.image_format();
    for split in dataset.splits() {
        let Ok(files) = dataset.split_files(split) else {
            continue;
        };
        for file in files {
            assert!(
                file.starts_with(dir),
                "{} outside {}",
                file.display(),
                dir.display()
            );
            let Ok(spans) = tfrecord::index(&file) else {
                continue;
            };
            let bytes = std::fs::read(&file).unwrap();
            let first = &bytes[spans[0].offset as usize..][..spans[0].len];
            if let Ok(example) = format.decode(&file, 0, first) {
                assert!((0..dataset.num_classes() as i64).contains(&example.label));
            }
        }
    }
    true
}

#[test]
fn fuzz_tfds_metadata() {
    let seeds: Vec<Vec<u8>> = fixture_versions()
        .iter()
        .flat_map(|dir| ["dataset_info.json", "features.json"].map(|f| dir.join(f)))
        .map(|path| std::fs::read(path).unwrap())
        .collect();
    let temp = tempfile::tempdir().unwrap();
    let dirs = ["dataset_info.json", "features.json"].map(|name| {
        let dir = copy_of_flowers(&temp.path().join(name));
        (dir, name)
    });
    fuzz("tfds metadata", mutated(seeds), |bytes| {
        let mut accepted = false;
        for (dir, name) in &dirs {
            let real = std::fs::read(fixture_versions()[1].join(name)).unwrap();
            std::fs::write(dir.join(name), &bytes).unwrap();
            accepted |= open_and_read(dir);
            std::fs::write(dir.join(name), real).unwrap();
        }
        accepted
    });
}
