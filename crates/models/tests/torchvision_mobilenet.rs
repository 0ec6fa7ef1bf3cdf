//! MobileNetV2 filled from torchvision's `mobilenet_v2` state dicts: the name map covers every
//! key of torchvision's state dict with the right shapes (the committed key list), and a state
//! dict torchvision wrote gives torchvision's logits. That one (about 14 MB) is not in the
//! repository:
//!
//! ```text
//! /tmp/torchenv/bin/python scripts/torch_fixtures/mobilenet_v2_torchvision.py /tmp/tv_mobilenet
//! TOWERS_TORCHVISION_MOBILENET_V2=/tmp/tv_mobilenet cargo test -p towers-models --test integration torchvision_mobilenet
//! ```
//!
//! Without `TOWERS_TORCHVISION_MOBILENET_V2` that test says it was skipped and passes.

use std::path::Path;

use burn::tensor::Device;
use towers_models::weights::{RestoreOptions, restore};
use towers_models::{MobileNetV2, MobileNetV2Config};
use towers_testing::torchvision::{
    KeyList, assert_fixture_gives_torchvisions_logits, assert_restored_exactly,
};

/// MobileNetV2's convolutions, each with a batch norm.
const CONVOLUTIONS: usize = 52;

/// Its parameters: a weight per convolution, four tensors per batch norm, the classifier's
/// two.
const PARAMETERS: usize = CONVOLUTIONS * 5 + 2;

#[test]
fn the_map_covers_torchvisions_state_dict_exactly() {
    let list =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/torchvision_mobilenet_v2_keys.txt");
    let mut source = KeyList::<MobileNetV2>::read(&list);
    // Per batch norm torchvision keeps five tensors (num_batches_tracked besides ours).
    assert_eq!(source.len(), CONVOLUTIONS * 6 + 2);
    let model = MobileNetV2Config::new().init(&Device::flex());
    let (_, report) = restore(model, &mut source, &RestoreOptions::default()).unwrap();
    assert_restored_exactly(&report, PARAMETERS);
}

/// Logits within 1e-4 of torchvision's, relative to the largest |logit|.
#[test]
fn a_torchvision_state_dict_gives_torchvisions_logits() {
    let model = MobileNetV2Config::new().init(&Device::flex());
    assert_fixture_gives_torchvisions_logits(
        "TOWERS_TORCHVISION_MOBILENET_V2",
        "mobilenet_v2",
        model,
        PARAMETERS,
        224,
        1e-4,
    );
}
