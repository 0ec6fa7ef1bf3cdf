//! keras.applications' InceptionV3, ResNet50, ResNet50V2, MobileNetV2, EfficientNetB0 and
//! MobileNetV3Large and Small (1000 classes, random weights) in
//! each of Keras's weight files give Keras's logits, and classify pictures with Keras's top 5
//! and probabilities, through the network's preprocessing (TF's for InceptionV3, Keras's
//! `load_img` and `preprocess_input` for the ResNets); nested in a transfer model of Keras's,
//! they give that model's logits. The files (about 100 MB each) are not in the repository:
//!
//! ```text
//! /tmp/peers/bin/python scripts/tf_fixtures/keras_applications.py inception_v3 /tmp/keras_inception_v3
//! /tmp/peers/bin/python scripts/tf_fixtures/keras_applications.py resnet50 /tmp/keras_resnet50
//! /tmp/peers/bin/python scripts/tf_fixtures/keras_applications.py resnet50v2 /tmp/keras_resnet50v2
//! /tmp/peers/bin/python scripts/tf_fixtures/keras_applications.py mobilenet_v2 /tmp/keras_mobilenet_v2
//! /tmp/peers/bin/python scripts/tf_fixtures/keras_applications.py efficientnet_b0 /tmp/keras_efficientnet_b0
//! /tmp/peers/bin/python scripts/tf_fixtures/keras_applications.py mobilenet_v3_large /tmp/keras_mobilenet_v3_large
//! /tmp/peers/bin/python scripts/tf_fixtures/keras_applications.py mobilenet_v3_small /tmp/keras_mobilenet_v3_small
//! TOWERS_KERAS_INCEPTION_V3=/tmp/keras_inception_v3 TOWERS_KERAS_RESNET50=/tmp/keras_resnet50 \
//!     TOWERS_KERAS_RESNET50V2=/tmp/keras_resnet50v2 TOWERS_KERAS_MOBILENET_V2=/tmp/keras_mobilenet_v2 \
//!     TOWERS_KERAS_EFFICIENTNET_B0=/tmp/keras_efficientnet_b0 \
//!     TOWERS_KERAS_MOBILENET_V3_LARGE=/tmp/keras_mobilenet_v3_large \
//!     TOWERS_KERAS_MOBILENET_V3_SMALL=/tmp/keras_mobilenet_v3_small \
//!     cargo test --workspace --test integration keras_applications
//! ```
//!
//! Without `TOWERS_KERAS_INCEPTION_V3` (`TOWERS_KERAS_RESNET50`, `TOWERS_KERAS_RESNET50V2`,
//! `TOWERS_KERAS_MOBILENET_V2`, `TOWERS_KERAS_EFFICIENTNET_B0`,
//! `TOWERS_KERAS_MOBILENET_V3_LARGE`, `TOWERS_KERAS_MOBILENET_V3_SMALL`) the network's tests
//! say they were skipped and pass.

use std::path::{Path, PathBuf};

use burn::module::Module;
use burn::tensor::{Device, Tensor};
use burn_towers::data::transforms::{InceptionEval, KerasImageNetEval, KerasInputMode, Transform};
use burn_towers::models::weights::{TfNamed, TorchNamed};
use burn_towers::models::{
    Bottleneck, EfficientNet, EfficientNetConfig, ImageClassifier, InceptionV3Config,
    MobileNetLayout, MobileNetV2, MobileNetV2Config, MobileNetV3, MobileNetV3Config, ResNetConfig,
    ResNetV2, ResNetV2Config,
};
use burn_towers::train::{LoadOptions, classify, load_weights, mobilenet_v3_for_weights};

use crate::reference_outputs::{Expected, assert_logits, assert_top_5, inputs};

/// One of keras.applications' networks as its tests need it.
struct Net {
    /// Its name in the fixture script and its files (`inception_v3`).
    name: &'static str,
    /// The variable naming the fixture script's output.
    variable: &'static str,
    /// Its input's side.
    size: usize,
}

const INCEPTION_V3: Net = Net {
    name: "inception_v3",
    variable: "TOWERS_KERAS_INCEPTION_V3",
    size: 299,
};

const RESNET50: Net = Net {
    name: "resnet50",
    variable: "TOWERS_KERAS_RESNET50",
    size: 224,
};

const RESNET50V2: Net = Net {
    name: "resnet50v2",
    variable: "TOWERS_KERAS_RESNET50V2",
    size: 224,
};

