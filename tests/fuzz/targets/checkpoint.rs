//! This project's checkpoint files: the checksum, the JSON header, the burnpack sections.

use std::path::Path;

use burn::module::Module;
use burn::nn::LinearConfig;
use burn::tensor::Device;
use burn_towers::data::{InputPosition, RecordAt, ShuffleRng};
use burn_towers::train::Checkpoint;
use proptest::prelude::*;
use towers_testing::crc_fixups::fix_checkpoint_crc;

use crate::fuzz;
use crate::mutate::mutated;

/// A checkpoint written by `Checkpoint::save` (model, optimizer state with momentum, moving
/// averages, an input position).
fn seeds() -> Vec<Vec<u8>> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.ckpt-3");
    let model = LinearConfig::new(4, 3).init(&Device::flex());
    Checkpoint {
        step: 3,
        model: model.clone().into_record(),
        optimizer: burn::optim::SgdConfig::new().init().to_record(),
        averages: Some(model.into_record()),
        input: Some(serde_json::to_value(position()).unwrap()),
        config: serde_json::json!({"seed": 1, "devices": "flex"}),
        loss_scale: None,
    }
    .save(&path)
    .unwrap();
    vec![std::fs::read(path).unwrap()]
}

/// A position with a shuffle buffer and a skipped record.
fn position() -> InputPosition {
    let at = |seq| RecordAt {
        seq,
        epoch: 2,
        slot: 1,
        file: 0,
        record: seq as usize,
    };
    InputPosition {
        next: at(9).after(),
        skip: vec![at(12)],
        buffer: vec![at(7), at(12), at(3)],
        shuffle: Some(ShuffleRng { seed: 5, words: 96 }),
        ..InputPosition::start(vec!["data/a".into(), "data/b".into()], 5)
    }
}

#[test]
fn fuzz_checkpoint() {
    let inputs = (mutated(seeds()), any::<bool>()).prop_map(|(mut bytes, fix)| {
        if fix {
            fix_checkpoint_crc(&mut bytes);
        }
        bytes
    });
    fuzz("checkpoint", inputs, |bytes| {
        Checkpoint::from_bytes(&bytes, Path::new("model.ckpt-3")).is_ok()
    });
}
