//! Starting from trained weights: a checkpoint written by TF's CIFAR-10 tutorial graph
//! (crates/models/tests/data/tf_cifar10, from scripts/tf_fixtures/cifar10_checkpoint.py)
//! evaluates to TF's own precision on the same test file, fine-tuning starts from it, trainable
//! scopes freeze the rest, exported weights load back to identical logits, and a checkpoint of
//! ours fills a model whole or not at all, and says which head its MobileNetV3 had.

use std::path::{Path, PathBuf};

use burn::module::Module;
use burn::tensor::{Device, Distribution, Tensor};
use towers_data::cifar10::Cifar10Format;
use towers_data::transforms::CifarEval;
use towers_models::{
    BasicBlock, Bottleneck, Cifar10Config, Cifar10Net, ImageClassifier, InceptionV3Config,
    MobileNetV3Config, ResNet, ResNetConfig, ResNetLayout,
};
use towers_train::{
    Checkpoint, Input, LoadOptions, LrScheduleConfig, OptimizerConfig, TrainConfig, Trained,
    Trainer, classes_in_weights, evaluate, export_safetensors, fine_tuning, holds_keras_weights,
    init_holding_generators, is_pytorch_file, load_weights, lock_device_generators,
    mobilenet_v3_for_weights, read_log, resnet_layout_for,
};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/tests/data/tf_cifar10")
}

#[derive(serde::Deserialize)]
struct Expected {
    image_size: usize,
    examples: u64,
    raw: Run,
    moving_averages: Run,
}

#[derive(serde::Deserialize)]
struct Run {
    correct_at_1: u64,
}

fn expected() -> Expected {
    serde_json::from_str(&std::fs::read_to_string(fixture().join("expected.json")).unwrap())
        .unwrap()
}

fn net(size: usize, classes: usize) -> impl Fn(&Device) -> Cifar10Net {
    move |device| {
        Cifar10Config::new()
            .with_image_size(size)
            .with_num_classes(classes)
            .init(device)
    }
}

/// [`net`] built on flex outside a run: it draws on flex's generator beside the other tests'
/// runs, so it holds the generators meanwhile (see `lock_device_generators`).
fn net_on_flex(size: usize, classes: usize) -> Cifar10Net {
    init_holding_generators(|| net(size, classes)(&Device::flex()))
}

fn test_input(size: usize) -> Input {
    let files = vec![fixture().join("test_batch.bin")];
    Input::new(Cifar10Format, files, CifarEval { size })
}

#[test]
fn the_tutorial_checkpoint_scores_tfs_precision_on_the_same_test_file() {
    let expected = expected();
    let s = expected.image_size;
    for (moving_averages, run) in [(false, &expected.raw), (true, &expected.moving_averages)] {
        let model = net_on_flex(s, 10);
        let options = LoadOptions::new().with_moving_averages(moving_averages);
        let (model, report) = load_weights(model, &fixture(), options).unwrap();
        assert!(report.missing.is_empty(), "{report}");
        let precision = evaluate(&model, &test_input(s), 64, 2).unwrap();
        println!("moving averages {moving_averages}: {precision}");
        assert_eq!(precision.examples, expected.examples);
        assert_eq!(
            precision.correct_at_1, run.correct_at_1,
            "TF's in_top_k count"
        );
    }
}

/// Two steps of SGD at a small rate on the fixture's images, starting from `pretrained`.
/// Returns the model, the first logged loss and the last checkpoint.
fn fine_tune(
    dir: &Path,
    pretrained: Option<PathBuf>,
    scopes: &[&str],
    classes: usize,
) -> (Cifar10Net, f64, PathBuf) {
    let trained = fine_tune_run(fine_tune_config(dir), pretrained, scopes, classes).unwrap();
    let first = read_log(&dir.join(towers_train::LOG_FILE)).unwrap()[0].loss;
    (trained.model, first, trained.report.checkpoint.unwrap())
}

