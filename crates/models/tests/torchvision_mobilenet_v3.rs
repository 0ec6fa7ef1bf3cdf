//! MobileNetV3 Large and Small filled from torchvision's `mobilenet_v3_large` and
//! `mobilenet_v3_small` state dicts: the name map covers every key of each state dict with
//! the right shapes (the committed key lists), and a state dict torchvision wrote gives
//! torchvision's logits. Those (about 22 and 10 MB) are not in the repository:
//!
//! ```text
//! /tmp/torchenv/bin/python scripts/torch_fixtures/mobilenet_v3_torchvision.py /tmp/tv_mobilenet_v3
//! TOWERS_TORCHVISION_MOBILENET_V3=/tmp/tv_mobilenet_v3 cargo test -p towers-models --test integration torchvision_mobilenet_v3
//! ```
//!
//! Without `TOWERS_TORCHVISION_MOBILENET_V3` that test says it was skipped and passes.

use std::path::Path;

use burn::tensor::Device;
use towers_models::weights::{RestoreOptions, restore};
use towers_models::{MobileNetV3, MobileNetV3Config};
use towers_testing::torchvision::{
    KeyList, assert_fixture_gives_torchvisions_logits, assert_restored_exactly,
};

/// A variant as its tests need it.
struct Variant {
    /// torchvision's name for it.
    name: &'static str,
    config: fn() -> MobileNetV3Config,
    /// Its batch norms: torchvision keeps one `num_batches_tracked` each.
    batch_norms: usize,
    /// Its parameter tensors: a weight per convolution, four tensors per batch norm, a
    /// weight and a bias per gate convolution and dense layer.
    parameters: usize,
}

const LARGE: Variant = Variant {
    name: "mobilenet_v3_large",
    config: MobileNetV3Config::large,
    batch_norms: 46,
    parameters: 312 - 46,
};

const SMALL: Variant = Variant {
    name: "mobilenet_v3_small",
    config: MobileNetV3Config::small,
    batch_norms: 34,
    parameters: 244 - 34,
};

/// Both variants' key lists are covered exactly: Small's projections behind a gate take the
/// second position the map lists, Large's the first.
#[test]
fn the_map_covers_torchvisions_state_dicts_exactly() {
    for variant in [LARGE, SMALL] {
        let list = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("tests/data/torchvision_{}_keys.txt", variant.name));
        let mut source = KeyList::<MobileNetV3>::read(&list);
        assert_eq!(source.len(), variant.parameters + variant.batch_norms);
        let model = (variant.config)().init(&Device::flex());
        let (_, report) = restore(model, &mut source, &RestoreOptions::default()).unwrap();
        assert_restored_exactly(&report, variant.parameters);
    }
}

/// Logits within 1e-4 of torchvision's, relative to the largest |logit|.
#[test]
fn torchvision_state_dicts_give_torchvisions_logits() {
    for variant in [LARGE, SMALL] {
        let model = (variant.config)().init(&Device::flex());
        assert_fixture_gives_torchvisions_logits(
            "TOWERS_TORCHVISION_MOBILENET_V3",
            variant.name,
            model,
            variant.parameters,
            224,
            1e-4,
        );
    }
}
