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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use burn::module::Module;
use burn::tensor::Device;
use towers_models::weights::{RestoreOptions, RestoreReport, TorchSource, restore};
use towers_models::{ImageClassifier, MobileNetV2, MobileNetV2Config};
use towers_testing::torchvision::{
    KeyList, assert_logits_close, assert_restored_exactly, fixture_images,
};

/// MobileNetV2's convolutions, each with a batch norm.
const CONVOLUTIONS: usize = 52;

/// Every parameter restored (a weight per convolution, four tensors per batch norm, the
/// classifier's two), and every key of the file used.
fn assert_complete(report: &RestoreReport) {
    assert_restored_exactly(report, CONVOLUTIONS * 5 + 2);
}

#[test]
fn the_map_covers_torchvisions_state_dict_exactly() {
    let list =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/torchvision_mobilenet_v2_keys.txt");
    let mut source = KeyList::<MobileNetV2>::read(&list);
    // Per batch norm torchvision keeps five tensors (num_batches_tracked besides ours).
    assert_eq!(source.len(), CONVOLUTIONS * 6 + 2);
    let model = MobileNetV2Config::new().init(&Device::flex());
    let (_, report) = restore(model, &mut source, &RestoreOptions::default()).unwrap();
    assert_complete(&report);
}

/// Logits within 1e-4 of torchvision's, relative to the largest |logit|.
const TOLERANCE: f32 = 1e-4;

#[test]
fn a_torchvision_state_dict_gives_torchvisions_logits() {
    let variable = "TOWERS_TORCHVISION_MOBILENET_V2";
    let Some(dir) = std::env::var_os(variable).map(PathBuf::from) else {
        println!("skipped: {variable} names no fixture (see the file's doc)");
        return;
    };
    let device = Device::flex();
    let text = std::fs::read_to_string(dir.join("expected.json")).unwrap();
    let expected: BTreeMap<String, Vec<Vec<f32>>> = serde_json::from_str(&text).unwrap();
    let images = fixture_images(&dir, 224, &device);
    let model = MobileNetV2Config::new().init(&device);
    let mut source = TorchSource::open::<MobileNetV2>(&dir.join("mobilenet_v2.pth")).unwrap();
    let (model, report) = restore(model, &mut source, &RestoreOptions::default()).unwrap();
    assert_complete(&report);
    let logits: Vec<f32> = model
        .valid()
        .forward(images)
        .into_data()
        .try_to_vec()
        .unwrap();
    let expected = expected["mobilenet_v2"].concat();
    assert_logits_close(&logits, &expected, TOLERANCE, "MobileNetV2");
}