/// Two steps in `dir` with momentum at a constant rate, every step logged.
fn fine_tune_config(dir: &Path) -> TrainConfig {
    let mut config = TrainConfig::cifar10();
    config.devices = "flex".into();
    config.batch_size = 50;
    config.reader_threads = Some(2);
    config.max_steps = 2;
    config.optimizer = OptimizerConfig::Momentum {
        momentum: 0.9,
        nesterov: false,
    };
    config.learning_rate = LrScheduleConfig::Constant { value: 0.01 };
    config.log_every = 1;
    config.train_dir = dir.to_path_buf();
    config.seed = 3;
    config
}

/// A run of `config` from `pretrained` training only `scopes` (all when none).
fn fine_tune_run(
    config: TrainConfig,
    pretrained: Option<PathBuf>,
    scopes: &[&str],
    classes: usize,
) -> towers_train::Result<Trained<Cifar10Net>> {
    let s = expected().image_size;
    // Undistorted crops, as the fixture's model was trained on: the first loss is then the
    // restored model's on that batch.
    let files = vec![fixture().join("test_batch.bin")];
    let transform = CifarEval { size: s };
    let scopes = scopes.iter().map(|s| s.to_string()).collect();
    Trainer::new(config)
        .with_prepare(fine_tuning(pretrained, scopes))
        .run(
            net(s, classes),
            &Input::new(Cifar10Format, files, transform),
        )
}

/// A run resumed with other trainable scopes than its checkpoint's is refused, naming the
/// checkpoint and what each run froze; resumed with the same scopes, it goes on.
#[test]
fn resuming_with_other_trainable_scopes_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, _, checkpoint) = fine_tune(tmp.path(), None, &["softmax_linear"], 10);
    let resumed = |scopes: &[&str]| {
        let mut config = fine_tune_config(tmp.path());
        config.resume = true;
        config.max_steps = 3;
        fine_tune_run(config, None, scopes, 10)
    };
    let error = resumed(&[]).err().unwrap().to_string();
    for words in [
        checkpoint.to_str().unwrap(),
        "written by a run that froze 8 parameters, where this run freezes 0",
        "`conv1.weight` is frozen in one only",
        &format!("--pretrained {}", checkpoint.display()),
    ] {
        assert!(error.contains(words), "{error}");
    }
    assert_eq!(resumed(&["softmax_linear"]).unwrap().report.step, 3);
}

/// The restored model's mean loss over the test file (cross-entropy and weight decay).
fn restored_loss() -> f64 {
    let s = expected().image_size;
    let device = Device::flex();
    let (model, _) = load_weights(net_on_flex(s, 10), &fixture(), LoadOptions::default()).unwrap();
    let mut pipeline = test_input(s)
        .start(towers_data::PipelineConfig::eval(200))
        .unwrap();
    let batch = pipeline.next_batch().unwrap().unwrap();
    let (images, labels) = batch.as_slice().to_tensors(&device);
    model.loss(images, labels).loss.into_scalar::<f32>() as f64
}

#[test]
fn fine_tuning_starts_from_the_restored_weights() {
    let restored = restored_loss();
    let tmp = tempfile::tempdir().unwrap();
    let (_, from_tf, _) = fine_tune(&tmp.path().join("a"), Some(fixture()), &[], 10);
    let (_, from_scratch, _) = fine_tune(&tmp.path().join("b"), None, &[], 10);
    println!(
        "restored model {restored:.3}, first loss from TF {from_tf:.3}, from scratch {from_scratch:.3}"
    );
    // The training crops are distorted, the evaluation's are not: near, not equal.
    assert!(
        (from_tf - restored).abs() < 0.25 * restored.max(0.5),
        "{from_tf} vs {restored}"
    );
    assert!(
        from_scratch > restored + 1.0,
        "{from_scratch} vs {restored}"
    );
}

fn flat<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().try_to_vec().unwrap()
}

