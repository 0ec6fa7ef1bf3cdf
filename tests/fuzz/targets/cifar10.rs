//! CIFAR-10 binary records: exactly 3073 bytes with a label below 10 decode, nothing else.

use std::path::Path;

use burn_towers::data::cifar10::{Cifar10Format, NUM_CLASSES, RECORD_BYTES, encode_record};
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
