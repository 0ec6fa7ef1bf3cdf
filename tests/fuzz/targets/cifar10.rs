//! CIFAR-10 binary records: exactly 3073 bytes with a label below 10 decode, nothing else;
//! the python layout's pickled batches: images within the file, labels below 10.

use std::path::Path;

use burn_towers::data::cifar10::{
    Cifar10Format, Cifar10PythonFormat, IMAGE_BYTES, NUM_CLASSES, RECORD_BYTES, encode_record,
};
use burn_towers::data::{Image, RecordFormat};

use crate::fuzz;
use crate::mutate::mutated;

#[test]
fn fuzz_cifar10_record() {
    let seeds: Vec<Vec<u8>> = (0..3u8)
        .map(|label| {
            let pixels = (0..32 * 32 * 3).map(|i| ((i * 7 + label as usize) % 256) as f32);
            let image = Image::from_hwc(pixels.collect(), 32, 32, 3);
            encode_record(&image, label * 4)
        })
        .collect();
    fuzz("cifar10", mutated(seeds), |bytes| {
        let decoded = Cifar10Format.decode(Path::new("data_batch_1.bin"), 0, &bytes);
        let valid = bytes.len() == RECORD_BYTES && (bytes[0] as usize) < NUM_CLASSES;
        assert_eq!(decoded.is_ok(), valid);
        valid
    });
}

/// The python layout's batches, as torchvision's download and Python 3's re-saves are
/// (`crates/data/tests/data/cifar10_python`): the pickle machine and the batch's reading.
fn python_batches() -> Vec<Vec<u8>> {
    let fixtures =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/data/tests/data/cifar10_python");
    [
        "py2/cifar-10-batches-py/data_batch_1",
        "protocol4/test_batch",
        "protocol5/test_batch",
    ]
    .iter()
    .map(|file| std::fs::read(fixtures.join(file)).unwrap())
    .collect()
}

/// A batch of the python layout indexes to images within the file, and each image decodes
/// to a 32x32x3 image with a label below 10, or to an error naming its record.
#[test]
fn fuzz_cifar10_python_batch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data_batch_1");
    fuzz("cifar10 python", mutated(python_batches()), |bytes| {
        std::fs::write(&path, &bytes).unwrap();
        let format = Cifar10PythonFormat::default();
        let Ok(spans) = format.index(&path) else {
            return false;
        };
        for (record, span) in spans.iter().enumerate() {
            let end = span.offset as usize + span.len;
            assert!(span.len == IMAGE_BYTES && end <= bytes.len(), "{span:?}");
            match format.decode(&path, record, &bytes[span.offset as usize..end]) {
                Ok(example) => {
                    assert!((0..NUM_CLASSES as i64).contains(&example.label));
                    assert_eq!(example.image.shape(), [32, 32, 3]);
                }
                Err(error) => assert!(error.to_string().contains(&format!("record {record}"))),
            }
        }
        true
    });
}
