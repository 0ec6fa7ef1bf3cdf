//! CIFAR-100 in its three layouts (scripts/torch_fixtures/cifar100.py): the same 28 images as
//! the binary layout, the python layout (Python 2's pickles) and TFDS's `cifar100` (TFDS
//! 4.9.10's own builder, run on the binary files), each read with its fine and its coarse
//! labels as torchvision 0.29's `CIFAR100`, Python's `pickle` and `tfds.load` read them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use burn::data::dataset::Dataset;
use sha2::{Digest, Sha256};
use towers_data::cifar10::{Cifar10Dir, Cifar10Format};
use towers_data::cifar100::{
    Cifar100Dir, Cifar100Format, Cifar100Labels, Cifar100PythonFormat, Layout,
};
use towers_data::{RecordDataset, RecordFormat};
use towers_testing::{assert_error_names, report};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/cifar100")
}

/// What the tools read from `name` (`train`, `tfds-test`): per image its fine label, its
/// coarse label and the sha256 of its RGB bytes.
fn tools_read(name: &str) -> Vec<(i64, i64, String)> {
    let text = std::fs::read_to_string(fixtures().join(format!("expected/{name}.tsv"))).unwrap();
    let rows = text.lines().skip(1).map(|line| {
        let fields: Vec<&str> = line.split('\t').collect();
        (
            fields[0].parse().unwrap(),
            fields[1].parse().unwrap(),
            fields[2].to_string(),
        )
    });
    rows.collect()
}

/// Each image of `files` in `format`: its label and the sha256 of its RGB bytes.
fn ours(format: Arc<dyn RecordFormat>, files: Vec<PathBuf>) -> Vec<(i64, String)> {
    let dataset = RecordDataset::open(format, files).unwrap();
    let read = |i| {
        let example = dataset.get(i).unwrap();
        assert_eq!(example.image.shape(), [32, 32, 3]);
        let bytes: Vec<u8> = example.image.data().iter().map(|&v| v as u8).collect();
        (example.label, format!("{:x}", Sha256::digest(&bytes)))
    };
    (0..dataset.len()).map(read).collect()
}

/// `dir`'s CIFAR-100, found in `layout`, reads as the tools read `expected` (`""` or `tfds-`)
/// with each of its labellings.
fn assert_reads_as_the_tools(dir: &Path, layout: Layout, expected: &str) {
    for labels in [Cifar100Labels::Fine, Cifar100Labels::Coarse] {
        let cifar = Cifar100Dir::find(dir, labels).unwrap();
        assert_eq!((cifar.layout(), cifar.labels()), (layout, labels));
        for (split, files) in [("train", cifar.train_files()), ("test", cifar.test_files())] {
            let theirs = tools_read(&format!("{expected}{split}"));
            let theirs: Vec<(i64, String)> = theirs
                .into_iter()
                .map(|(fine, coarse, sha)| match labels {
                    Cifar100Labels::Fine => (fine, sha),
                    _ => (coarse, sha),
                })
                .collect();
            assert_eq!(
                ours(cifar.format(), files.unwrap()),
                theirs,
                "{layout:?} {split}"
            );
        }
    }
}

#[test]
fn the_binary_layout_reads_as_tfds_builder_and_torchvision_read_the_images() {
    // The folder holding both published layouts: the binary one first.
    assert_reads_as_the_tools(&fixtures(), Layout::Binary, "");
    let cifar = Cifar100Dir::find(&fixtures(), Cifar100Labels::Fine).unwrap();
    assert_eq!(cifar.dir(), fixtures().join("cifar-100-binary"));
}

#[test]
fn the_python_layout_reads_as_torchvision_and_pickle_read_it() {
    assert_reads_as_the_tools(&fixtures().join("cifar-100-python"), Layout::Python, "");
}

#[test]
fn tfds_cifar100_reads_as_tfds_load_reads_it() {
    assert_reads_as_the_tools(&fixtures().join("tfds"), Layout::Tfds, "tfds-");
}

#[test]
fn files_of_the_other_cifar_are_named_as_such() {
    let train = fixtures().join("cifar-100-binary/train.bin");
    let msg = report(&Cifar10Format.index(&train).unwrap_err());
    assert_error_names(
        &msg,
        &[
            "train.bin",
            "CIFAR-100's 3074-byte ones",
            "a CIFAR-100 file?",
        ],
    );
    let cifar10 = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/cifar10_python");
    let batch = cifar10.join("protocol4/test_batch");
    let python = Cifar100PythonFormat::new(Cifar100Labels::Fine);
    let msg = report(&python.index(&batch).unwrap_err());
    assert_error_names(
        &msg,
        &["test_batch", "(a CIFAR-10 batch?)", "no 'fine_labels'"],
    );
    let msg = report(&Cifar10Dir::find(&fixtures().join("tfds")).unwrap_err());
    assert_error_names(&msg, &["no CIFAR-10 files", "no TFDS cifar10 dataset"]);
    let msg = report(&Cifar10Dir::find(&fixtures().join("tfds/cifar100")).unwrap_err());
    assert_error_names(
        &msg,
        &["3.0.2", "TFDS's cifar100 (100 classes), not cifar10"],
    );
    let tfds_cifar10 = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tfds");
    let msg = report(&Cifar100Dir::find(&tfds_cifar10, Cifar100Labels::Coarse).unwrap_err());
    assert_error_names(
        &msg,
        &["no CIFAR-100 files", "train.bin", "no TFDS cifar100"],
    );
}

#[test]
fn a_coarse_label_past_the_superclasses_is_named_with_its_record() {
    let mut record = std::fs::read(fixtures().join("cifar-100-binary/test.bin")).unwrap();
    record.truncate(3074);
    record[0] = 20;
    let coarse = Cifar100Format::new(Cifar100Labels::Coarse);
    let msg = report(
        &coarse
            .decode(Path::new("test.bin"), 0, &record)
            .unwrap_err(),
    );
    assert_error_names(
        &msg,
        &["test.bin", "record 0", "label 20 out of range 0..20"],
    );
    let fine = Cifar100Format::new(Cifar100Labels::Fine).decode(Path::new("t"), 0, &record);
    assert_eq!(fine.unwrap().label, i64::from(record[1]));
}