const MOBILENET_V2: Net = Net {
    name: "mobilenet_v2",
    variable: "TOWERS_KERAS_MOBILENET_V2",
    size: 224,
};

const MOBILENET_V3_LARGE: Net = Net {
    name: "mobilenet_v3_large",
    variable: "TOWERS_KERAS_MOBILENET_V3_LARGE",
    size: 224,
};

const MOBILENET_V3_SMALL: Net = Net {
    name: "mobilenet_v3_small",
    variable: "TOWERS_KERAS_MOBILENET_V3_SMALL",
    size: 224,
};

const EFFICIENTNET_B0: Net = Net {
    name: "efficientnet_b0",
    variable: "TOWERS_KERAS_EFFICIENTNET_B0",
    size: 224,
};

impl Net {
    /// The fixture script's output, or `None` (the test is skipped).
    fn fixture_dir(&self) -> Option<PathBuf> {
        let dir = std::env::var_os(self.variable).map(PathBuf::from);
        if dir.is_none() {
            println!(
                "skipped: {} names no Keras files (see the file's doc)",
                self.variable
            );
        }
        dir
    }

    /// The network's weight files: Keras 2's, Keras 3's with and without the layers' own
    /// names, and Keras 3's archive.
    fn files(&self) -> [String; 4] {
        ["_keras2.h5", ".weights.h5", "_unnamed.weights.h5", ".keras"]
            .map(|suffix| format!("{}{suffix}", self.name))
    }
}

/// What TF2's files hold besides the variables: the object graph, a checkpoint's
/// `save_counter`.
const TF2_EXTRAS: [&str; 2] = ["_CHECKPOINTABLE_OBJECT_GRAPH", "save_counter"];

/// `model` with every parameter from `dir/file` and every tensor of the file used (but
/// [`TF2_EXTRAS`]).
fn restored<M: Module + TfNamed + TorchNamed>(model: M, dir: &Path, file: &str) -> M {
    let (model, report) = load_weights(model, &dir.join(file), LoadOptions::default()).unwrap();
    let unused = (report.unused.iter()).filter(|name| !TF2_EXTRAS.contains(&name.as_str()));
    assert!(
        report.missing.is_empty() && report.skipped.is_empty() && unused.count() == 0,
        "{file}: {report}"
    );
    model
}

/// `net`'s fixture folder, what Keras gave for it and its input images (NCHW); `None`, said,
/// without one.
fn fixture(net: &Net) -> Option<(PathBuf, Expected, Tensor<4>)> {
    let dir = net.fixture_dir()?;
    let expected = Expected::read(&dir);
    let n = expected.inputs_logits.len();
    let images = inputs(&dir, n, net.size, &Device::flex());
    Some((dir, expected, images))
}

/// Each of `net`'s files in `model` gives Keras's logits and top 5 through `eval`.
fn gives_keras_logits_and_top_5<M>(net: Net, model: impl Fn(usize) -> M, eval: &dyn Transform)
where
    M: Module + TfNamed + TorchNamed + ImageClassifier + 'static,
{
    let Some((dir, expected, images)) = fixture(&net) else {
        return;
    };
    let pictures = expected.picture_files(&dir);
    for file in net.files() {
        let model = restored(model(1000), &dir, &file);
        assert_logits(&file, &model, images.clone(), &expected.inputs_logits);
        let predictions = classify(&model, &pictures, eval, 5).unwrap();
        assert_top_5(&file, "Keras", &predictions, &expected.images, 1e-3);
    }
}

/// TF2's object-based files of `net`'s model (Keras 3's SavedModel, export and
/// `tf.train.Checkpoint`, tf-keras's SavedModel), read by their variables' own names, fill
/// `model` with every parameter and give Keras's logits.
fn tf2_files_give_keras_logits<M>(net: Net, model: impl Fn(usize) -> M)
where
    M: Module + TfNamed + TorchNamed + ImageClassifier + 'static,
{
    let Some((dir, expected, images)) = fixture(&net) else {
        return;
    };
    for suffix in ["_saved", "_exported", "_tf_keras_saved", "_checkpoint"] {
        let file = format!("{}{suffix}", net.name);
        let model = restored(model(1000), &dir, &file);
        assert_logits(&file, &model, images.clone(), &expected.inputs_logits);
    }
}

/// `expected.json`'s logits of the transfer model (`include_top=False`, pooling, dropout and
/// a new `Dense(5)`).
#[derive(serde::Deserialize)]
struct Transfer {
    transfer_logits: Vec<Vec<f32>>,
}

