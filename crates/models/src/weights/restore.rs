//! Filling a model from a file of named tensors, with a report of what was restored, skipped,
//! missing and unused.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use burn::config::Config;
use burn::module::{Module, ModuleMapper, Param};
use burn::tensor::{Tensor, TensorData};

use super::error::{Result, WeightsError};
use crate::params::walk;

/// One tensor for one model parameter, already in the model's layout.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceTensor {
    /// Its name in the file (for messages).
    pub name: String,
    /// Its shape in the model's layout.
    pub shape: Vec<usize>,
    /// Its values, row-major.
    pub values: Vec<f32>,
}

/// A file of weights, seen through a model's parameter paths (`mixed_5b.branch_1.0.conv.weight`).
pub trait WeightSource {
    /// The file, for messages.
    fn path(&self) -> &Path;

    /// The tensor for the parameter at `path` in the model's layout, or `None` when the file
    /// has none.
    fn tensor(&mut self, path: &str) -> Result<Option<SourceTensor>>;

    /// The file's tensors that correspond to no parameter asked for so far, sorted.
    fn unused(&self) -> Vec<String>;

    /// What the source can add when none of its tensors fits the model: where in the file
    /// the parameters were looked for (a PyTorch training checkpoint's entries and wrappers),
    /// or what kind of file it is (a TF2 object-based checkpoint, read by its variables' own
    /// names).
    fn note_when_nothing_fits(&self) -> Option<String> {
        None
    }
}

/// What to leave out of a restore: [`new`](Self::new) (nothing left out; also [`Default`])
/// and `with_*`, as Burn's configs.
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct RestoreOptions {
    /// Parameters kept as initialized (module paths or their prefixes): TF-slim's
    /// `--checkpoint_exclude_scopes`.
    #[config(default = "Vec::new()")]
    pub exclude: Vec<String>,
    /// Parameters kept as initialized when the file's shape differs from the model's instead
    /// of failing: the classifier layers, when fine-tuning to another number of classes.
    #[config(default = "Vec::new()")]
    pub replace_if_reshaped: Vec<String>,
    /// Fail when some tensor of the file goes to no parameter (an excluded parameter's
    /// counts): for files of one network's weights and nothing else, such as Keras's, where
    /// a tensor left over means a model of another layout (Keras's ResNet50 in torchvision's
    /// layout leaves its convolutions' biases).
    #[config(default = false)]
    pub every_tensor_used: bool,
}

impl Default for RestoreOptions {
    fn default() -> Self {
        Self::new()
    }
}

/// What a restore did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RestoreReport {
    /// The file.
    pub source: PathBuf,
    /// Parameters restored, as `(model path, file name)`.
    pub restored: Vec<(String, String)>,
    /// Parameters left as initialized on purpose (excluded, or a classifier layer of another
    /// shape), with the reason.
    pub skipped: Vec<(String, String)>,
    /// Parameters the file has nothing for (left as initialized).
    pub missing: Vec<String>,
    /// The file's tensors that went nowhere.
    pub unused: Vec<String>,
}

impl RestoreOptions {
    fn excludes(&self, path: &str) -> bool {
        self.exclude.iter().any(|scope| in_scope(path, scope))
    }

    fn replaces(&self, path: &str) -> bool {
        self.replace_if_reshaped
            .iter()
            .any(|scope| in_scope(path, scope))
    }
}

/// Whether the module path `path` lies in `scope` (a module path or a prefix of one).
pub fn in_scope(path: &str, scope: &str) -> bool {
    path == scope || path.starts_with(scope) && path[scope.len()..].starts_with('.')
}

/// `model` with every parameter the source has restored (keeping the model's parameter ids),
/// and a report. A tensor whose shape differs from its parameter's is an error naming both
/// shapes, unless [`RestoreOptions::replace_if_reshaped`] covers it; so is a file none of
/// whose tensors is a parameter of the model (weights of another network), where the model
/// has parameters to restore.
pub fn restore<M: Module>(
    model: M,
    source: &mut dyn WeightSource,
    options: &RestoreOptions,
) -> Result<(M, RestoreReport)> {
    let params = walk(&model, Vec::new(), |all, path, _, shape, _| {
        all.push((path.to_string(), shape.to_vec()))
    });
    let mut report = RestoreReport {
        source: source.path().to_path_buf(),
        ..RestoreReport::default()
    };
    let mut found = HashMap::new();
    for (path, shape) in params {
        if options.excludes(&path) {
            report.skipped.push((path, "excluded".into()));
            continue;
        }
        let Some(tensor) = source.tensor(&path)? else {
            report.missing.push(path);
            continue;
        };
        if tensor.shape != shape {
            let reason = format!(
                "shape {:?} in the file, {shape:?} in the model (`{path}`)",
                tensor.shape
            );
            if !options.replaces(&path) {
                return Err(WeightsError::tensor(source.path(), tensor.name, reason));
            }
            report.skipped.push((path, reason));
            continue;
        }
        report.restored.push((path.clone(), tensor.name.clone()));
        found.insert(path, tensor);
    }
    report.unused = source.unused();
    if report.restored.is_empty() && report.skipped.is_empty() && !report.missing.is_empty() {
        let mut reason = nothing_fits(&report);
        if let Some(note) = source.note_when_nothing_fits() {
            reason = format!("{reason}; {note}");
        }
        return Err(WeightsError::format(source.path(), reason));
    }
    if options.every_tensor_used && !report.unused.is_empty() {
        return Err(WeightsError::format(source.path(), left_over(&report)));
    }
    let model = model.map(&mut Apply {
        path: Vec::new(),
        found,
    });
    Ok((model, report))
}

