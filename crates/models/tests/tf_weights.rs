//! Our models filled from TF checkpoints: the name maps cover the variable lists of real TF
//! checkpoints exactly, and a checkpoint written by TF's CIFAR-10 tutorial graph gives TF's
//! logits (scripts/tf_fixtures/cifar10_checkpoint.py wrote the fixture and TF's outputs).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use burn::tensor::{Device, Tensor, TensorData};
use towers_models::weights::{
    KerasSource, MOVING_AVERAGE_SUFFIX, RestoreOptions, Result, SourceTensor, TfCheckpoint,
    TfLayout, TfNamed, TfSource, TfVariable, WeightSource, restore,
};
use towers_models::{Cifar10Config, Cifar10Net, ImageClassifier, InceptionV3, InceptionV3Config};
use towers_testing::assert_error_names;

fn data(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(path)
}

/// The names and TF shapes of a checkpoint's variables (zeros for values), as a source for
/// the model `M`: what a mapping makes of a checkpoint, without its bytes.
struct Listed<M> {
    path: PathBuf,
    variables: BTreeMap<String, Vec<usize>>,
    used: BTreeSet<String>,
    model: std::marker::PhantomData<M>,
}

impl<M: TfNamed> Listed<M> {
    fn read(file: &str) -> Self {
        let path = data(file);
        let text = std::fs::read_to_string(&path).unwrap();
        let variables = text
            .lines()
            .map(|line| {
                let (name, shape) = line.split_once('\t').unwrap();
                (name.to_string(), serde_json::from_str(shape).unwrap())
            })
            .collect();
        Self {
            path,
            variables,
            used: BTreeSet::new(),
            model: std::marker::PhantomData,
        }
    }
}

impl<M: TfNamed> WeightSource for Listed<M> {
    fn path(&self) -> &Path {
        &self.path
    }

    fn tensor(&mut self, path: &str) -> Result<Option<SourceTensor>> {
        let Some(variable) = M::tf_variable(path) else {
            return Ok(None);
        };
        let Some(shape) = self.variables.get(&variable.name) else {
            return Ok(None);
        };
        self.used.insert(variable.name.clone());
        self.used
            .insert(format!("{}{MOVING_AVERAGE_SUFFIX}", variable.name));
        let zeros = vec![0.0; shape.iter().product()];
        let (shape, values) = variable.layout.convert(shape.clone(), zeros);
        Ok(Some(SourceTensor {
            name: variable.name,
            shape,
            values,
        }))
    }

    fn unused(&self) -> Vec<String> {
        let names = self.variables.keys().filter(|n| !self.used.contains(*n));
        names.cloned().collect()
    }
}

const TUTORIAL_EXTRAS: [&str; 5] = [
    "cross_entropy/avg",
    "global_step",
    "local3/weight_loss/avg",
    "local4/weight_loss/avg",
    "total_loss/avg",
];

#[test]
fn the_cifar10_map_covers_the_tutorial_checkpoints_exactly() {
    let device = Device::flex();
    for (file, size) in [
        ("tf_cifar10/variables_24x24.txt", 24),
        ("tf_cifar10/variables_12x12.txt", 12),
    ] {
        let model = Cifar10Config::new().with_image_size(size).init(&device);
        let mut source = Listed::<Cifar10Net>::read(file);
        let (_, report) = restore(model, &mut source, &RestoreOptions::default()).unwrap();
        assert_eq!(report.restored.len(), 10, "{file}");
        assert!(
            report.missing.is_empty() && report.skipped.is_empty(),
            "{report}"
        );
        // The shadows belong to the weights; the loss averages and the step to no parameter.
        assert_eq!(report.unused, TUTORIAL_EXTRAS, "{file}");
    }
}

#[test]
fn the_inception_map_covers_a_tf_slim_checkpoint_exactly() {
    let model = InceptionV3Config::new(1001).init(&Device::flex());
    let mut source = Listed::<InceptionV3>::read("tf_inception_v3_variables.txt");
    let (_, report) = restore(model, &mut source, &RestoreOptions::default()).unwrap();
    assert_eq!(report.restored.len(), source.variables.len() - 1);
    assert!(
        report.missing.is_empty() && report.skipped.is_empty(),
        "{report}"
    );
    assert_eq!(report.unused, ["global_step"]);
}

#[test]
fn other_class_counts_replace_the_classifiers_or_fail_naming_both_shapes() {
    let device = Device::flex();
    let model = || InceptionV3Config::new(5).init(&device);
    let mut source = Listed::<InceptionV3>::read("tf_inception_v3_variables.txt");
    let msg = restore(model(), &mut source, &RestoreOptions::default())
        .unwrap_err()
        .to_string();
    assert_error_names(
        &msg,
        &["[768, 1001]", "[768, 5]", "AuxLogits/Conv2d_2b_1x1/weights"],
    );

    let options = RestoreOptions::new().with_replace_if_reshaped(
        InceptionV3::classifier_paths()
            .iter()
            .map(|s| s.to_string())
            .collect(),
    );
    let mut source = Listed::<InceptionV3>::read("tf_inception_v3_variables.txt");
    let (_, report) = restore(model(), &mut source, &options).unwrap();
    let skipped: Vec<&str> = report.skipped.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        skipped,
        [
            "aux_logits.conv2d_2b_1x1.weight",
            "aux_logits.conv2d_2b_1x1.bias",
            "logits.weight",
            "logits.bias"
        ]
    );
    assert_eq!(report.restored.len(), source.variables.len() - 5);
}

#[derive(serde::Deserialize)]
struct Expected {
    image_size: usize,
    inputs_nhwc: Vec<Vec<Vec<Vec<f32>>>>,
    raw: Run,
    moving_averages: Run,
}