/// Transfer learning as Keras users write it: the network without its top nested in a model
/// of one's own with a new head, in Keras 2's and Keras 3's files (with and without the
/// layers' own names, and the whole model as `.keras`) and in TF2's (SavedModels of both
/// Kerases, a `tf.train.Checkpoint`), fills a 5-class `model` (built for the file at the path
/// it is given) and gives Keras's logits.
fn a_transfer_model_gives_keras_logits<M>(net: Net, model: impl Fn(usize, &Path) -> M)
where
    M: Module + TfNamed + TorchNamed + ImageClassifier + 'static,
{
    let Some(dir) = net.fixture_dir() else {
        return;
    };
    let text = std::fs::read_to_string(dir.join("expected.json")).unwrap();
    let expected: Transfer = serde_json::from_str(&text).unwrap();
    let images = inputs(
        &dir,
        expected.transfer_logits.len(),
        net.size,
        &Device::flex(),
    );
    let files = [
        "transfer_keras2.h5",
        "transfer.weights.h5",
        "transfer_unnamed.weights.h5",
        "transfer.keras",
        "transfer_saved",
        "transfer_tf_keras_saved",
        "transfer_checkpoint",
    ];
    for file in files {
        let model = restored(model(5, &dir.join(file)), &dir, file);
        assert_logits(file, &model, images.clone(), &expected.transfer_logits);
    }
}

/// InceptionV3 of `classes` classes, without an aux head, as Keras builds it.
fn inception_v3(classes: usize) -> burn_towers::models::InceptionV3 {
    InceptionV3Config::new(classes)
        .with_aux_logits(false)
        .init(&Device::flex())
}

/// ResNet50 of `classes` classes in Keras's layout.
fn resnet50(classes: usize) -> burn_towers::models::ResNet50 {
    ResNetConfig::keras_resnet50(classes).init::<Bottleneck>(&Device::flex())
}

/// ResNet50V2 of `classes` classes.
fn resnet50v2(classes: usize) -> ResNetV2 {
    ResNetV2Config::resnet50v2(classes).init(&Device::flex())
}

/// MobileNetV2 of `classes` classes in Keras's layout.
fn mobilenet_v2(classes: usize) -> MobileNetV2 {
    MobileNetV2Config::keras(classes).init(&Device::flex())
}

/// MobileNetV3Large of `classes` classes in Keras's layout.
fn mobilenet_v3_large(classes: usize) -> MobileNetV3 {
    let config = MobileNetV3Config::large().with_layout(MobileNetLayout::Keras);
    config.with_num_classes(classes).init(&Device::flex())
}

/// MobileNetV3Small of `classes` classes in Keras's layout.
fn mobilenet_v3_small(classes: usize) -> MobileNetV3 {
    let config = MobileNetV3Config::small().with_layout(MobileNetLayout::Keras);
    config.with_num_classes(classes).init(&Device::flex())
}

/// EfficientNetB0 of `classes` classes in Keras's layout, built for the ImageNet weights.
fn efficientnet_b0(classes: usize) -> EfficientNet {
    EfficientNetConfig::keras(classes).init(&Device::flex())
}

#[test]
fn keras_inception_v3_files_give_keras_logits_and_top_5() {
    gives_keras_logits_and_top_5(INCEPTION_V3, inception_v3, &InceptionEval::new(299));
}

#[test]
fn keras_inception_v3_saved_models_and_checkpoints_give_keras_logits() {
    tf2_files_give_keras_logits(INCEPTION_V3, inception_v3);
}

#[test]
fn a_keras_inception_v3_transfer_model_gives_keras_logits() {
    a_transfer_model_gives_keras_logits(INCEPTION_V3, |classes, _| inception_v3(classes));
}

#[test]
fn keras_resnet50_files_give_keras_logits_and_top_5() {
    gives_keras_logits_and_top_5(RESNET50, resnet50, &KerasImageNetEval::new(224));
}

#[test]
fn keras_resnet50_saved_models_and_checkpoints_give_keras_logits() {
    tf2_files_give_keras_logits(RESNET50, resnet50);
}

#[test]
fn a_keras_resnet50_transfer_model_gives_keras_logits() {
    a_transfer_model_gives_keras_logits(RESNET50, |classes, _| resnet50(classes));
}

#[test]
fn keras_resnet50v2_files_give_keras_logits_and_top_5() {
    let eval = KerasImageNetEval::new(224).with_mode(KerasInputMode::Tf);
    gives_keras_logits_and_top_5(RESNET50V2, resnet50v2, &eval);
}