/// Some parameters' values, by module path.
fn values(m: &Cifar10Net) -> Vec<(&'static str, Vec<f32>)> {
    let bias = |l: &burn::nn::Linear| flat(l.bias.as_ref().unwrap().val());
    vec![
        ("conv1.weight", flat(m.conv1.weight.val())),
        ("conv2.weight", flat(m.conv2.weight.val())),
        ("local3.weight", flat(m.local3.weight.val())),
        ("local4.bias", bias(&m.local4)),
        ("softmax_linear.weight", flat(m.softmax_linear.weight.val())),
        ("softmax_linear.bias", bias(&m.softmax_linear)),
    ]
}

#[test]
fn trainable_scopes_train_only_those_and_other_class_counts_reinitialize_the_head() {
    let tmp = tempfile::tempdir().unwrap();
    let s = expected().image_size;
    let (restored, _) =
        load_weights(net_on_flex(s, 10), &fixture(), LoadOptions::default()).unwrap();
    let before = values(&restored);
    // TF-slim's scope name and our module path, together.
    let scopes = ["softmax_linear", "local4/biases"];
    let (tuned, _, last) = fine_tune(&tmp.path().join("a"), Some(fixture()), &scopes, 10);
    for ((path, old), (_, new)) in before.iter().zip(values(&tuned)) {
        let trained = path.starts_with("softmax_linear") || *path == "local4.bias";
        assert_eq!(old != &new, trained, "{path}");
    }
    // Momentum keeps one velocity per trained parameter, none for the frozen ones.
    assert_eq!(Checkpoint::load(&last).unwrap().optimizer.len(), 3);

    // 12 classes: the head starts afresh (cross-entropy near ln 12), the rest is restored
    // (the same weight decay as the restored model's).
    let penalty: f32 = restored.regularization().unwrap().into_scalar();
    let (tuned, first, _) = fine_tune(
        &tmp.path().join("b"),
        Some(fixture()),
        &["softmax_linear"],
        12,
    );
    let cross_entropy = first - penalty as f64;
    assert!((cross_entropy - 12f64.ln()).abs() < 0.3, "{cross_entropy}");
    let after = values(&tuned);
    assert_eq!(before[0], after[0], "conv1 restored and frozen");
    assert_eq!(after[4].1.len(), 192 * 12);
}

#[test]
fn exported_and_checkpointed_weights_load_back_to_identical_logits() {
    // Draws on flex's generator beside the other tests' runs (see `lock_device_generators`).
    let _generators = lock_device_generators();
    let device = Device::flex();
    let dir = tempfile::tempdir().unwrap();
    let images = Tensor::<4>::random([2, 3, 75, 75], Distribution::Default, &device);
    let model = InceptionV3Config::new(7)
        .with_image_size(75)
        .with_aux_logits(false)
        .init(&device);
    let logits: Vec<f32> = model
        .forward(images.clone())
        .into_data()
        .try_to_vec()
        .unwrap();

    let exported = dir.path().join("inception.safetensors");
    export_safetensors(&model, &exported).unwrap();
    let ckpt = dir.path().join("model.ckpt-3");
    save_checkpoint(model.clone(), 3, &ckpt);
    for path in [&exported, &ckpt, &dir.path().to_path_buf()] {
        let fresh = InceptionV3Config::new(7)
            .with_image_size(75)
            .with_aux_logits(false)
            .init(&device);
        let (loaded, report) = load_weights(fresh, path, LoadOptions::default()).unwrap();
        assert!(
            report.missing.is_empty() && report.unused.is_empty(),
            "{report}"
        );
        let again: Vec<f32> = loaded
            .forward(images.clone())
            .into_data()
            .try_to_vec()
            .unwrap();
        assert_eq!(again, logits, "{}", path.display());
    }
}

/// `model` saved at `path` as a checkpoint of ours of `step` (a fresh SGD's state, nothing
/// else).
fn save_checkpoint<M: Module>(model: M, step: u64, path: &Path) {
    Checkpoint {
        step,
        model: model.into_record(),
        optimizer: burn::optim::SgdConfig::new().init().to_record(),
        averages: None,
        input: None,
        config: serde_json::Value::Null,
        loss_scale: None,
    }
    .save(path)
    .unwrap();
}

