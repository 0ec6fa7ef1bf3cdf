//! Keras weight files: HDF5 (superblock, object headers, B-trees, heaps, attributes, datasets,
//! as `hdf5-reader` parses them) and Keras 3's `.keras` zip around one, their layers named as
//! `KerasSource` names keras.applications' networks', read weight by weight, and the model
//! configuration a whole-model file keeps (`KerasConfig`, JSON) searched.

use std::path::Path;

use burn_towers::models::InceptionV3;
use burn_towers::models::weights::{KerasConfig, KerasSource};

use crate::fuzz;
use crate::mutate::mutated;

/// The files Keras 2 and Keras 3 wrote of one small network, and a crafted one whose nested
/// model links back to a group above it, which a coverage-guided run found
/// (`crates/models/tests/data/keras/`, `scripts/tf_fixtures/keras_weight_files.py`).
fn seeds() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/models/tests/data/keras");
    let files = [
        "keras2.h5",
        "keras2_fixed_strings.h5",
        "model.weights.h5",
        "model.keras",
        "model_keras2.h5",
        "nested_keras2.h5",
        "nested.weights.h5",
        "unnamed.weights.h5",
        "linked_cycle.weights.h5",
    ];
    files
        .map(|file| std::fs::read(dir.join(file)).unwrap())
        .into()
}

#[test]
fn fuzz_keras() {
    let dir = tempfile::tempdir().unwrap();
    fuzz("keras", mutated(seeds()), |bytes| {
        // A zip is read as Keras 3's archive, anything else as HDF5.
        let name = if bytes.starts_with(b"PK") {
            "model.keras"
        } else {
            "model.h5"
        };
        let path = dir.path().join(name);
        std::fs::write(&path, &bytes).unwrap();
        // The names are the same for every model: one names them all.
        let _ = KerasSource::open::<InceptionV3>(&path);
        if let Ok(Some(config)) = KerasConfig::read(&path) {
            let _ = config.channel_scales();
        }
        let Ok(weights) = KerasSource::read_every_weight(&path) else {
            return false;
        };
        for weight in weights {
            let elements = weight.shape.iter().product::<usize>();
            assert_eq!(weight.values.len(), elements, "{}", weight.name);
        }
        true
    });
}