#[test]
fn keras_resnet50v2_saved_models_and_checkpoints_give_keras_logits() {
    tf2_files_give_keras_logits(RESNET50V2, resnet50v2);
}

#[test]
fn a_keras_resnet50v2_transfer_model_gives_keras_logits() {
    a_transfer_model_gives_keras_logits(RESNET50V2, |classes, _| resnet50v2(classes));
}

#[test]
fn keras_mobilenet_v2_files_give_keras_logits_and_top_5() {
    let eval = KerasImageNetEval::new(224).with_mode(KerasInputMode::Tf);
    gives_keras_logits_and_top_5(MOBILENET_V2, mobilenet_v2, &eval);
}

#[test]
fn keras_mobilenet_v2_saved_models_and_checkpoints_give_keras_logits() {
    tf2_files_give_keras_logits(MOBILENET_V2, mobilenet_v2);
}

#[test]
fn a_keras_mobilenet_v2_transfer_model_gives_keras_logits() {
    a_transfer_model_gives_keras_logits(MOBILENET_V2, |classes, _| mobilenet_v2(classes));
}

/// Keras's MobileNetV3s take pixels in 0-255 and scale them themselves.
#[test]
fn keras_mobilenet_v3_files_give_keras_logits_and_top_5() {
    let eval = KerasImageNetEval::new(224).with_mode(KerasInputMode::Pixels);
    gives_keras_logits_and_top_5(MOBILENET_V3_LARGE, mobilenet_v3_large, &eval);
    gives_keras_logits_and_top_5(MOBILENET_V3_SMALL, mobilenet_v3_small, &eval);
}

#[test]
fn keras_mobilenet_v3_saved_models_and_checkpoints_give_keras_logits() {
    tf2_files_give_keras_logits(MOBILENET_V3_LARGE, mobilenet_v3_large);
    tf2_files_give_keras_logits(MOBILENET_V3_SMALL, mobilenet_v3_small);
}

/// A MobileNetV3 transfer model has no `conv_2`: the network `matching_keras_file` builds for
/// its file has no hidden layer, and the new dense layer takes the pooled features. For the
/// network's own files it has one.
#[test]
fn a_keras_mobilenet_v3_transfer_model_gives_keras_logits() {
    for (net, config) in [
        (MOBILENET_V3_LARGE, MobileNetV3Config::large()),
        (MOBILENET_V3_SMALL, MobileNetV3Config::small()),
    ] {
        let config = config.with_layout(MobileNetLayout::Keras);
        for file in net
            .fixture_dir()
            .iter()
            .flat_map(|dir| net.files().map(|f| dir.join(f)))
        {
            let matched = config.clone().matching_keras_file(&file).unwrap();
            assert!(matched.hidden_layer, "{}", file.display());
        }
        a_transfer_model_gives_keras_logits(net, |classes, file| {
            let config = config.clone().with_num_classes(classes);
            let model = mobilenet_v3_for_weights(config, file)
                .unwrap()
                .init(&Device::flex());
            assert!(model.hidden.is_none(), "{}", file.display());
            model
        });
    }
}

/// keras.applications' MobileNetV3Large at width 0.75 and minimalistic MobileNetV3Small
/// (`scripts/tf_fixtures/mobilenet_v3_variants.py`, whose output
/// `TOWERS_KERAS_MOBILENET_V3_VARIANTS` names), in tf-keras's and Keras 3's files, give Keras's
/// logits.
#[test]
fn keras_mobilenet_v3_widths_and_minimalistic_give_keras_logits() {
    let variable = "TOWERS_KERAS_MOBILENET_V3_VARIANTS";
    let Some(dir) = std::env::var_os(variable).map(PathBuf::from) else {
        println!("skipped: {variable} names no Keras files (see the test's doc)");
        return;
    };
    let text = std::fs::read_to_string(dir.join("expected.json")).unwrap();
    let expected: std::collections::BTreeMap<String, Vec<Vec<f32>>> =
        serde_json::from_str(&text).unwrap();
    let images = inputs(&dir, 2, 224, &Device::flex());
    let keras = |config: MobileNetV3Config| config.with_layout(MobileNetLayout::Keras);
    let variants = [
        (
            "large_075",
            keras(MobileNetV3Config::large()).with_width(0.75),
        ),
        (
            "small_minimalistic",
            keras(MobileNetV3Config::small()).with_minimalistic(true),
        ),
    ];
    for (variant, config) in variants {
        for file in [
            format!("{variant}_keras2.h5"),
            format!("{variant}.weights.h5"),
        ] {
            let model = restored(config.init(&Device::flex()), &dir, &file);
            assert_logits(&file, &model, images.clone(), &expected[variant]);
        }
    }
}

