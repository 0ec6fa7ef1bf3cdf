//! Parameters as flat vectors, and comparisons that say which value differs.

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::Tensor;

/// Every float tensor of a module, flattened in visiting order.
pub fn values<M: Module>(module: &M) -> Vec<f32> {
    struct Values(Vec<f32>);
    impl ModuleVisitor for Values {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            self.0.extend(param.val().to_data().iter::<f32>());
        }
    }
    let mut v = Values(Vec::new());
    module.visit(&mut v);
    v.0
}

/// Asserts `|got - expected| <= tolerance * max(|expected|, 1)` for every value.
pub fn assert_close(got: &[f32], expected: &[f32], tolerance: f32, what: &str) {
    assert_eq!(got.len(), expected.len(), "{what}: lengths");
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        assert!(
            (g - e).abs() <= tolerance * e.abs().max(1.0),
            "{what}: value {i} is {g}, expected {e} (tolerance {tolerance})"
        );
    }
}

/// The largest absolute difference of `got` from `want`, relative to the largest magnitude of
/// `want`.
pub fn rel_diff<const D: usize>(got: Tensor<D>, want: Tensor<D>) -> f32 {
    let scale: f32 = want.clone().abs().max().into_scalar();
    let diff: f32 = (got - want).abs().max().into_scalar();
    diff / scale
}

/// The largest absolute difference between two vectors.
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}
