//! torchvision's ResNet-18 weights evaluated as the `resnet_eval` example evaluates them (an
//! image folder of ImageNet's 1000 classes, most of them empty; torchvision's preset; the
//! import of the `.pth`; precision@1 and @5) count what torchvision's reference evaluation
//! counts on the same folder, and the same images in TF's shards (labels `1..=1000`) count the
//! same with the background class dropped. The fixture (45 MB of weights, not committed):
//!
//! ```text
//! /work/venv/bin/python scripts/torch_fixtures/torchvision_resnet_eval.py /tmp/tv_resnet_eval
//! TOWERS_TORCHVISION_RESNET_EVAL=/tmp/tv_resnet_eval cargo test -p towers-train --test integration torchvision_resnet
//! ```
//!
//! Without `TOWERS_TORCHVISION_RESNET_EVAL` the test says it was skipped and passes.

use std::path::{Path, PathBuf};

use burn::tensor::Device;
use towers_data::image_folder::ImageFolder;
use towers_data::inception::ShardWriter;
use towers_data::tf_example::ImageRecord;
use towers_models::{BasicBlock, ResNet, ResNetConfig};
use towers_train::{
    InceptionData, LoadOptions, Precision, Preprocessing, Split, evaluate, init_holding_generators,
    load_weights,
};

#[derive(serde::Deserialize)]
struct Expected {
    examples: u64,
    correct_at_1: u64,
    correct_at_5: u64,
}

/// `data` evaluated by the fixture's weights at 224, through torchvision's preset.
fn precision(dir: &Path, data: &Path, background_in_data: bool) -> Precision {
    let eval = Preprocessing::Torchvision.eval(224, None).unwrap();
    let (data, split) = (Some(data), Split::Validation);
    let data = match background_in_data {
        true => InceptionData::open_without_background(data, split, 224, eval).unwrap(),
        false => InceptionData::open(data, split, 224, eval).unwrap(),
    };
    assert_eq!(data.num_classes, 1000, "{}", data.description);
    // Drawn on flex's generator beside the other tests' runs: held meanwhile.
    let model: ResNet<BasicBlock> =
        init_holding_generators(|| ResNetConfig::resnet18(1000).init(&Device::flex()));
    let weights = dir.join("resnet18.pth");
    let (model, report) = load_weights(model, &weights, LoadOptions::new()).unwrap();
    assert!(report.missing.is_empty(), "{report}");
    evaluate(&model, &data.input, 5, 2).unwrap()
}

/// The image folder `val` as TF's validation shards in `out`, labels one higher.
fn as_shards(val: &Path, out: &Path) {
    let folder = ImageFolder::scan_allowing_empty_classes(val).unwrap();
    let mut writer = ShardWriter::create(out, "validation", 2, folder.files().len()).unwrap();
    for file in folder.files() {
        writer
            .write(&ImageRecord {
                encoded: std::fs::read(file).unwrap(),
                label: folder.label(file).unwrap() + 1,
                text: None,
                boxes: Vec::new(),
                height: None,
                width: None,
                filename: None,
            })
            .unwrap();
    }
    writer.finish().unwrap();
}

#[test]
fn torchvision_resnet_evaluates_as_torchvision() {
    let Some(dir) = std::env::var_os("TOWERS_TORCHVISION_RESNET_EVAL").map(PathBuf::from) else {
        println!("skipped: TOWERS_TORCHVISION_RESNET_EVAL names no fixture (see the file's doc)");
        return;
    };
    let json = std::fs::read_to_string(dir.join("expected.json")).unwrap();
    let expected: Expected = serde_json::from_str(&json).unwrap();
    let torchvisions = (
        expected.examples,
        expected.correct_at_1,
        expected.correct_at_5,
    );
    let folder = precision(&dir, &dir.join("val"), false);
    println!("image folder: {folder}");
    let counts = |p: Precision| (p.examples, p.correct_at_1, p.correct_at_5.unwrap());
    assert_eq!(
        counts(folder),
        torchvisions,
        "torchvision's reference counts"
    );

    let shards = tempfile::tempdir().unwrap();
    as_shards(&dir.join("val"), shards.path());
    let from_shards = precision(&dir, shards.path(), true);
    println!("TF's shards: {from_shards}");
    assert_eq!(
        counts(from_shards),
        torchvisions,
        "the same images in TF's shards"
    );
}
