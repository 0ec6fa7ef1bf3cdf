//! A PyTorch `.pth` state dict as the torchvision loader reads one (`TorchSource::open` for
//! Inception v3, pytorch-reader's zip and pickle parsing underneath), then the parameters of
//! each layout (same, transposed, scaled by a batch norm's gamma) and every other tensor read.
//!
//! Input: the file, written to a file in memory (the reader takes a path).

#![no_main]

use libfuzzer_sys::fuzz_target;
use towers_fuzz::scratch;
use towers_models::InceptionV3;
use towers_models::weights::{TorchSource, WeightSource};
use towers_testing::weight_reads::paths_fit;

/// Module paths of each layout: a convolution and a moving mean scaled by gamma, a transposed
/// linear weight, plain vectors.
const PATHS: [&str; 6] = [
    "conv2d_1a_3x3.conv.weight",
    "conv2d_1a_3x3.bn.beta",
    "conv2d_1a_3x3.bn.running_mean",
    "conv2d_1a_3x3.bn.running_var",
    "logits.weight",
    "logits.bias",
];

fuzz_target!(|data: &[u8]| {
    let path = scratch("model.pth");
    std::fs::write(&path, data).unwrap();
    let Ok(mut source) = TorchSource::open::<InceptionV3>(&path) else {
        return;
    };
    paths_fit(&mut source, &PATHS);
    for key in source.unused() {
        let _ = source.read_key(&key);
    }
});
