//! A safetensors file as `--init-from` imports one: by module path (`read_safetensors`, here by
//! its bytes entry point) and, where it holds PyTorch's batch-norm counters, as a state dict
//! through ResNet-18's torchvision names (`open_safetensors`): the header length, the JSON
//! header (dtypes, shapes, offsets), the tensor bytes.
//!
//! Input: the file (also written to a file in memory, for `open_safetensors`).

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use towers_fuzz::scratch;
use towers_models::ResNet18;
use towers_models::weights::{open_safetensors, safetensors_from_bytes};
use towers_testing::weight_reads::{RESNET18_PATHS, every_listed_tensor_fits, paths_fit};

fuzz_target!(|data: &[u8]| {
    if let Ok(mut source) = safetensors_from_bytes(Path::new("model.safetensors"), data) {
        every_listed_tensor_fits(&mut source, data.len());
    }
    let path = scratch("model.safetensors");
    std::fs::write(&path, data).unwrap();
    if let Ok(mut source) = open_safetensors::<ResNet18>(&path) {
        paths_fit(source.as_mut(), &RESNET18_PATHS);
    }
});
