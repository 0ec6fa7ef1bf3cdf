//! Starting from trained weights: a TensorFlow checkpoint, a torchvision state dict (`.pth`),
//! keras.applications' Inception v3, ResNet50 or ResNet50V2 in a Keras file (`.h5`,
//! `.keras`), a checkpoint of ours or a safetensors export, read into a model by parameter path
//! ([`towers_models::weights`]), and TF-slim's fine-tuning choices: classifier layers
//! re-initialized for another class count (`--checkpoint_exclude_scopes`), and only some scopes
//! trained (`--trainable_scopes`).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use burn::config::Config;
use burn::module::{Module, ModuleMapper, Param};
use burn::tensor::{Tensor, TensorData};
use towers_models::weights::{
    ByPath, KerasConfig, KerasSource, RestoreOptions, RestoreReport, TfCheckpoint, TfNamed,
    TfSource, TorchNamed, TorchSource, WeightSource, WeightsError, in_scope, open_safetensors,
    restore, to_safetensors,
};
use towers_models::{
    EfficientNetConfig, MobileNetV3, MobileNetV3Config, ResNetLayout, is_moving_statistic,
};

use crate::checkpoint::Checkpoint;
use crate::checkpoint::CheckpointDir;
use crate::error::{Error, Result};
use crate::tf_run::TfRun;
use towers_multigpu::Cause;

/// How to read weights into a model: [`new`](Self::new) (the file's weights as they are; also
/// [`Default`]) and `with_*`, as Burn's configs.
#[derive(Config, Debug, Copy)]
#[non_exhaustive]
pub struct LoadOptions {
    /// Read the moving averages of the weights where the file has them (TF's
    /// `.../ExponentialMovingAverage` shadows, the `averages` of our checkpoints), as TF's
    /// evaluation scripts do.
    #[config(default = false)]
    pub moving_averages: bool,
    /// Re-initialize the classifier layers when their shape differs from the file's (another
    /// number of classes), instead of failing.
    #[config(default = false)]
    pub fine_tune: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self::new()
    }
}

/// `model` with the weights at `path`, and what was restored, skipped, missing and unused.
///
/// `path` is a TF checkpoint (a prefix such as `model.ckpt-1000`, its `.index`, or a directory
/// with a `checkpoint` state file; a TF2 object-based one, `tf.train.Checkpoint` of a Keras
/// model, is read as that Keras model), a SavedModel's folder (its `variables/`, likewise), a
/// PyTorch file (torchvision's state dict, or a training checkpoint or wrapped model's state
/// dict holding one: see [`is_pytorch_file`]), keras.applications' InceptionV3, ResNet50 or
/// ResNet50V2 in a Keras file (see [`is_keras_file`]), a checkpoint of ours (`model.ckpt-N`,
/// or a train directory, whose newest is taken: in a TF run's directory that a run of ours
/// continued, ours unless TF's is at a later step), or a `.safetensors` file (an export of
/// ours, or a PyTorch state dict saved as safetensors: see `open_safetensors`). A Keras file or
/// a checkpoint of ours holds one network's weights and nothing else: every tensor of it must
/// find a parameter (a ResNet's of another [`ResNetLayout`] or version would not).
pub fn load_weights<M: Module + TfNamed + TorchNamed>(
    model: M,
    path: &Path,
    options: LoadOptions,
) -> Result<(M, RestoreReport)> {
    if let Some(reason) = refusal(&model, path)? {
        let path = path.into();
        return Err(WeightsError::Format {
            path,
            reason,
            error: None,
        }
        .into());
    }
    let (mut source, whole_network) = open_source::<M>(path, options.moving_averages)?;
    let restore_options = RestoreOptions::new()
        .with_replace_if_reshaped(match options.fine_tune {
            true => M::classifier_paths()
                .iter()
                .map(|p| p.to_string())
                .collect(),
            false => Vec::new(),
        })
        .with_every_tensor_used(whole_network);
    Ok(restore(model, source.as_mut(), &restore_options)?)
}

