//! Safetensors import: the header length, the JSON header (dtypes, shapes, offsets) and the
//! tensor bytes, read into tensors by module path.

use std::collections::HashMap;

use burn::module::Module;
use burn::nn::{BatchNormConfig, LinearConfig};
use burn::tensor::Device;
use burn_towers::models::weights::{WeightSource, read_safetensors, to_safetensors};

use crate::fuzz;
use crate::mutate::mutated;

#[derive(Module, Debug)]
struct Net {
    linear: burn::nn::Linear,
    norm: burn::nn::BatchNorm,
}

/// An export of a small net by `to_safetensors` (a matrix, vectors, batch-norm statistics,
/// metadata in the header), as the `--export` of training writes it.
fn seeds() -> Vec<Vec<u8>> {
    let device = Device::flex();
    let net = Net {
        linear: LinearConfig::new(5, 3).init(&device),
        norm: BatchNormConfig::new(3).init(&device),
    };
    let metadata = HashMap::from([("format".to_string(), "burn-towers".to_string())]);
    vec![to_safetensors(&net, metadata).unwrap()]
}

#[test]
fn fuzz_safetensors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.safetensors");
    fuzz("safetensors", mutated(seeds()), |bytes| {
        std::fs::write(&path, &bytes).unwrap();
        let Ok(mut source) = read_safetensors(&path) else {
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
    });
}
