//! A Keras weights file as the Keras loader reads one (`KerasSource`'s reader: `hdf5-reader`'s
//! superblock, object headers, B-trees, heaps, attributes and datasets; Keras 3's `.keras` zip
//! around one), its layers named as `KerasSource` names keras.applications' networks', every
//! weight of every layer read.
//!
//! Input: the file, written to a file in memory (the reader takes a path); a zip is read as a
//! `.keras` archive, anything else as HDF5.

#![no_main]

use libfuzzer_sys::fuzz_target;
use towers_fuzz::scratch;
use towers_models::InceptionV3;
use towers_models::weights::KerasSource;

fuzz_target!(|data: &[u8]| {
    let name = if data.starts_with(b"PK") {
        "model.keras"
    } else {
        "model.h5"
    };
    let path = scratch(name);
    std::fs::write(&path, data).unwrap();
    // The names are the same for every model: one names them all.
    let _ = KerasSource::open::<InceptionV3>(&path);
    let Ok(weights) = KerasSource::read_every_weight(&path) else {
        return;
    };
    for weight in weights {
        let elements = weight.shape.iter().product::<usize>();
        assert_eq!(weight.values.len(), elements, "{}", weight.name);
    }
});