/// A checkpoint of ours of a ResNet in Keras's layout, given to torchvision's (every shape but
/// the convolutions' biases), is refused, file and train directory alike; the same weights
/// exported as safetensors (a format others write too) load, the biases reported unused.
#[test]
fn a_checkpoint_of_another_layout_is_refused() {
    // Draws on flex's generator beside the other tests' runs (see `lock_device_generators`).
    let _generators = lock_device_generators();
    let device = Device::flex();
    let dir = tempfile::tempdir().unwrap();
    let resnet = |layout| {
        ResNetConfig::resnet18(3)
            .with_image_size(32)
            .with_layout(layout)
            .init::<BasicBlock>(&device)
    };
    let keras = resnet(ResNetLayout::Keras);
    let exported = dir.path().join("resnet.safetensors");
    export_safetensors(&keras, &exported).unwrap();
    let ckpt = dir.path().join("model.ckpt-1");
    save_checkpoint(keras, 1, &ckpt);
    for path in [&ckpt, &dir.path().to_path_buf()] {
        let torchvision = resnet(ResNetLayout::Torchvision);
        let error = load_weights(torchvision, path, LoadOptions::default())
            .err()
            .unwrap();
        let error = std::error::Error::source(&error).unwrap().to_string();
        let words = "tensors fit no parameter of the model (`conv1.bias` and ";
        assert!(error.contains(words), "{}: {error}", path.display());
    }
    let torchvision = resnet(ResNetLayout::Torchvision);
    let (_, report) = load_weights(torchvision, &exported, LoadOptions::default()).unwrap();
    assert!(
        report.unused.contains(&"conv1.bias".to_string()),
        "{report}"
    );
}

/// A checkpoint of ours (a file, a train directory) of a MobileNetV3 built without its hidden
/// layer gives the configuration of that head, and one with it the other: the network
/// `mobilenet_v3_for_weights` builds takes the checkpoint whole.
#[test]
fn a_mobilenet_v3_checkpoint_gives_the_head_it_was_trained_with() {
    // Draws on flex's generator beside the other tests' runs (see `lock_device_generators`).
    let _generators = lock_device_generators();
    let device = Device::flex();
    for hidden_layer in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let config = MobileNetV3Config::small()
            .with_num_classes(3)
            .with_image_size(32);
        let trained = config.clone().with_hidden_layer(hidden_layer);
        let ckpt = dir.path().join("model.ckpt-1");
        save_checkpoint(trained.init(&device), 1, &ckpt);
        for path in [&ckpt, &dir.path().to_path_buf()] {
            let matched = mobilenet_v3_for_weights(config.clone(), path).unwrap();
            assert_eq!(matched.hidden_layer, hidden_layer, "{}", path.display());
            let (_, report) =
                load_weights(matched.init(&device), path, LoadOptions::default()).unwrap();
            assert!(report.missing.is_empty(), "{report}");
        }
    }
}

/// A 7-class ResNet-18 for 32x32 images, built on flex outside a run: it draws on flex's
/// generator beside the other tests' runs, so it holds the generators meanwhile (see
/// `lock_device_generators`).
fn resnet18_on_flex() -> ResNet<BasicBlock> {
    init_holding_generators(|| {
        ResNetConfig::resnet18(7)
            .with_image_size(32)
            .init(&Device::flex())
    })
}

/// The classes of a file's classifier, read for the model that takes it: TF's CIFAR-10
/// checkpoint (10), a checkpoint of ours of a 7-class ResNet-18 (file and train directory), a
/// Keras file whose dense `predictions` has 3 and a transfer model's whose new `dense` has 3
/// (`crates/models/tests/data/keras`); a file that is not there is an error naming it.
#[test]
fn the_classes_of_a_files_classifier_are_read_for_its_model() {
    assert_eq!(
        classes_in_weights::<Cifar10Net>(&fixture()).unwrap(),
        Some(10)
    );
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("model.ckpt-1");
    save_checkpoint(resnet18_on_flex(), 1, &ckpt);
    for path in [&ckpt, &dir.path().to_path_buf()] {
        let classes = classes_in_weights::<ResNet<BasicBlock>>(path).unwrap();
        assert_eq!(classes, Some(7), "{}", path.display());
    }
    let keras = Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/tests/data/keras");
    let classes = |file: &str| classes_in_weights::<ResNet<Bottleneck>>(&keras.join(file));
    assert_eq!(classes("model.weights.h5").unwrap(), Some(3));
    assert_eq!(classes("nested_keras2.h5").unwrap(), Some(3));
    let error = classes("missing.h5").unwrap_err();
    let cause = std::error::Error::source(&error).unwrap().to_string();
    assert!(cause.contains("missing.h5"), "{cause}");
}

