//! What the fuzz targets of the weight readers check of whatever a reader accepted: every
//! tensor it hands out holds the values its shape says. Shared by the proptest targets
//! (`tests/fuzz/`) and the cargo-fuzz targets (`fuzz/`).

use towers_models::weights::WeightSource;

/// Module paths of each of ResNet-18's torchvision layouts: a convolution, a batch norm's scale,
/// a transposed linear weight.
pub const RESNET18_PATHS: [&str; 3] = ["conv1.weight", "bn1.gamma", "fc.weight"];

/// Reads every tensor `source` lists: each holds as many values as its shape says, and no
/// more than a file of `file_len` bytes holds f32s (nothing is made up beyond the input).
pub fn every_listed_tensor_fits(source: &mut dyn WeightSource, file_len: usize) {
    for name in source.unused() {
        let tensor = source.tensor(&name).unwrap().expect("a listed tensor");
        let elements: usize = tensor.shape.iter().product();
        assert_eq!(tensor.values.len(), elements, "{name}");
        assert!(
            tensor.values.len() * 4 <= file_len,
            "{name}: more than the input"
        );
    }
}

/// Reads each of the module `paths` that `source` has: each holds as many values as its shape
/// says.
pub fn paths_fit(source: &mut dyn WeightSource, paths: &[&str]) {
    for &module_path in paths {
        if let Ok(Some(tensor)) = source.tensor(module_path) {
            let elements: usize = tensor.shape.iter().product();
            assert_eq!(tensor.values.len(), elements, "{module_path}");
        }
    }
}
