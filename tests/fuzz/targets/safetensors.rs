//! Safetensors import: the header length, the JSON header (dtypes, shapes, offsets) and the
//! tensor bytes, read into tensors by module path, and as a PyTorch state dict through
//! ResNet-18's torchvision names (`open_safetensors`).

use std::collections::HashMap;

use burn::module::Module;
use burn::nn::{BatchNormConfig, LinearConfig};
use burn::tensor::Device;
use burn_towers::models::ResNet18;
use burn_towers::models::weights::{
    WeightSource, open_safetensors, read_safetensors, to_safetensors,
};

use crate::fuzz;
use crate::mutate::mutated;

#[derive(Module, Debug)]
struct Net {
    linear: burn::nn::Linear,
    norm: burn::nn::BatchNorm,
}

/// Module paths of each torchvision layout: a convolution, a batch norm's scale, a transposed
/// linear weight.
const TORCH_PATHS: [&str; 3] = ["conv1.weight", "bn1.gamma", "fc.weight"];

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
    for name in source.unused() {
        let tensor = source.tensor(&name).unwrap().expect("a listed tensor");
        let elements: usize = tensor.shape.iter().product();
        assert_eq!(tensor.values.len(), elements, "{name}");
        assert!(
            tensor.values.len() * 4 <= bytes.len(),
            "{name}: more than the input"
        );
    }
    true
}

/// A parameter of each torchvision layout read from the file at `path` as a state dict;
/// whether it parsed.
fn read_as_state_dict(path: &std::path::Path) -> bool {
    let Ok(mut source) = open_safetensors::<ResNet18>(path) else {
        return false;
    };
    for module_path in TORCH_PATHS {
        if let Ok(Some(tensor)) = source.tensor(module_path) {
            let elements: usize = tensor.shape.iter().product();
            assert_eq!(tensor.values.len(), elements, "{module_path}");
        }
    }
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
