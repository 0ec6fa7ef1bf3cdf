//! CIFAR-10's python layout (`cifar-10-batches-py`) against torchvision: batches as the
//! published files are (Python 2's protocol 2 pickles) and as Python 3 re-saves them
//! (protocols 3 to 5), read as torchvision 0.29's `CIFAR10` reads them: the images and
//! labels it read, written in the binary layout (scripts/torch_fixtures/cifar10_python.py).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use burn::data::dataset::Dataset;
use towers_data::cifar10::{Cifar10Dir, Cifar10Format, Layout, PYTHON_TEST_FILE};
use towers_data::transforms::Identity;
use towers_data::{Example, HostBatch, Pipeline, PipelineConfig, RecordDataset};
use towers_testing::{assert_error_names, report};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/cifar10_python")
}

/// The examples of `files` in `format`, in order.
fn examples(format: Arc<dyn towers_data::RecordFormat>, files: Vec<PathBuf>) -> Vec<Example> {
    let dataset = RecordDataset::open(format, files).unwrap();
    (0..dataset.len())
        .map(|i| dataset.get(i).unwrap())
        .collect()
}

/// What torchvision read from the batch `name`.
fn torchvision_read(name: &str) -> Vec<Example> {
    let expected = fixtures().join("expected").join(format!("{name}.bin"));
    examples(Arc::new(Cifar10Format), vec![expected])
}

#[test]
fn the_published_layout_reads_as_torchvision_reads_it() {
    // torchvision's root: the folder holding cifar-10-batches-py.
    let cifar = Cifar10Dir::find(&fixtures().join("py2")).unwrap();
    assert_eq!(cifar.layout(), Layout::Python);
    assert!(cifar.dir().ends_with("cifar-10-batches-py"));
    let train = cifar.train_files().unwrap();
    let ours = examples(cifar.format(), train.clone());
    let names = train
        .iter()
        .map(|f| f.file_name().unwrap().to_str().unwrap());
    let theirs: Vec<Example> = names.flat_map(torchvision_read).collect();
    assert_eq!(ours.len(), 15);
    assert_eq!(ours, theirs);
    let test = examples(cifar.format(), cifar.test_files().unwrap());
    assert_eq!(test, torchvision_read(PYTHON_TEST_FILE));
}

#[test]
fn batches_python_3_re_saved_read_the_same() {
    for protocol in ["protocol3", "protocol4", "protocol5"] {
        let cifar = Cifar10Dir::find(&fixtures().join(protocol)).unwrap();
        assert_eq!(cifar.layout(), Layout::Python, "{protocol}");
        let ours = examples(cifar.format(), cifar.test_files().unwrap());
        assert_eq!(ours, torchvision_read(PYTHON_TEST_FILE), "{protocol}");
    }
}

#[test]
fn a_batch_python_3_wrote_at_protocol_2_is_refused_saying_how_to_re_save_it() {
    let cifar = Cifar10Dir::find(&fixtures().join("python3_protocol2")).unwrap();
    let error = RecordDataset::open(cifar.format(), cifar.test_files().unwrap()).unwrap_err();
    assert_error_names(
        &report(&error),
        &[
            "python3_protocol2",
            "test_batch",
            "latin-1 text",
            "protocol 3 or later",
        ],
    );
}

#[test]
fn the_pipeline_reads_python_batches_with_their_labels() {
    let cifar = Cifar10Dir::find(&fixtures().join("py2")).unwrap();
    let files = cifar.train_files().unwrap();
    let pipeline = Pipeline::start(
        PipelineConfig::eval(5),
        cifar.format(),
        files,
        Arc::new(Identity),
    )
    .unwrap();
    let batches: Vec<HostBatch> = pipeline.collect::<towers_data::Result<_>>().unwrap();
    let labels: Vec<i64> = batches.iter().flat_map(|b| b.labels().to_vec()).collect();
    let names = (1..=5).map(|i| format!("data_batch_{i}"));
    let theirs: Vec<i64> = names
        .flat_map(|name| torchvision_read(&name))
        .map(|e| e.label)
        .collect();
    assert_eq!(labels, theirs);
}
