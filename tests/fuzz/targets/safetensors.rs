//! Safetensors import: the header length, the JSON header (dtypes, shapes, offsets) and the
//! tensor bytes, read into tensors by module path, and as a PyTorch state dict through
//! ResNet-18's torchvision names (`open_safetensors`).

use std::collections::HashMap;

use burn::module::Module;
use burn::nn::{BatchNormConfig, LinearConfig};
use burn::tensor::Device;
use burn_towers::models::ResNet18;
use burn_towers::models::weights::{open_safetensors, read_safetensors, to_safetensors};
use towers_testing::weight_reads::{RESNET18_PATHS, every_listed_tensor_fits, paths_fit};

use crate::fuzz;
use crate::mutate::mutated;

#[derive(Module, Debug)]
struct Net {
    linear: burn::nn::Linear,
    norm: burn::nn::BatchNorm,
}

/// An export of a small net by `to_safetensors` (a matrix, vectors, batch-norm statistics,
/// metadata in the header), as the `--export` of training writes it, and a state dict that
/// `safetensors.torch.save_file` wrote (its batch norm's integer counter among the tensors).
fn seeds() -> Vec<Vec<u8>> {
    let device = Device::flex();
    let net = Net {
        linear: LinearConfig::new(5, 3).init(&device),
        norm: BatchNormConfig::new(3).init(&device),
    };
    let metadata = HashMap::from([("format".to_string(), "burn-towers".to_string())]);
    let state_dict = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/models/tests/data/torch_checkpoints/model.safetensors");
    vec![
        to_safetensors(&net, metadata).unwrap(),
        std::fs::read(state_dict).unwrap(),
    ]
}

/// Every tensor of the file at `path` read by module path; whether it parsed.
fn read_by_module_path(path: &std::path::Path, bytes: &[u8]) -> bool {
    let Ok(mut source) = read_safetensors(path) else {
        return false;
    };
    every_listed_tensor_fits(&mut source, bytes.len());
    true
}

/// A parameter of each torchvision layout read from the file at `path` as a state dict;
/// whether it parsed.
fn read_as_state_dict(path: &std::path::Path) -> bool {
    let Ok(mut source) = open_safetensors::<ResNet18>(path) else {
        return false;
    };
    paths_fit(source.as_mut(), &RESNET18_PATHS);
    true
}

#[test]
fn fuzz_safetensors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.safetensors");
    fuzz("safetensors", mutated(seeds()), |bytes| {
        std::fs::write(&path, &bytes).unwrap();
        let by_module_path = read_by_module_path(&path, &bytes);
        read_as_state_dict(&path) || by_module_path
    });
}