/// Why `model` cannot take the weights at `path` though their names and shapes may fit (a
/// network of another library's layout, or one a Keras file's configuration says was built
/// otherwise), or `None`. Only a Keras file's configuration is read.
fn refusal<M: TfNamed + TorchNamed>(model: &M, path: &Path) -> Result<Option<String>> {
    if is_pytorch_file(path) {
        return Ok(model.refuses_torch_weights());
    }
    // Keras's files and TF's checkpoints (SavedModels included) name TF's weights.
    let by_path = path.extension().is_some_and(|e| e == "safetensors");
    if by_path || (!is_keras_file(path) && our_checkpoint(path)?.is_some()) {
        return Ok(None);
    }
    if let Some(reason) = model.refuses_tf_weights() {
        return Ok(Some(reason));
    }
    let config = KerasConfig::read(path)?;
    Ok(config.and_then(|config| model.refuses_keras_config(&config)))
}

/// The weights at `path` (see [`load_weights`]) as a source for the model `M`.
pub fn open_weights<M: TfNamed + TorchNamed>(
    path: &Path,
    moving_averages: bool,
) -> Result<Box<dyn WeightSource>> {
    open_source::<M>(path, moving_averages).map(|(source, _)| source)
}

/// The classes of the classifier of the weights at `path` for the model `M`: the length of the
/// bias of its first classifier layer ([`TfNamed::classifier_paths`]); `None` where the file
/// has none (a network without its top).
pub fn classes_in_weights<M: TfNamed + TorchNamed>(path: &Path) -> Result<Option<usize>> {
    let Some(classifier) = M::classifier_paths().first() else {
        return Ok(None);
    };
    let bias = open_weights::<M>(path, false)?.tensor(&format!("{classifier}.bias"))?;
    Ok(bias.map(|bias| bias.values.len()))
}

/// [`open_weights`], and whether the file holds one network's weights and nothing else (a
/// Keras file, a checkpoint of ours), so that every tensor of it must find a parameter.
fn open_source<M: TfNamed + TorchNamed>(
    path: &Path,
    moving_averages: bool,
) -> Result<(Box<dyn WeightSource>, bool)> {
    if path.extension().is_some_and(|e| e == "safetensors") {
        return Ok((open_safetensors::<M>(path)?, false));
    }
    if is_pytorch_file(path) {
        return Ok((Box::new(TorchSource::open::<M>(path)?), false));
    }
    if is_keras_file(path) {
        return Ok((Box::new(KerasSource::open::<M>(path)?), true));
    }
    if let Some(file) = our_checkpoint(path)? {
        return Ok((Box::new(ours_by_path(&file, moving_averages)?), true));
    }
    let checkpoint = TfCheckpoint::open(path)?;
    match checkpoint.is_object_based() {
        // TF2's files of a Keras model: its variables' own names are Keras's.
        true => Ok((
            Box::new(KerasSource::from_checkpoint::<M>(checkpoint)?),
            false,
        )),
        false => Ok((
            Box::new(TfSource::new::<M>(checkpoint, moving_averages)),
            false,
        )),
    }
}

/// The checkpoint of ours at `path`: the file itself, or a train directory's newest, unless
/// the directory's TF run (its `checkpoint` state file) is at a later step; `None` for anything
/// else. A TF run continued here holds both, ours the later ones (TF's at the step the
/// continuation started from).
fn our_checkpoint(path: &Path) -> Result<Option<PathBuf>> {
    if !path.is_dir() {
        return Ok(Some(path.to_path_buf()).filter(|p| is_ours(p)));
    }
    let Some((step, newest)) = CheckpointDir::new(path, 1).latest()? else {
        return Ok(None);
    };
    // A state file naming what cannot be read leaves ours.
    let tf_step = TfRun::find(path).ok().flatten().map(|run| run.step());
    Ok(tf_step
        .is_none_or(|tf_step| step >= tf_step)
        .then_some(newest))
}

/// Whether `path` holds a PyTorch file: torchvision's weights or a training checkpoint holding
/// a state dict (`TorchSource`), for a model built in torchvision's layout (Inception v3: 1000
/// classes, no background class, and `pool_counts_padding`). Named `.pth` or `.pt`, or named
/// otherwise (PyTorch's ImageNet example's `checkpoint.pth.tar`, Lightning's `.ckpt`, Hugging
/// Face's `pytorch_model.bin`) and opening as `torch.save` writes a file. torchvision's
/// `transform_input` re-normalises ImageNet-normalised images to [-1, 1]; our Inception
/// preprocessing gives [-1, 1] already, which is what the network behind `transform_input`
/// sees, so nothing is applied.
pub fn is_pytorch_file(path: &Path) -> bool {
    let named = path.extension().is_some_and(|e| e == "pth" || e == "pt");
    named || (!is_keras_file(path) && opens_as_torch_save(path))
}

