//! `softmax_cross_entropy` against Burn's `CrossEntropyLoss` on flex, where its own backward
//! pass runs (the GPU test of the root crate checks it on wgpu).

use burn::tensor::Device;
use towers_testing::losses::assert_cross_entropy_matches_burns;

#[test]
fn softmax_cross_entropy_and_its_gradient_are_burns_on_flex() {
    assert_cross_entropy_matches_burns(&Device::flex().autodiff());
}
