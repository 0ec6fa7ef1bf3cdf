//! A safetensors file as `--init-from` imports one (`read_safetensors`, here by its bytes entry
//! point): the header length, the JSON header (dtypes, shapes, offsets), the tensor bytes.
//!
//! Input: the file.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use towers_models::weights::{WeightSource, safetensors_from_bytes};

fuzz_target!(|data: &[u8]| {
    let Ok(mut source) = safetensors_from_bytes(Path::new("model.safetensors"), data) else {
        return;
    };
    for name in source.unused() {
        let tensor = source.tensor(&name).unwrap().expect("a listed tensor");
        let elements: usize = tensor.shape.iter().product();
        assert_eq!(tensor.values.len(), elements, "{name}");
        assert!(
            tensor.values.len() * 4 <= data.len(),
            "{name}: more than the input"
        );
    }
});