/// Whether the file at `path` opens as `torch.save` writes one: a zip (PyTorch 1.6 on), or the
/// magic number of the format before it (0x1950a86a20f9469cfc6c, pickled by protocol 2). A TF
/// checkpoint's prefix (no file), a directory, our checkpoints and safetensors files do not.
fn opens_as_torch_save(path: &Path) -> bool {
    const LEGACY: [u8; 14] = [
        0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19,
    ];
    let mut head = [0u8; LEGACY.len()];
    let read = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut head));
    read.is_ok() && (head.starts_with(b"PK\x03\x04") || head == LEGACY)
}

/// Whether `path` names a Keras weights file (`.h5`, `.hdf5`, `.keras`): keras.applications'
/// InceptionV3 (1000 classes without a background class and no aux head, TF's pooling and
/// TF's preprocessing, values in [-1, 1]), ResNet50 (`ResNetConfig::keras_resnet50`, 1000
/// classes, `KerasImageNetEval`'s preprocessing) or ResNet50V2 (`ResNetV2Config`,
/// `KerasImageNetEval` in its "tf" mode); only their weights are read from Keras files.
pub fn is_keras_file(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e == "h5" || e == "hdf5" || e == "keras")
}

/// Whether `path` holds a Keras model's weights: a Keras file ([`is_keras_file`]), or what TF2
/// saved of a Keras model, a SavedModel (its folder or `saved_model.pb`) or a
/// `tf.train.Checkpoint`: a TF2 object-based checkpoint ([`TfCheckpoint::is_object_based_at`],
/// which reads its index and object graph to tell), as TF2 saves Keras models.
pub fn holds_keras_weights(path: &Path) -> bool {
    is_keras_file(path) || TfCheckpoint::is_object_based_at(path)
}

/// The layout of the ResNet whose weights are at `weights`: Keras's for a Keras model's
/// ([`holds_keras_weights`]), torchvision's for anything else (our checkpoints of a ResNet in
/// Keras's layout say so only by their convolutions' biases: their layout is the caller's to
/// give).
pub fn resnet_layout_for(weights: &Path) -> ResNetLayout {
    match holds_keras_weights(weights) {
        true => ResNetLayout::Keras,
        false => ResNetLayout::Torchvision,
    }
}

/// `config` with the input rescaling of the EfficientNet whose weights are at `weights`, where
/// they are in a Keras file or tf-keras SavedModel that keeps its model's configuration
/// ([`EfficientNetConfig::matching_keras_file`]); unchanged for any other file.
pub fn efficientnet_for_weights(
    config: EfficientNetConfig,
    weights: &Path,
) -> Result<EfficientNetConfig> {
    match holds_keras_weights(weights) {
        true => Ok(config.matching_keras_file(weights)?),
        false => Ok(config),
    }
}

/// `config` with the head of the MobileNetV3 whose weights are at `weights` (any file
/// [`load_weights`] takes): without its hidden layer where the file holds none (Keras's
/// `conv_2`: a Keras transfer model, or a checkpoint of ours of such a network), with it where
/// it does (torchvision's network, keras.applications' with its top).
pub fn mobilenet_v3_for_weights(
    config: MobileNetV3Config,
    weights: &Path,
) -> Result<MobileNetV3Config> {
    let hidden = open_weights::<MobileNetV3>(weights, false)?.tensor("hidden.weight")?;
    Ok(config.with_hidden_layer(hidden.is_some()))
}

/// Whether `path` is a file that starts like one of our checkpoints.
fn is_ours(path: &Path) -> bool {
    let mut magic = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .is_ok_and(|_| &magic == crate::checkpoint::MAGIC)
}

/// The model (or averages) section of one of our checkpoints, by module path.
fn ours_by_path(path: &Path, moving_averages: bool) -> Result<ByPath> {
    let checkpoint = Checkpoint::load(path)?;
    let record = match (moving_averages, checkpoint.averages) {
        (true, Some(averages)) => averages,
        _ => checkpoint.model,
    };
    let bad = |reason: String| {
        move |error: Cause| Error::Checkpoint {
            path: path.to_path_buf(),
            reason,
            error: Some(error),
        }
    };
    let model = || bad("its model section".into());
    let bytes = record.into_bytes().map_err(|e| model()(e.into()))?;
    let reader = burn_pack::Reader::from_bytes(bytes).map_err(|e| model()(e.into()))?;
    let mut tensors = BTreeMap::new();
    for tensor in reader.into_tensors().map_err(|e| model()(e.into()))? {
        let (name, dtype, shape, _, bytes) = tensor.into_parts().map_err(|e| model()(e.into()))?;
        let data = TensorData::from_bytes(bytes, shape.clone(), dtype).convert::<f32>();
        let values: Vec<f32> = data
            .try_into_vec()
            .map_err(|e| bad(format!("tensor `{name}`"))(e.into()))?;
        tensors.insert(name, (shape.to_vec(), values));
    }
    Ok(ByPath::new(path, tensors))
}