#[test]
fn keras_efficientnet_b0_files_give_keras_logits_and_top_5() {
    let eval = KerasImageNetEval::new(224).with_mode(KerasInputMode::Pixels);
    gives_keras_logits_and_top_5(EFFICIENTNET_B0, efficientnet_b0, &eval);
}

#[test]
fn keras_efficientnet_b0_saved_models_and_checkpoints_give_keras_logits() {
    tf2_files_give_keras_logits(EFFICIENTNET_B0, efficientnet_b0);
}

#[test]
fn a_keras_efficientnet_b0_transfer_model_gives_keras_logits() {
    a_transfer_model_gives_keras_logits(EFFICIENTNET_B0, |classes, _| efficientnet_b0(classes));
}

/// `expected.json`'s logits of the same weights in an EfficientNetB0 built with
/// `weights=None`, whose input normalization lacks the ImageNet network's rescaling.
#[derive(serde::Deserialize)]
struct WithoutRescaling {
    logits_without_imagenet_rescaling: Vec<Vec<f32>>,
}

/// Keras's files of weights only do not say whether the network was built for the ImageNet
/// weights: built without its rescaling, the network gives the logits of Keras's so built.
/// Keras's files with the model's configuration say: a `.keras` archive of the network built
/// with `weights=None`, tf-keras's whole-model `.h5` of the one built for the ImageNet
/// weights, and tf-keras's SavedModels of both, each build the network they hold
/// (`matching_keras_file`).
#[test]
fn a_keras_efficientnet_b0_without_the_imagenet_rescaling_gives_keras_logits() {
    let Some(dir) = EFFICIENTNET_B0.fixture_dir() else {
        return;
    };
    let text = std::fs::read_to_string(dir.join("expected.json")).unwrap();
    let expected: WithoutRescaling = serde_json::from_str(&text).unwrap();
    let logits = &expected.logits_without_imagenet_rescaling;
    let images = inputs(&dir, logits.len(), 224, &Device::flex());
    let model = EfficientNetConfig::keras(1000)
        .with_imagenet_rescaling(false)
        .init(&Device::flex());
    let model = restored(model, &dir, "efficientnet_b0.weights.h5");
    assert_logits("without the rescaling", &model, images.clone(), logits);
    let with_rescaling = Expected::read(&dir).inputs_logits;
    for (file, logits) in [
        ("efficientnet_b0_plain.keras", logits),
        ("efficientnet_b0_model_keras2.h5", &with_rescaling),
        ("efficientnet_b0_plain_tf_keras_saved", logits),
        ("efficientnet_b0_tf_keras_saved", &with_rescaling),
    ] {
        let config = EfficientNetConfig::keras(1000).matching_keras_file(&dir.join(file));
        let model = restored(config.unwrap().init(&Device::flex()), &dir, file);
        assert_logits(file, &model, images.clone(), logits);
    }
}

/// A Keras file that keeps its model's configuration and an EfficientNet built otherwise are
/// refused, each way round, before a weight is read.
#[test]
fn a_keras_efficientnet_saved_with_another_rescaling_is_refused() {
    let Some(dir) = EFFICIENTNET_B0.fixture_dir() else {
        return;
    };
    let refused = |file: &str, rescaling: bool, words: &str| {
        let config = EfficientNetConfig::keras(1000).with_imagenet_rescaling(rescaling);
        let model = config.init(&Device::flex());
        let error = load_weights(model, &dir.join(file), LoadOptions::default()).err();
        let error = std::error::Error::source(&error.unwrap())
            .unwrap()
            .to_string();
        assert!(
            error.contains(&dir.join(file).display().to_string()),
            "{error}"
        );
        assert!(error.contains(words), "{error}");
    };
    let built_without = "built without the ImageNet weights' rescaling (`weights=None`)";
    refused("efficientnet_b0_plain.keras", true, built_without);
    let built_for = "built for the ImageNet weights (`weights=\"imagenet\"`)";
    refused("efficientnet_b0.keras", false, built_for);
    refused("efficientnet_b0_model_keras2.h5", false, built_for);
    refused("efficientnet_b0_plain_tf_keras_saved", true, built_without);
    refused("efficientnet_b0_tf_keras_saved", false, built_for);
}