/// Keras models' weights are told by their files (`.h5`, `.keras`) and, saved by TF2, by
/// their object-based checkpoints (a SavedModel's folder or `saved_model.pb`, a
/// `tf.train.Checkpoint`'s folder or prefix), which decide a ResNet's layout; TF 1's
/// checkpoints, ours and PyTorch's are not theirs.
#[test]
fn keras_models_weights_are_told_from_other_weights() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/tests/data");
    let object = data.join("tf2_object");
    for keras in [
        data.join("keras/model.keras"),
        data.join("keras/model.weights.h5"),
        object.join("saved"),
        object.join("saved/saved_model.pb"),
        object.join("tf_keras_saved"),
        object.to_path_buf(),
        object.join("ckpt-1"),
    ] {
        assert!(holds_keras_weights(&keras), "{}", keras.display());
        assert_eq!(resnet_layout_for(&keras), ResNetLayout::Keras);
    }
    let dir = tempfile::tempdir().unwrap();
    let ours = dir.path().join("model.ckpt-1");
    save_checkpoint(resnet18_on_flex(), 1, &ours);
    for other in [
        fixture().join("model.ckpt-200"),
        fixture(),
        ours,
        data.join("torch_checkpoints/tutorial.pt"),
        dir.path().join("missing"),
    ] {
        assert!(!holds_keras_weights(&other), "{}", other.display());
        assert_eq!(resnet_layout_for(&other), ResNetLayout::Torchvision);
    }
}

/// PyTorch files are known by what `torch.save` writes first, whatever their names (PyTorch's
/// ImageNet example's `.pth.tar`, in both of `torch.save`'s formats, Lightning's `.ckpt`,
/// Hugging Face's `pytorch_model.bin`), and a training checkpoint's classifier is read from the
/// state dict inside it (`crates/models/tests/data/torch_checkpoints`). Nothing else is taken
/// for one: TF's checkpoint, ours, Keras files (a `.keras` is a zip too), a folder, no file.
#[test]
fn pytorch_files_are_known_by_their_bytes_whatever_their_names() {
    let torch =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/tests/data/torch_checkpoints");
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("pytorch_model.bin");
    std::fs::copy(torch.join("tutorial.pt"), &bin).unwrap();
    let ours = dir.path().join("model.ckpt-1");
    save_checkpoint(resnet18_on_flex(), 1, &ours);
    let keras = Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/tests/data/keras");
    for file in [
        "imagenet_example.pth.tar",
        "legacy_imagenet_example.pth.tar",
        "lightning.ckpt",
    ] {
        assert!(is_pytorch_file(&torch.join(file)), "{file}");
    }
    assert!(is_pytorch_file(&bin));
    for other in [
        fixture().join("model.ckpt-200"),
        fixture().join("model.ckpt-200.index"),
        ours,
        keras.join("model.keras"),
        keras.join("model.weights.h5"),
        dir.path().to_path_buf(),
        dir.path().join("missing.pth.tar"),
    ] {
        assert!(!is_pytorch_file(&other), "{}", other.display());
    }
    for file in [
        "imagenet_example.pth.tar",
        "legacy_imagenet_example.pth.tar",
    ] {
        let classes = classes_in_weights::<ResNet<BasicBlock>>(&torch.join(file)).unwrap();
        assert_eq!(classes, Some(2), "{file}");
    }
}
