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
use towers_models::weights::{WeightSource, open_safetensors, safetensors_from_bytes};

/// Module paths of each torchvision layout: a convolution, a batch norm's scale, a
/// transposed linear weight.
const PATHS: [&str; 3] = ["conv1.weight", "bn1.gamma", "fc.weight"];

fuzz_target!(|data: &[u8]| {
    if let Ok(mut source) = safetensors_from_bytes(Path::new("model.safetensors"), data) {
        for name in source.unused() {
            let tensor = source.tensor(&name).unwrap().expect("a listed tensor");
            let elements: usize = tensor.shape.iter().product();
            assert_eq!(tensor.values.len(), elements, "{name}");
            assert!(
                tensor.values.len() * 4 <= data.len(),
                "{name}: more than the input"
            );
        }
    }
    let path = scratch("model.safetensors");
    std::fs::write(&path, data).unwrap();
    let Ok(mut source) = open_safetensors::<ResNet18>(&path) else {
        return;
    };
    for module_path in PATHS {
        if let Ok(Some(tensor)) = source.tensor(module_path) {
            let elements: usize = tensor.shape.iter().product();
            assert_eq!(tensor.values.len(), elements, "{module_path}");
        }
    }
});
