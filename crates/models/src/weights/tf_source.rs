//! A TF checkpoint seen through a model's parameter paths: the model names each parameter's
//! TF variable and layout ([`TfNamed`]), this reads and converts it.

use std::collections::BTreeSet;
use std::path::Path;

use super::error::Result;
use super::keras_config::KerasConfig;
use super::restore::{SourceTensor, WeightSource};
use super::tf_checkpoint::TfCheckpoint;

/// The suffix of the shadow variables of `tf.train.ExponentialMovingAverage`.
pub const MOVING_AVERAGE_SUFFIX: &str = "/ExponentialMovingAverage";

/// How a TF variable's layout becomes ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TfLayout {
    /// Identical (biases, batch-norm vectors, `[in, out]` matrices).
    Same,
    /// A convolution kernel: TF's `[h, w, in, out]` (HWIO) to Burn's `[out, in, h, w]`.
    ConvKernel,
    /// A 1x1 convolution used as a fully-connected layer: `[1, 1, in, out]` to `[in, out]`.
    Kernel1x1,
    /// A depthwise convolution's kernel: TF's `[h, w, in, multiplier]` to Burn's grouped
    /// `[in · multiplier, 1, h, w]` (output channel `c · multiplier + m`, as TF orders them).
    DepthwiseKernel,
}

/// A parameter's TF variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TfVariable {
    /// The variable's name, e.g. `InceptionV3/Conv2d_1a_3x3/weights`.
    pub name: String,
    /// How its layout maps onto the parameter's.
    pub layout: TfLayout,
}

impl TfVariable {
    /// The variable `name` with layout `layout`.
    pub fn new(name: impl Into<String>, layout: TfLayout) -> Self {
        Self {
            name: name.into(),
            layout,
        }
    }
}

/// How a TF2 object-based checkpoint (`tf.train.Checkpoint`) ends each variable's key, after
/// the path through the Python objects that hold it (`model/_operations/3/gamma`).
const OBJECT_VALUE_SUFFIX: &str = "/.ATTRIBUTES/VARIABLE_VALUE";

/// A model whose parameters have TF names.
pub trait TfNamed {
    /// The TF variable of the parameter at module path `path`, if it has one.
    fn tf_variable(path: &str) -> Option<TfVariable>;

    /// The module paths of the classifier layers, which fine-tuning to another number of
    /// classes re-initializes.
    fn classifier_paths() -> &'static [&'static str];

    /// Why this model cannot take the weights its TF names point at though it has their names
    /// and shapes (a network in another library's layout), or `None`: none by default.
    fn refuses_tf_weights(&self) -> Option<String> {
        None
    }

    /// Why this model cannot take the weights of the Keras file whose model configuration is
    /// `config` (a network built otherwise, though its weights fit), or `None`: none by
    /// default.
    fn refuses_keras_config(&self, config: &KerasConfig) -> Option<String> {
        let _ = config;
        None
    }
}

/// A TF checkpoint as a [`WeightSource`] for one model type (see [`TfSource::new`]).
pub struct TfSource {
    checkpoint: TfCheckpoint,
    index: std::path::PathBuf,
    names: fn(&str) -> Option<TfVariable>,
    moving_averages: bool,
    accounted: BTreeSet<String>,
}

impl TfSource {
    /// The checkpoint's tensors for the parameters of `M`; with `moving_averages`, each
    /// variable's `.../ExponentialMovingAverage` shadow where the checkpoint has one (as TF's
    /// evaluation scripts restore them).
    pub fn new<M: TfNamed>(checkpoint: TfCheckpoint, moving_averages: bool) -> Self {
        let index = checkpoint.index();
        Self {
            checkpoint,
            index,
            names: M::tf_variable,
            moving_averages,
            accounted: BTreeSet::new(),
        }
    }

    /// The checkpoint.
    pub fn checkpoint(&self) -> &TfCheckpoint {
        &self.checkpoint
    }
}

impl WeightSource for TfSource {
    fn path(&self) -> &Path {
        &self.index
    }

    fn tensor(&mut self, path: &str) -> Result<Option<SourceTensor>> {
        let Some(variable) = (self.names)(path) else {
            return Ok(None);
        };
        let shadow = format!("{}{MOVING_AVERAGE_SUFFIX}", variable.name);
        // The variable and its shadow both belong to this parameter, whichever is read.
        self.accounted.insert(shadow.clone());
        self.accounted.insert(variable.name.clone());
        let name = match self.moving_averages && self.checkpoint.info(&shadow).is_some() {
            true => shadow,
            false => variable.name,
        };
        let Some(info) = self.checkpoint.info(&name) else {
            return Ok(None);
        };
        let shape = info.shape.clone();
        let values = self.checkpoint.read_f32(&name)?;
        let (shape, values) = variable.layout.convert(shape, values);
        Ok(Some(SourceTensor {
            name,
            shape,
            values,
        }))
    }

    fn note_when_nothing_fits(&self) -> Option<String> {
        let mut names = self.checkpoint.tensors().map(|(name, _)| name);
        if let Some(object_path) = names.find(|name| name.ends_with(OBJECT_VALUE_SUFFIX)) {
            // An object graph without the variables' own names: none can be matched.
            return Some(format!(
                "it is a TF2 object-based checkpoint (`tf.train.Checkpoint`), whose keys are \
                 paths through Python objects (`{object_path}`), not variable names, and are \
                 not read: save the Keras model's weights with \
                 `model.save_weights(\"model.weights.h5\")`"
            ));
        }
        let example = self
            .checkpoint
            .tensors()
            .map(|(name, _)| name)
            .find(|name| name.contains('/'));
        self.checkpoint.is_object_based().then(|| {
            format!(
                "it is a TF2 object-based checkpoint (`tf.train.Checkpoint`, a SavedModel's \
                 variables), read by its variables' own names (`{}`), and none of them names a \
                 parameter of this model (its TF names are TF-slim's for Inception v3, Keras's \
                 for the others)",
                example.unwrap_or("")
            )
        })
    }

    fn unused(&self) -> Vec<String> {
        let names = self.checkpoint.tensors().map(|(name, _)| name);
        names
            .filter(|name| !self.accounted.contains(*name))
            .map(str::to_string)
            .collect()
    }
}

impl TfLayout {
    /// `values` of TF shape `shape` in our layout, and that layout's shape. A shape the layout
    /// does not apply to is passed through unchanged, for [`restore`](super::restore) to
    /// report the mismatch.
    pub fn convert(self, shape: Vec<usize>, values: Vec<f32>) -> (Vec<usize>, Vec<f32>) {
        match (self, shape.as_slice()) {
            (Self::ConvKernel, &[h, w, i, o]) => {
                let mut out = vec![0.0; values.len()];
                for (n, v) in values.into_iter().enumerate() {
                    let (oc, rest) = (n % o, n / o);
                    let (ic, rest) = (rest % i, rest / i);
                    let (x, y) = (rest % w, rest / w);
                    out[((oc * i + ic) * h + y) * w + x] = v;
                }
                (vec![o, i, h, w], out)
            }
            (Self::Kernel1x1, &[1, 1, i, o]) => (vec![i, o], values),
            // `[h, w, c, m]` is `[h, w, c · m]`: a kernel `[c · m, 1, h, w]` of one input each.
            (Self::DepthwiseKernel, &[h, w, c, m]) => {
                Self::ConvKernel.convert(vec![h, w, 1, c * m], values)
            }
            _ => (shape, values),
        }
    }
}
