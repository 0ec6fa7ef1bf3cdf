//! What the tests of torchvision's weights share: a committed key list as a weight source
//! ([`KeyList`]), little-endian f32 files ([`read_f32_le`]), logits compared with a stated
//! tolerance ([`assert_logits_close`]), and a whole fixture's test
//! ([`assert_fixture_gives_torchvisions_logits`]).

use std::collections::{BTreeMap, BTreeSet};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use burn::tensor::{Device, Tensor, TensorData};
use towers_models::ImageClassifier;
use towers_models::weights::{
    RestoreOptions, RestoreReport, Result, SourceTensor, TorchLayout, TorchNamed, TorchSource,
    WeightSource, restore, torch_parameter_in,
};

/// The keys and shapes of a torchvision `state_dict()` (zeros for values), as a source for
/// model `M`: what `M`'s name map makes of the state dict, without its bytes. The list is a
/// file of `KEY<TAB>[SHAPE]` lines, as `scripts/torch_fixtures/*.py` write them.
pub struct KeyList<M> {
    path: PathBuf,
    keys: BTreeMap<String, Vec<usize>>,
    accounted: BTreeSet<String>,
    model: PhantomData<M>,
}

impl<M> KeyList<M> {
    /// The list in `path`.
    pub fn read(path: &Path) -> Self {
        let text = std::fs::read_to_string(path).unwrap();
        let keys = text
            .lines()
            .map(|line| {
                let (key, shape) = line.split_once('\t').unwrap();
                (key.to_string(), serde_json::from_str(shape).unwrap())
            })
            .collect();
        Self {
            path: path.to_path_buf(),
            keys,
            accounted: BTreeSet::new(),
            model: PhantomData,
        }
    }

    /// How many keys the list holds.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether the list holds no key.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

impl<M: TorchNamed> WeightSource for KeyList<M> {
    fn path(&self) -> &Path {
        &self.path
    }

    fn tensor(&mut self, path: &str) -> Result<Option<SourceTensor>> {
        let Some(parameter) = torch_parameter_in::<M>(path, |key| self.keys.contains_key(key))
        else {
            return Ok(None);
        };
        let Some(shape) = self.keys.get(&parameter.key).cloned() else {
            return Ok(None);
        };
        self.accounted.insert(parameter.key.clone());
        self.accounted.extend(M::companions(&parameter.key));
        let shape = match &parameter.layout {
            TorchLayout::Transposed => shape.into_iter().rev().collect(),
            TorchLayout::ScaledBy(scale) => {
                assert_eq!(self.keys.get(scale), Some(&vec![shape[0]]), "{scale}");
                shape
            }
            TorchLayout::Same => shape,
            other => panic!("{other:?}: a layout this simulated file does not know"),
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

/// The values of a file of little-endian f32s (`numpy`'s `tofile` on x86 and ARM).
pub fn read_f32_le(path: &Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(bytes.len() % 4, 0, "{}: not whole f32s", path.display());
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

/// A fixture's `inputs.f32` (NCHW f32 images, as the fixture scripts write them) as
/// `[n, 3, size, size]` images on `device`.
pub fn fixture_images(dir: &Path, size: usize, device: &Device) -> Tensor<4> {
    let values = read_f32_le(&dir.join("inputs.f32"));
    let n = values.len() / (3 * size * size);
    Tensor::from_data(TensorData::new(values, [n, 3, size, size]), device)
}

/// Panics unless `report` restored `parameters` tensors and left none missing, skipped or
/// unused: a state dict that filled the whole model with nothing left over.
pub fn assert_restored_exactly(report: &RestoreReport, parameters: usize) {
    assert_eq!(report.restored.len(), parameters, "{report}");
    assert!(
        report.missing.is_empty() && report.skipped.is_empty() && report.unused.is_empty(),
        "{report}"
    );
}

/// Panics unless `got` is within `tolerance` of `want`, relative to the largest |logit| of
/// `want`; prints the difference either way.
pub fn assert_logits_close(got: &[f32], want: &[f32], tolerance: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: logit counts");
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
    let diff = got
        .iter()
        .zip(want)
        .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    println!(
        "{what}: max |diff| {diff:e}, largest |logit| {scale}, relative {:e}",
        diff / scale
    );
    assert!(
        diff / scale < tolerance,
        "{what}: relative difference {}",
        diff / scale
    );
}

/// A fixture of `scripts/torch_fixtures/` in the folder `variable` names: `model`, filled
/// from `{name}.pth` (every one of its `parameters` restored, every key used), gives the
/// logits of `expected.json`'s `name` for `inputs.f32` (`size`x`size` images) within
/// `tolerance` of the largest. Says it was skipped and passes where `variable` is unset.
pub fn assert_fixture_gives_torchvisions_logits<M>(
    variable: &str,
    name: &str,
    model: M,
    parameters: usize,
    size: usize,
    tolerance: f32,
) where
    M: ImageClassifier + TorchNamed,
{
    let Some(dir) = std::env::var_os(variable).map(PathBuf::from) else {
        println!("skipped: {variable} names no fixture (see the file's doc)");
        return;
    };
    let text = std::fs::read_to_string(dir.join("expected.json")).unwrap();
    let expected: BTreeMap<String, Vec<Vec<f32>>> = serde_json::from_str(&text).unwrap();
    let images = fixture_images(&dir, size, &model.devices()[0]);
    let mut source = TorchSource::open::<M>(&dir.join(format!("{name}.pth"))).unwrap();
    let (model, report) = restore(model, &mut source, &RestoreOptions::default()).unwrap();
    assert_restored_exactly(&report, parameters);
    let logits: Vec<f32> = model
        .valid()
        .forward(images)
        .into_data()
        .try_to_vec()
        .unwrap();
    assert_logits_close(&logits, &expected[name].concat(), tolerance, name);
}