#[derive(serde::Deserialize)]
struct Run {
    logits: Vec<Vec<f32>>,
}

/// The largest difference between `got` and TF's `want`, relative to the largest |logit|.
fn relative_error(got: &[f32], want: &[Vec<f32>]) -> f32 {
    let want: Vec<f32> = want.concat();
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
    let diff = got
        .iter()
        .zip(&want)
        .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    diff / scale
}

/// Logits within 1e-4 of TF's, relative to the largest logit: TF and Burn sum the
/// convolutions in different orders, which costs a few float32 ulps per layer.
const TOLERANCE: f32 = 1e-4;

#[test]
fn the_tutorial_checkpoint_gives_tfs_logits_with_and_without_moving_averages() {
    let expected: Expected =
        serde_json::from_str(&std::fs::read_to_string(data("tf_cifar10/expected.json")).unwrap())
            .unwrap();
    let device = Device::flex();
    let n = expected.inputs_nhwc.len();
    let s = expected.image_size;
    let flat: Vec<f32> = expected.inputs_nhwc.concat().concat().concat();
    let images =
        Tensor::<4>::from_data(TensorData::new(flat, [n, s, s, 3]), &device).permute([0, 3, 1, 2]);
    for (averages, run) in [(false, &expected.raw), (true, &expected.moving_averages)] {
        let checkpoint = TfCheckpoint::open(&data("tf_cifar10")).unwrap();
        let mut source = TfSource::new::<Cifar10Net>(checkpoint, averages);
        let model = Cifar10Config::new().with_image_size(s).init(&device);
        let (model, report) = restore(model, &mut source, &RestoreOptions::default()).unwrap();
        let shadow = report
            .restored
            .iter()
            .all(|(_, name)| name.ends_with("/ExponentialMovingAverage"));
        assert_eq!(shadow, averages, "{report}");
        let logits: Vec<f32> = model
            .forward(images.clone())
            .into_data()
            .try_to_vec()
            .unwrap();
        let error = relative_error(&logits, &run.logits);
        println!("moving averages {averages}: relative error {error:e}");
        assert!(error < TOLERANCE, "{error}");
    }
}

/// A TF2 object-based checkpoint (`tf.train.Checkpoint` of a small Keras 3 model, written by
/// TF 2.21: `scripts/tf_fixtures/tf2_object_checkpoint.py`) is read by its variables' own
/// names, none of which names a parameter of the CIFAR-10 tutorial's net: refused, saying what
/// the file is and giving one of its names.
#[test]
fn a_tf2_object_based_checkpoint_of_another_net_is_refused_naming_its_variables() {
    let checkpoint = TfCheckpoint::open(&data("tf2_object/ckpt-1")).unwrap();
    let mut source = TfSource::new::<Cifar10Net>(checkpoint, false);
    let model = Cifar10Config::new().init(&Device::flex());
    let error = restore(model, &mut source, &RestoreOptions::default()).unwrap_err();
    let message = error.to_string();
    assert!(message.contains("ckpt-1.index"), "{message}");
    assert!(
        message.contains("TF2 object-based checkpoint (`tf.train.Checkpoint`"),
        "{message}"
    );
    assert!(message.contains("(`sequential/"), "{message}");
    assert!(
        message.contains("none of them names a parameter"),
        "{message}"
    );
}

/// A model whose one parameter, `dw`, is the depthwise kernel of the small Keras 3 model of
/// `tf2_object`, named as tf-keras names it.
struct DepthwiseOfKeras;

impl TfNamed for DepthwiseOfKeras {
    fn tf_variable(path: &str) -> Option<TfVariable> {
        let name = "sequential/depthwise_conv2d/depthwise_kernel";
        (path == "dw").then(|| TfVariable::new(name, TfLayout::DepthwiseKernel))
    }

    fn classifier_paths() -> &'static [&'static str] {
        &[]
    }
}

/// Keras 3 names a depthwise convolution's kernel variable `kernel` where tf-keras (and so our
/// nets' TF names) say `depthwise_kernel`: a SavedModel of Keras 3 gives it all the same,
/// converted to our layout, and counts it as used.
#[test]
fn a_keras_3_depthwise_kernel_answers_to_its_tf_keras_name() {
    let checkpoint = TfCheckpoint::open(&data("tf2_object/saved")).unwrap();
    let keras3 = "sequential/depthwise_conv2d/kernel";
    let shape = checkpoint.info(keras3).unwrap().shape.clone();
    let values = checkpoint.read_f32(keras3).unwrap();
    let mut source = KerasSource::from_checkpoint::<DepthwiseOfKeras>(checkpoint).unwrap();
    let tensor = source.tensor("dw").unwrap().unwrap();
    assert_eq!(tensor.name, keras3);
    let (shape, values) = TfLayout::DepthwiseKernel.convert(shape, values);
    assert_eq!((tensor.shape, tensor.values), (shape, values));
    assert!(!source.unused().contains(&keras3.to_string()));
}

/// Keras 3's export keeps its dropout's random-number state as a variable: no network computes
/// with it, so it is not reported unused, where the weights not read are.
#[test]
fn a_dropouts_random_state_is_never_unused() {
    let checkpoint = TfCheckpoint::open(&data("tf2_object/exported")).unwrap();
    let seed = "seed_generator/seed_generator_state";
    assert!(checkpoint.info(seed).is_some(), "the export keeps it");
    let mut source = KerasSource::from_checkpoint::<DepthwiseOfKeras>(checkpoint).unwrap();
    source.tensor("dw").unwrap().unwrap();
    let unused = source.unused();
    assert!(!unused.contains(&seed.to_string()), "{unused:?}");
    assert!(
        unused.contains(&"sequential/conv2d/kernel".to_string()),
        "{unused:?}"
    );
}
