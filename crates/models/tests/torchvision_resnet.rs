//! ResNet-50 and ResNet-18 filled from torchvision's `resnet50`/`resnet18` state dicts: the name
//! map covers every key of torchvision's state dicts with the right shapes (the committed key
//! lists), and state dicts torchvision wrote give torchvision's logits. Those (about 150 MB)
//! are not in the repository:
//!
//! ```text
//! /work/venv/bin/python scripts/torch_fixtures/resnet_torchvision.py /tmp/tv_resnet
//! TOWERS_TORCHVISION_RESNET=/tmp/tv_resnet cargo test -p towers-models --test integration torchvision_resnet
//! ```
//!
//! Without `TOWERS_TORCHVISION_RESNET` that test says it was skipped and passes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use burn::module::Module;
use burn::tensor::{Device, Tensor};
use towers_models::weights::{RestoreOptions, RestoreReport, TorchNamed, TorchSource, restore};
use towers_models::{
    ImageClassifier, ResNet, ResNet18, ResNet50, ResNetConfig, ResidualBlock, count_params,
};
use towers_testing::torchvision::{
    KeyList, assert_logits_close, assert_restored_exactly, fixture_images,
};

/// Every parameter restored (a weight per convolution, four tensors per batch norm, the
/// classifier's two), and every key of the file used.
fn assert_complete(report: &RestoreReport, convolutions: usize) {
    assert_restored_exactly(report, convolutions * 5 + 2);
}

/// The key list of torchvision's `name` restored into `model`: `keys` keys, `convolutions`
/// convolutions.
fn assert_map_covers<Block: ResidualBlock>(
    model: ResNet<Block>,
    name: &str,
    keys: usize,
    convolutions: usize,
) where
    ResNet<Block>: TorchNamed,
{
    let list = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("tests/data/torchvision_{name}_keys.txt"));
    let mut source = KeyList::<ResNet<Block>>::read(&list);
    assert_eq!(source.len(), keys, "{name}'s keys");
    let (_, report) = restore(model, &mut source, &RestoreOptions::default()).unwrap();
    assert_complete(&report, convolutions);
}

#[test]
fn the_map_covers_torchvisions_state_dicts_exactly() {
    let device = Device::flex();
    // Per batch norm torchvision keeps five tensors (num_batches_tracked besides ours).
    let resnet50: ResNet50 = ResNetConfig::resnet50(1000).init(&device);
    assert_map_covers(resnet50, "resnet50", 53 * 6 + 2, 53);
    let resnet18: ResNet18 = ResNetConfig::resnet18(1000).init(&device);
    assert_map_covers(resnet18, "resnet18", 20 * 6 + 2, 20);
}

#[test]
fn parameter_counts_are_torchvisions() {
    // torchvision's model cards: ResNet-50, -18, -34, -101 and -152.
    let device = Device::flex();
    let resnet50: ResNet50 = ResNetConfig::resnet50(1000).init(&device);
    assert_eq!(count_params(&resnet50).trainable, 25_557_032);
    let resnet18: ResNet18 = ResNetConfig::resnet18(1000).init(&device);
    assert_eq!(count_params(&resnet18).trainable, 11_689_512);
    let resnet34: ResNet18 = ResNetConfig::resnet34(1000).init(&device);
    assert_eq!(count_params(&resnet34).trainable, 21_797_672);
    let resnet101: ResNet50 = ResNetConfig::resnet101(1000).init(&device);
    assert_eq!(count_params(&resnet101).trainable, 44_549_160);
    let resnet152: ResNet50 = ResNetConfig::resnet152(1000).init(&device);
    assert_eq!(count_params(&resnet152).trainable, 60_192_808);
}

/// Logits within 1e-4 of torchvision's, relative to the largest |logit|.
const TOLERANCE: f32 = 1e-4;

#[test]
fn torchvision_state_dicts_give_torchvisions_logits() {
    let Some(dir) = std::env::var_os("TOWERS_TORCHVISION_RESNET").map(PathBuf::from) else {
        println!("skipped: TOWERS_TORCHVISION_RESNET names no fixture (see the file's doc)");
        return;
    };
    let device = Device::flex();
    let text = std::fs::read_to_string(dir.join("expected.json")).unwrap();
    let expected: BTreeMap<String, Vec<Vec<f32>>> = serde_json::from_str(&text).unwrap();
    let images = fixture_images(&dir, 224, &device);

    let resnet50: ResNet50 = ResNetConfig::resnet50(1000).init(&device);
    let logits = restored_logits(resnet50, &dir.join("resnet50.pth"), images.clone(), 53);
    assert_logits_close(
        &logits,
        &expected["resnet50"].concat(),
        TOLERANCE,
        "ResNet-50",
    );
    let resnet18: ResNet18 = ResNetConfig::resnet18(1000).init(&device);
    let logits = restored_logits(resnet18, &dir.join("resnet18.pth"), images, 20);
    assert_logits_close(
        &logits,
        &expected["resnet18"].concat(),
        TOLERANCE,
        "ResNet-18",
    );
}

/// `model` restored from the state dict at `path`, evaluated on `images`.
fn restored_logits<Block: ResidualBlock>(
    model: ResNet<Block>,
    path: &Path,
    images: Tensor<4>,
    convolutions: usize,
) -> Vec<f32>
where
    ResNet<Block>: TorchNamed,
{
    let mut source = TorchSource::open::<ResNet<Block>>(path).unwrap();
    let (model, report) = restore(model, &mut source, &RestoreOptions::default()).unwrap();
    assert_complete(&report, convolutions);
    let logits = model.valid().forward(images);
    logits.into_data().try_to_vec().unwrap()
}