/// Why a file none of whose tensors fits the model is refused: weights of another network
/// would leave the model as initialized, and it would train or classify from there unnoticed.
fn nothing_fits(report: &RestoreReport) -> String {
    format!(
        "none of its tensors is one of the model's parameters: weights of another network? \
         The model's: {}; the file's: {}",
        first_of(&report.missing),
        first_of(&report.unused)
    )
}

/// Why a file with tensors left over is refused under [`RestoreOptions::every_tensor_used`].
fn left_over(report: &RestoreReport) -> String {
    format!(
        "{} of its tensors fit no parameter of the model ({}): weights of another layout or \
         version of the network?",
        report.unused.len(),
        first_of(&report.unused)
    )
}

/// The first of `names` and how many more, for a message.
fn first_of(names: &[String]) -> String {
    match names {
        [] => "none".to_string(),
        [one] => format!("`{one}`"),
        [one, ..] => format!("`{one}` and {} more", names.len() - 1),
    }
}

/// Replaces each parameter found by its path.
struct Apply {
    path: Vec<String>,
    found: HashMap<String, SourceTensor>,
}

impl ModuleMapper for Apply {
    fn enter_module(&mut self, name: &str, _: &str) {
        self.path.push(name.to_string());
    }

    fn exit_module(&mut self, _: &str, _: &str) {
        self.path.pop();
    }

    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let Some(tensor) = self.found.remove(&self.path.join(".")) else {
            return param;
        };
        let data = TensorData::new(tensor.values, tensor.shape);
        let id = param.id;
        let value = Tensor::from_data(data, &param.lazy_device());
        param.transform_for_load(value, id)
    }
}

impl fmt::Display for RestoreReport {
    /// A summary for logs: counts, then every skipped, missing and unused name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "restored {} tensors from {}",
            self.restored.len(),
            self.source.display()
        )?;
        for (path, reason) in &self.skipped {
            write!(f, "\n  skipped {path}: {reason}")?;
        }
        for path in &self.missing {
            write!(f, "\n  missing from the file (left as initialized): {path}")?;
        }
        if !self.unused.is_empty() {
            write!(f, "\n  unused in the file: {}", self.unused.join(", "))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use burn::tensor::Device;

    use super::*;
    use crate::nets::Cifar10Config;
    use crate::weights::ByPath;

    fn source(names: &[&str]) -> ByPath {
        let tensors = names.iter().map(|n| (n.to_string(), (vec![1], vec![0.0])));
        ByPath::new(
            Path::new("other.safetensors"),
            tensors.collect::<BTreeMap<_, _>>(),
        )
    }

    #[test]
    fn weights_of_another_network_are_refused() {
        let model = Cifar10Config::new().init(&Device::flex());
        let mut other = source(&["mixed_5b.branch_0.conv.weight", "logits.bias"]);
        let error = restore(model, &mut other, &RestoreOptions::new())
            .err()
            .unwrap();
        let words = "other.safetensors: none of its tensors is one of the model's parameters: \
                     weights of another network? The model's: `conv1.weight` and 9 more; the \
                     file's: `logits.bias` and 1 more";
        assert_eq!(error.to_string(), words);
    }

    #[test]
    fn a_model_with_every_parameter_excluded_restores_nothing_and_says_so() {
        let model = Cifar10Config::new().init(&Device::flex());
        let layers = ["conv1", "conv2", "local3", "local4", "softmax_linear"];
        let options = RestoreOptions::new().with_exclude(layers.map(String::from).into());
        let (_, report) = restore(model, &mut source(&["logits.bias"]), &options).unwrap();
        assert!(report.restored.is_empty() && report.missing.is_empty());
        assert_eq!(report.skipped.len(), 10);
    }

    /// A tensor left over is an error under `every_tensor_used`, and reported otherwise.
    #[test]
    fn a_tensor_left_over_is_refused_when_every_tensor_must_be_used() {
        let model = Cifar10Config::new().init(&Device::flex());
        let mut tensors = walk(&model, BTreeMap::new(), |all, path, _, shape, _| {
            let values = vec![0.0; shape.iter().product()];
            all.insert(path.to_string(), (shape.to_vec(), values));
        });
        tensors.insert("extra.bias".into(), (vec![1], vec![0.0]));
        let mut file = ByPath::new(Path::new("more.safetensors"), tensors);
        let (model, report) = restore(model, &mut file, &RestoreOptions::new()).unwrap();
        assert_eq!(report.unused, ["extra.bias"]);
        let options = RestoreOptions::new().with_every_tensor_used(true);
        let error = restore(model, &mut file, &options).err().unwrap();
        let words = "more.safetensors: 1 of its tensors fit no parameter of the model \
                     (`extra.bias`): weights of another layout or version of the network?";
        assert_eq!(error.to_string(), words);
    }
}
