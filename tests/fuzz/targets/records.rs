//! A record as a reader thread handles it: the data CRC, the `tf.train.Example`, the image
//! decode and the label check (`TfExampleFormat::decode`), then the Inception preprocessing,
//! training and evaluation, on whatever image came out.

use std::path::Path;

use burn_towers::data::RecordFormat;
use burn_towers::data::inception::TfExampleFormat;
use burn_towers::data::tfrecord::masked_crc;
use burn_towers::data::transforms::{InceptionEval, InceptionTrain, Rng, Transform};
use proptest::prelude::*;
use rand::SeedableRng;

use super::seed_examples;
use crate::fuzz;
use crate::mutate::mutated;

/// Each record of the seed shard as a reader reads it: data, then its CRC footer.
fn seeds() -> Vec<Vec<u8>> {
    seed_examples()
        .into_iter()
        .map(|mut data| {
            data.extend_from_slice(&masked_crc(&data).to_le_bytes());
            data
        })
        .collect()
}

/// Rewrites the footer to match the data.
fn fix_crc(record: &mut [u8]) {
    if let Some(split) = record.len().checked_sub(4) {
        let crc = masked_crc(&record[..split]);
        record[split..].copy_from_slice(&crc.to_le_bytes());
    }
}

#[test]
fn fuzz_record_decode_and_preprocessing() {
    let inputs =
        (mutated(seeds()), any::<bool>(), any::<u64>()).prop_map(|(mut bytes, fix, seed)| {
            if fix {
                fix_crc(&mut bytes);
            }
            (bytes, seed)
        });
    let format = TfExampleFormat::new(1001);
    let (train, eval) = (InceptionTrain::new(24), InceptionEval::new(24));
    fuzz("record to preprocessed image", inputs, |(bytes, seed)| {
        let Ok(example) = format.decode(Path::new("train-00000-of-00001"), 0, &bytes) else {
            return false;
        };
        let mut rng = Rng::seed_from_u64(seed);
        for transform in [&train as &dyn Transform, &eval] {
            if let Ok(image) = transform.apply(example.image.clone(), &example.boxes, &mut rng) {
                assert_eq!(image.shape(), [24, 24, 3]);
                assert!(image.data().iter().all(|v| v.is_finite()));
            }
        }
        true
    });
}
