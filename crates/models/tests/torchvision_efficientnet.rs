//! EfficientNet filled from torchvision's `efficientnet_b0` state dicts: the name map covers
//! every key of torchvision's state dict with the right shapes (the committed key list), and a
//! state dict torchvision wrote gives torchvision's logits. That one (about 21 MB) is not in
//! the repository:
//!
//! ```text
//! /tmp/torchenv/bin/python scripts/torch_fixtures/efficientnet_b0_torchvision.py /tmp/tv_efficientnet_b0
//! TOWERS_TORCHVISION_EFFICIENTNET_B0=/tmp/tv_efficientnet_b0 cargo test -p towers-models --test integration torchvision_efficientnet
//! ```
//!
//! Without `TOWERS_TORCHVISION_EFFICIENTNET_B0` that test says it was skipped and passes.

use std::path::Path;

use burn::tensor::Device;
use towers_models::weights::{RestoreOptions, restore};
use towers_models::{EfficientNet, EfficientNetConfig};
use towers_testing::torchvision::{
    KeyList, assert_fixture_gives_torchvisions_logits, assert_restored_exactly,
};

/// EfficientNet-B0's batch norms, each after a convolution.
const BATCH_NORMS: usize = 49;
/// Its gates' convolutions, each with a bias.
const GATES: usize = 32;

/// Its parameters: a weight per convolution, four tensors per batch norm, a weight and a bias
/// per gate's convolution, the classifier's two.
const PARAMETERS: usize = BATCH_NORMS * 5 + GATES * 2 + 2;

#[test]
fn the_map_covers_torchvisions_state_dict_exactly() {
    let list = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/torchvision_efficientnet_b0_keys.txt");
    let mut source = KeyList::<EfficientNet>::read(&list);
    // Per batch norm torchvision keeps five tensors (num_batches_tracked besides ours).
    assert_eq!(source.len(), BATCH_NORMS * 6 + GATES * 2 + 2);
    let model = EfficientNetConfig::new().init(&Device::flex());
    let (_, report) = restore(model, &mut source, &RestoreOptions::default()).unwrap();
    assert_restored_exactly(&report, PARAMETERS);
}

/// Logits within 1e-4 of torchvision's, relative to the largest |logit|.
#[test]
fn a_torchvision_state_dict_gives_torchvisions_logits() {
    let model = EfficientNetConfig::new().init(&Device::flex());
    assert_fixture_gives_torchvisions_logits(
        "TOWERS_TORCHVISION_EFFICIENTNET_B0",
        "efficientnet_b0",
        model,
        PARAMETERS,
        224,
        1e-4,
    );
}
