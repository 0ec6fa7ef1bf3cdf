//! Inception v3 filled from torchvision's `inception_v3` state dicts: the name map covers every
//! key of torchvision's state dict with the right shapes (the committed key list), and a state
//! dict torchvision wrote gives torchvision's logits. That one (about 100 MB) is not in the
//! repository:
//!
//! ```text
//! /work/venv/bin/python scripts/torch_fixtures/inception_v3_torchvision.py /tmp/tv_inception_v3
//! TOWERS_TORCHVISION_INCEPTION_V3=/tmp/tv_inception_v3 cargo test -p towers-models --test integration torchvision_weights
//! ```
//!
//! Without `TOWERS_TORCHVISION_INCEPTION_V3` that test says it was skipped and passes.

use std::path::{Path, PathBuf};

use burn::tensor::Device;
use towers_models::weights::{RestoreOptions, RestoreReport, TorchSource, restore};
use towers_models::{ImageClassifier, InceptionV3, InceptionV3Config};
use towers_testing::torchvision::{
    KeyList, assert_logits_close, assert_restored_exactly, fixture_images,
};

/// Our Inception v3 for torchvision's weights: 1000 classes, pools counting their padding.
fn torchvision_layout(device: &Device) -> InceptionV3 {
    InceptionV3Config::new(1000)
        .with_pool_counts_padding(true)
        .init(device)
}

/// Every parameter restored, and every key of the file used.
fn assert_complete(report: &RestoreReport) {
    assert_restored_exactly(report, 96 * 4 + 4);
}

#[test]
fn the_map_covers_torchvisions_state_dict_exactly() {
    let list =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/torchvision_inception_v3_keys.txt");
    let mut source = KeyList::<InceptionV3>::read(&list);
    assert_eq!(source.len(), 580);
    let model = torchvision_layout(&Device::flex());
    let (_, report) = restore(model, &mut source, &RestoreOptions::default()).unwrap();
    assert_complete(&report);
}

#[derive(serde::Deserialize)]
struct Expected {
    inputs_logits: Vec<Vec<f32>>,
}

/// Logits within 1e-4 of torchvision's, relative to the largest |logit|.
const TOLERANCE: f32 = 1e-4;

#[test]
fn a_torchvision_state_dict_gives_torchvisions_logits() {
    let Some(dir) = std::env::var_os("TOWERS_TORCHVISION_INCEPTION_V3").map(PathBuf::from) else {
        println!("skipped: TOWERS_TORCHVISION_INCEPTION_V3 names no fixture (see the file's doc)");
        return;
    };
    let device = Device::flex();
    let mut source = TorchSource::open::<InceptionV3>(&dir.join("inception_v3.pth")).unwrap();
    let model = torchvision_layout(&device);
    let (model, report) = restore(model, &mut source, &RestoreOptions::default()).unwrap();
    assert_complete(&report);

    let text = std::fs::read_to_string(dir.join("expected.json")).unwrap();
    let expected: Expected = serde_json::from_str(&text).unwrap();
    let images = fixture_images(&dir, 299, &device);
    let logits: Vec<f32> = model.forward(images).into_data().try_to_vec().unwrap();
    assert_logits_close(
        &logits,
        &expected.inputs_logits.concat(),
        TOLERANCE,
        "torchvision logits",
    );
}