/// Loading the Keras file `name` (which need not exist) into `model` fails before the file is
/// read, saying `words`.
fn refused_before_reading<M: Module + TfNamed + TorchNamed>(model: M, name: &str, words: &str) {
    let path = Path::new("/nowhere").join(name);
    let error = load_weights(model, &path, LoadOptions::default())
        .err()
        .unwrap();
    let error = std::error::Error::source(&error).unwrap().to_string();
    let words = format!("{}: {words}", path.display());
    assert!(error.contains(&words), "{error}");
}

/// Keras's MobileNetV2 and torchvision's have the same names and shapes here, but pad their
/// strided convolutions and normalize otherwise: Keras's weights for a MobileNetV2 in
/// torchvision's layout (the default) are refused before the file is read, not loaded into a
/// network that computes something else. So are an EfficientNet's, which besides takes
/// normalized images in torchvision's layout.
#[test]
fn keras_weights_in_torchvision_layout_are_refused() {
    refused_before_reading(
        MobileNetV2Config::new().init(&Device::flex()),
        "mobilenet_v2.weights.h5",
        "keras.applications' MobileNetV2 weights for a MobileNetV2 in torchvision's layout",
    );
    refused_before_reading(
        EfficientNetConfig::new().init(&Device::flex()),
        "efficientnetb0.h5",
        "keras.applications' EfficientNet weights for an EfficientNet in torchvision's layout",
    );
    refused_before_reading(
        MobileNetV3Config::large().init(&Device::flex()),
        "weights_mobilenet_v3_large_224_1.0_float.h5",
        "keras.applications' MobileNetV3 weights for a MobileNetV3 in torchvision's layout",
    );
}

/// And the other way round: torchvision's weights for a network in Keras's layout.
#[test]
fn torchvision_weights_in_keras_layout_are_refused() {
    refused_before_reading(
        MobileNetV2Config::keras(1000).init(&Device::flex()),
        "mobilenet_v2.pth",
        "torchvision's MobileNetV2 weights for a MobileNetV2 in Keras's layout",
    );
    refused_before_reading(
        EfficientNetConfig::keras(1000).init(&Device::flex()),
        "efficientnet_b0.pth",
        "torchvision's EfficientNet weights for an EfficientNet in Keras's layout",
    );
    refused_before_reading(
        mobilenet_v3_small(1000),
        "mobilenet_v3_small.pth",
        "torchvision's MobileNetV3 weights for a MobileNetV3 in Keras's layout",
    );
}

/// Keras's ResNet50 in torchvision's layout (the stride elsewhere, no convolution biases) has
/// every shape but the biases: the biases left over are an error, not a network that loads
/// and computes something else.
#[test]
fn keras_resnet50_weights_in_torchvision_layout_are_refused() {
    let Some(dir) = RESNET50.fixture_dir() else {
        return;
    };
    let model = ResNetConfig::resnet50(1000).init::<Bottleneck>(&Device::flex());
    let path = dir.join("resnet50_keras2.h5");
    let error = load_weights(model, &path, LoadOptions::default())
        .err()
        .unwrap();
    let error = std::error::Error::source(&error).unwrap().to_string();
    let words = "53 of its tensors fit no parameter of the model (`conv1_conv/conv1_conv/bias:0` \
                 and 52 more): weights of another layout or version of the network?";
    assert!(error.contains(words), "{error}");
}

/// Keras's ResNet50V2 and ResNet50 share most layer names and many shapes: either given to the
/// other is an error naming what is left over, not a network that half loads.
#[test]
fn keras_resnet50_and_resnet50v2_weights_refuse_each_other() {
    let (Some(v1_dir), Some(v2_dir)) = (RESNET50.fixture_dir(), RESNET50V2.fixture_dir()) else {
        return;
    };
    let refusal =
        |error: burn_towers::train::Error| std::error::Error::source(&error).unwrap().to_string();
    let v2_file = v2_dir.join("resnet50v2_keras2.h5");
    let error = load_weights(resnet50(1000), &v2_file, LoadOptions::default()).err();
    let words = "68 of its tensors fit no parameter of the model \
                 (`conv2_block1_preact_bn/conv2_block1_preact_bn/beta:0` and 67 more)";
    let error = refusal(error.unwrap());
    assert!(error.contains(words), "{error}");
    let v1_file = v1_dir.join("resnet50_keras2.h5");
    let error = load_weights(resnet50v2(1000), &v1_file, LoadOptions::default()).err();
    let error = refusal(error.unwrap());
    assert!(
        error.contains("116 of its tensors fit no parameter"),
        "{error}"
    );
}
