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

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use burn::tensor::{Device, Tensor, TensorData};
use towers_models::weights::{
    RestoreOptions, RestoreReport, Result, SourceTensor, TorchLayout, TorchNamed, TorchSource,
    WeightSource, restore,
};
use towers_models::{ImageClassifier, InceptionV3, InceptionV3Config};

/// The keys and shapes of torchvision's `inception_v3(aux_logits=True).state_dict()` (zeros
/// for values), as a source for Inception v3: what the map makes of the state dict, without
/// its bytes.
struct Listed {
    path: PathBuf,
    keys: BTreeMap<String, Vec<usize>>,
    accounted: BTreeSet<String>,
}

impl Listed {
    fn read() -> Self {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/torchvision_inception_v3_keys.txt");
        let text = std::fs::read_to_string(&path).unwrap();
        let keys = text
            .lines()
            .map(|line| {
                let (key, shape) = line.split_once('\t').unwrap();
                (key.to_string(), serde_json::from_str(shape).unwrap())
            })
            .collect();
        Self {
            path,
            keys,
            accounted: BTreeSet::new(),
        }
    }
}

impl WeightSource for Listed {
    fn path(&self) -> &Path {
        &self.path
    }

    fn tensor(&mut self, path: &str) -> Result<Option<SourceTensor>> {
        let Some(parameter) = InceptionV3::torch_parameter(path) else {
            return Ok(None);
        };
        let Some(shape) = self.keys.get(&parameter.key).cloned() else {
            return Ok(None);
        };
        self.accounted.insert(parameter.key.clone());
        self.accounted
            .extend(InceptionV3::companions(&parameter.key));
        let shape = match &parameter.layout {
            TorchLayout::Transposed => shape.into_iter().rev().collect(),
            TorchLayout::ScaledBy(scale) => {
                assert_eq!(self.keys.get(scale), Some(&vec![shape[0]]), "{scale}");
                shape
            }
            TorchLayout::Same => shape,
        };
        Ok(Some(SourceTensor {
            name: parameter.key,
            values: vec![0.0; shape.iter().product()],
            shape,
        }))
    }

    fn unused(&self) -> Vec<String> {
        let keys = self.keys.keys().filter(|k| !self.accounted.contains(*k));
        keys.cloned().collect()
    }
}

/// Our Inception v3 for torchvision's weights: 1000 classes, pools counting their padding.
fn torchvision_layout(device: &Device) -> InceptionV3 {
    InceptionV3Config::new(1000)
        .with_pool_counts_padding(true)
        .init(device)
}

/// Every parameter restored, and every key of the file used.
fn assert_complete(report: &RestoreReport) {
    assert_eq!(report.restored.len(), 96 * 4 + 4, "{report}");
    assert!(
        report.missing.is_empty() && report.skipped.is_empty() && report.unused.is_empty(),
        "{report}"
    );
}

#[test]
fn the_map_covers_torchvisions_state_dict_exactly() {
    let mut source = Listed::read();
    assert_eq!(source.keys.len(), 580);
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
    let bytes = std::fs::read(dir.join("inputs.f32")).unwrap();
    let values: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let n = expected.inputs_logits.len();
    let images = Tensor::<4>::from_data(TensorData::new(values, [n, 3, 299, 299]), &device);
    let logits: Vec<f32> = model.forward(images).into_data().try_to_vec().unwrap();
    let want = expected.inputs_logits.concat();
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
    let diff = logits
        .iter()
        .zip(&want)
        .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    println!(
        "torchvision logits: max |diff| {diff:e}, largest |logit| {scale}, relative {:e}",
        diff / scale
    );
    assert!(diff / scale < TOLERANCE, "{}", diff / scale);
}