/// Writes every float tensor of `model` (parameters and batch-norm statistics) to `path` in
/// the safetensors format, named by module path, atomically.
pub fn export_safetensors<M: Module>(model: &M, path: &Path) -> Result<()> {
    let metadata = [("format".to_string(), "burn-towers".to_string())].into();
    let bytes = to_safetensors(model, metadata).map_err(|reason| Error::Checkpoint {
        path: path.to_path_buf(),
        reason,
        error: None,
    })?;
    towers_data::atomic_file::write_atomic(path, |w| w.write_all(&bytes)).map_err(Error::io(path))
}

/// The [`Trainer::with_prepare`](crate::Trainer::with_prepare) hook of `--pretrained` and
/// `--trainable-scopes`: restores the weights at `pretrained` (classifier layers of another
/// shape re-initialized) unless the run resumes from a checkpoint of its own, then freezes
/// everything outside `trainable_scopes` when any are given. Prints what it did.
pub fn fine_tuning<M: Module + TfNamed + TorchNamed + 'static>(
    pretrained: Option<PathBuf>,
    trainable_scopes: Vec<String>,
) -> impl Fn(M, bool) -> Result<M> + Send + Sync + 'static {
    move |model, resuming| {
        let model = match (&pretrained, resuming) {
            (Some(path), false) => {
                let options = LoadOptions::new().with_fine_tune(true);
                let (model, report) = load_weights(model, path, options)?;
                println!("{report}");
                model
            }
            (Some(path), true) => {
                println!("resuming: --pretrained {} not applied", path.display());
                model
            }
            (None, _) => model,
        };
        if trainable_scopes.is_empty() {
            return Ok(model);
        }
        let (model, trainable) = train_only(model, &trainable_scopes)?;
        println!(
            "training {} parameter tensors (scopes {}); the others are frozen",
            trainable.len(),
            trainable_scopes.join(", ")
        );
        Ok(model)
    }
}

/// `model` with only the parameters in `scopes` trainable (TF-slim's `--trainable_scopes`); the
/// others keep their values and get no gradients, so optimizers keep no state for them. A
/// scope is a module path prefix (`logits`, `mixed_7c`) or a TF name prefix
/// (`InceptionV3/Logits`). Returns the model and the trainable parameters' paths; a scope that
/// matches nothing is an error.
pub fn train_only<M: Module + TfNamed>(model: M, scopes: &[String]) -> Result<(M, Vec<String>)> {
    let matches = |path: &str, scope: &str| {
        let tf_name = M::tf_variable(path).map(|v| v.name).unwrap_or_default();
        in_scope(path, scope) || tf_name == *scope || tf_name.starts_with(&format!("{scope}/"))
    };
    let mut freeze = Freeze {
        path: Vec::new(),
        trainable: Vec::new(),
        keep: &|path: &str| scopes.iter().any(|s| matches(path, s)),
    };
    let model = model.map(&mut freeze);
    if let Some(scope) = scopes
        .iter()
        .find(|s| !freeze.trainable.iter().any(|p| matches(p, s)))
    {
        return Err(Error::Config(format!(
            "trainable scope `{scope}` matches no parameter of the model"
        )));
    }
    Ok((model, freeze.trainable))
}

struct Freeze<'a> {
    path: Vec<String>,
    trainable: Vec<String>,
    keep: &'a dyn Fn(&str) -> bool,
}

impl ModuleMapper for Freeze<'_> {
    fn enter_module(&mut self, name: &str, _: &str) {
        self.path.push(name.to_string());
    }

    fn exit_module(&mut self, _: &str, _: &str) {
        self.path.pop();
    }

    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let path = self.path.join(".");
        // Statistics of data are never trained; `RunningState` keeps them gradient-free.
        let keep = (self.keep)(&path) && !is_moving_statistic(&path);
        if keep {
            self.trainable.push(path);
        }
        param.set_require_grad(keep)
    }
}
