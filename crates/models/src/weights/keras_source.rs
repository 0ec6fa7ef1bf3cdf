//! keras.applications' InceptionV3 weights (a Keras weights file, [`KerasFile`]) seen through
//! a model's parameter paths, by way of TF-slim's names.
//!
//! Keras's InceptionV3 is TF-slim's network without the aux head: the same 94 convolutions,
//! each followed by a batch norm without scale, and a dense classifier of 1000 classes (no
//! background class). Its code builds the convolutions in TF-slim's order
//! (`inception_scopes_in_order`), so the n-th convolution and batch norm it creates are the
//! n-th scope's. Which layer that is in a file depends on the Keras that wrote it:
//! - Keras 2 names each layer when it is created (`conv2d_1`, `conv2d_2`, ... in the file the
//!   ImageNet weights come in; `conv2d`, `conv2d_1`, ... since TF 2): sorted by their number,
//!   the layers come in creation order, whatever a process created before (the file lists
//!   them in the graph's order, which interleaves branches);
//! - Keras 3 names the layers of a `.weights.h5` by class, numbered in the graph's order
//!   (`model.layers`): its n-th convolution is the `GRAPH_ORDER[n]`-th created.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use super::error::{Result, WeightsError};
use super::keras_file::{KerasFile, KerasFormat, KerasLayer, KerasWeight};
use super::restore::{SourceTensor, WeightSource};
use super::tf_names::inception_scopes_in_order;
use super::tf_source::{TfNamed, TfVariable};

/// A Keras file of keras.applications' `InceptionV3` as a [`WeightSource`] for one model type
/// (see [`KerasSource::open`]).
pub struct KerasSource {
    file: KerasFile,
    /// TF-slim's variable name of each weight the network has.
    variables: HashMap<String, KerasWeight>,
    names: fn(&str) -> Option<TfVariable>,
    accounted: BTreeSet<String>,
}

impl KerasSource {
    /// The weights of `keras.applications.InceptionV3` at `path` for the parameters of `M`,
    /// which names them as TF-slim does ([`TfNamed`]): Keras 2's `save_weights` file (the
    /// ImageNet weights, `inception_v3_weights_tf_dim_ordering_tf_kernels.h5`), a Keras 3
    /// `.weights.h5`, or a Keras 3 `.keras` archive. A file of another network is an error
    /// saying what it has.
    pub fn open<M: TfNamed>(path: &Path) -> Result<Self> {
        let file = KerasFile::open(path)?;
        let variables = inception_v3_variables(&file.layers, file.format)
            .map_err(|reason| WeightsError::format(path, reason))?;
        Ok(Self {
            file,
            variables,
            names: M::tf_variable,
            accounted: BTreeSet::new(),
        })
    }

    /// Every weight of every layer of the Keras file at `path`, of any network, named by its
    /// dataset's path, in the file's layout: for the fuzz targets, which read files of small
    /// networks.
    #[doc(hidden)]
    pub fn read_every_weight(path: &Path) -> Result<Vec<SourceTensor>> {
        let file = KerasFile::open(path)?;
        let read = file.weights().map(|weight| {
            let (shape, values) = file.read(weight)?;
            let name = weight.dataset.clone();
            Ok(SourceTensor {
                name,
                shape,
                values,
            })
        });
        read.collect()
    }
}

impl WeightSource for KerasSource {
    fn path(&self) -> &Path {
        self.file.path()
    }

    fn tensor(&mut self, path: &str) -> Result<Option<SourceTensor>> {
        let Some(variable) = (self.names)(path) else {
            return Ok(None);
        };
        let Some(weight) = self.variables.get(&variable.name) else {
            return Ok(None);
        };
        self.accounted.insert(weight.dataset.clone());
        let (shape, values) = self.file.read(weight)?;
        let (shape, values) = variable.layout.convert(shape, values);
        Ok(Some(SourceTensor {
            name: weight.dataset.clone(),
            shape,
            values,
        }))
    }

    fn unused(&self) -> Vec<String> {
        let weights = self.file.weights();
        let unused = weights.filter(|weight| !self.accounted.contains(&weight.dataset));
        let mut unused: Vec<String> = unused.map(|weight| weight.dataset.clone()).collect();
        unused.sort();
        unused
    }
}

/// The creation number of the n-th convolution (and of the n-th batch norm) of Keras's
/// InceptionV3 in the order of its graph, `model.layers`: Keras 3 names the layers of a
/// `.weights.h5` in this order. Keras 2 lists them in it too (the root's `layer_names`), and
/// `graph_order_is_the_order_keras_2_lists_the_layers_in` reads it back from such a file.
const GRAPH_ORDER: [usize; 94] = [
    0, 1, 2, 3, 4, 8, 6, 9, 5, 7, 10, 11, 15, 13, 16, 12, 14, 17, 18, 22, 20, 23, 19, 21, 24, 25,
    27, 28, 26, 29, 34, 35, 31, 36, 32, 37, 30, 33, 38, 39, 44, 45, 41, 46, 42, 47, 40, 43, 48, 49,
    54, 55, 51, 56, 52, 57, 50, 53, 58, 59, 64, 65, 61, 66, 62, 67, 60, 63, 68, 69, 72, 73, 70, 74,
    71, 75, 80, 77, 81, 78, 79, 82, 83, 76, 84, 89, 86, 90, 87, 88, 91, 92, 85, 93,
];

/// TF-slim's variable name of each weight of Keras's InceptionV3 in `layers` (of a file of
/// `format`), or what the layers lack.
fn inception_v3_variables(
    layers: &[KerasLayer],
    format: KerasFormat,
) -> Result<HashMap<String, KerasWeight>, String> {
    let scopes = inception_scopes_in_order();
    let (convs, norms) = (
        numbered(layers, "conv2d"),
        numbered(layers, "batch_normalization"),
    );
    if convs.len() != scopes.len() || norms.len() != scopes.len() {
        return Err(format!(
            "{} convolution and {} batch-norm layers with weights (`conv2d_N`, \
             `batch_normalization_N`), where keras.applications' InceptionV3 has {} of each: \
             only its weights are read from Keras files",
            convs.len(),
            norms.len(),
            scopes.len()
        ));
    }
    let mut variables = HashMap::new();
    let mut take = |layer: &KerasLayer, weight: &str, variable: String| {
        let found = layer.weights.iter().find(|w| w.name == weight);
        let found = found.ok_or_else(|| format!("layer `{}` has no `{weight}`", layer.name))?;
        variables.insert(variable, found.clone());
        Ok::<_, String>(())
    };
    for (n, (conv, norm)) in convs.into_iter().zip(norms).enumerate() {
        let scope = match format {
            KerasFormat::Keras2 => &scopes[n],
            KerasFormat::Keras3 => &scopes[GRAPH_ORDER[n]],
        };
        take(conv, "kernel", format!("InceptionV3/{scope}/weights"))?;
        for statistic in ["beta", "moving_mean", "moving_variance"] {
            take(
                norm,
                statistic,
                format!("InceptionV3/{scope}/BatchNorm/{statistic}"),
            )?;
        }
    }
    let classifier = classifier(layers)?;
    take(
        classifier,
        "kernel",
        "InceptionV3/Logits/Conv2d_1c_1x1/weights".into(),
    )?;
    take(
        classifier,
        "bias",
        "InceptionV3/Logits/Conv2d_1c_1x1/biases".into(),
    )?;
    Ok(variables)
}

/// The classifier: `predictions` (Keras 2's name for InceptionV3's), else the one dense layer
/// (Keras 3 names InceptionV3's `dense`, and the new head of an `include_top=False`
/// InceptionV3 is another).
fn classifier(layers: &[KerasLayer]) -> Result<&KerasLayer, String> {
    if let Some(predictions) = layers.iter().find(|layer| layer.name == "predictions") {
        return Ok(predictions);
    }
    match numbered(layers, "dense")[..] {
        [dense] => Ok(dense),
        ref dense => Err(format!(
            "no `predictions` layer and {} dense layers: InceptionV3's classifier is one",
            dense.len()
        )),
    }
}

/// The layers named as Keras names the layers of type `prefix` (`conv2d`, `conv2d_1`, ...), in
/// the order Keras created them.
fn numbered<'a>(layers: &'a [KerasLayer], prefix: &str) -> Vec<&'a KerasLayer> {
    let number = |name: &str| match name.strip_prefix(prefix)? {
        "" => Some(0),
        rest => rest.strip_prefix('_')?.parse::<usize>().ok(),
    };
    let mut numbered: Vec<(usize, &KerasLayer)> = layers
        .iter()
        .filter_map(|layer| Some((number(&layer.name)?, layer)))
        .collect();
    numbered.sort_by_key(|&(n, _)| n);
    numbered.into_iter().map(|(_, layer)| layer).collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use burn::tensor::Device;

    use super::*;
    use crate::nets::{InceptionV3, InceptionV3Config};
    use crate::params::walk;

    /// `tests/data/keras_inception_v3_layers.txt`: the layers of a Keras 2 file of
    /// `keras.applications.InceptionV3` in its order, `layer<TAB>weight<TAB>shape` a line
    /// (`scripts/tf_fixtures/keras_inception_v3.py`), with each weight's shape.
    fn keras2_listing() -> (Vec<KerasLayer>, BTreeMap<String, Vec<usize>>) {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/keras_inception_v3_layers.txt"
        );
        let (mut layers, mut shapes) = (Vec::<KerasLayer>::new(), BTreeMap::new());
        for line in std::fs::read_to_string(path).unwrap().lines() {
            let [layer, weight, shape] = line.split('\t').collect::<Vec<_>>()[..] else {
                panic!("{line}");
            };
            let shape: Vec<usize> = serde_json::from_str(shape).unwrap();
            let dataset = format!("{layer}/{weight}");
            shapes.insert(dataset.clone(), shape);
            if layers.last().is_none_or(|last| last.name != layer) {
                layers.push(KerasLayer {
                    name: layer.into(),
                    weights: Vec::new(),
                });
            }
            let name = crate::weights::keras_file::short_name(weight).to_string();
            layers
                .last_mut()
                .unwrap()
                .weights
                .push(KerasWeight { name, dataset });
        }
        (layers, shapes)
    }

    /// Every parameter of our InceptionV3 (1000 classes, no aux head) finds a weight of Keras's
    /// of its shape, and every weight of Keras's is used once. A scope order other than
    /// Keras's gives some convolution a kernel of another shape, unless it swaps convolutions
    /// of one shape: Keras's logits (`tests/keras_inception_v3.rs`) tell those apart.
    fn fills_every_parameter_with_its_shape(layers: &[KerasLayer], format: KerasFormat) {
        let (_, shapes) = keras2_listing();
        let variables = inception_v3_variables(layers, format).unwrap();
        let model = InceptionV3Config::new(1000)
            .with_aux_logits(false)
            .init(&Device::flex());
        let params = walk(&model, Vec::new(), |all, path, _, shape, _| {
            all.push((path.to_string(), shape.to_vec()))
        });
        let mut used = BTreeSet::new();
        for (path, shape) in params {
            let variable = InceptionV3::tf_variable(&path).unwrap();
            let weight = &variables[&variable.name];
            let keras_shape = shapes[&weight.dataset].clone();
            let n = keras_shape.iter().product();
            let (converted, _) = variable.layout.convert(keras_shape, vec![0.0; n]);
            assert_eq!(converted, shape, "{path} from {}", weight.dataset);
            assert!(
                used.insert(weight.dataset.clone()),
                "{} twice",
                weight.dataset
            );
        }
        assert_eq!(used.len(), shapes.len());
    }

    #[test]
    fn keras_2_inception_v3_fills_every_parameter_with_its_shape() {
        fills_every_parameter_with_its_shape(&keras2_listing().0, KerasFormat::Keras2);
    }

    /// The Keras 2 listing renamed as Keras 3 names the layers (by class, in the order of the
    /// graph), each weight keeping its dataset: every parameter finds the same weight.
    #[test]
    fn keras_3_names_find_the_weights_keras_2_names_find() {
        let (keras2, _) = keras2_listing();
        let mut counts = HashMap::new();
        let keras3: Vec<KerasLayer> = (keras2.iter().cloned())
            .map(|mut layer| {
                let class = match layer.name.as_str() {
                    "predictions" => "dense",
                    name if name.starts_with("conv2d") => "conv2d",
                    _ => "batch_normalization",
                };
                let count: &mut usize = counts.entry(class).or_default();
                layer.name = match *count {
                    0 => class.to_string(),
                    n => format!("{class}_{n}"),
                };
                *count += 1;
                layer
            })
            .collect();
        let by_keras2 = inception_v3_variables(&keras2, KerasFormat::Keras2).unwrap();
        assert_eq!(
            inception_v3_variables(&keras3, KerasFormat::Keras3).unwrap(),
            by_keras2
        );
        fills_every_parameter_with_its_shape(&keras3, KerasFormat::Keras3);
    }

    #[test]
    fn graph_order_is_the_order_keras_2_lists_the_layers_in() {
        let (layers, _) = keras2_listing();
        let convs = layers
            .iter()
            .filter(|layer| layer.name.starts_with("conv2d"));
        let numbers: Vec<usize> = convs
            .map(|layer| {
                layer
                    .name
                    .strip_prefix("conv2d_")
                    .map_or(0, |n| n.parse().unwrap())
            })
            .collect();
        assert_eq!(numbers, GRAPH_ORDER);
    }

    #[test]
    fn a_keras_file_of_another_network_is_refused_naming_it() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/keras/model.keras");
        let error = KerasSource::open::<InceptionV3>(&path)
            .err()
            .unwrap()
            .to_string();
        let words = "model.keras: 1 convolution and 2 batch-norm layers with weights";
        assert!(error.contains(words), "{error}");
    }

    #[test]
    fn another_network_is_refused_with_what_it_has() {
        let (mut layers, _) = keras2_listing();
        layers.retain(|layer| layer.name != "conv2d_50");
        let error = inception_v3_variables(&layers, KerasFormat::Keras2).unwrap_err();
        assert!(
            error.starts_with("93 convolution and 94 batch-norm layers"),
            "{error}"
        );
        let (mut layers, _) = keras2_listing();
        layers.retain(|layer| layer.name != "predictions");
        let error = inception_v3_variables(&layers, KerasFormat::Keras2).unwrap_err();
        assert!(
            error.contains("no `predictions` layer and 0 dense layers"),
            "{error}"
        );
        // A head of two dense layers is not InceptionV3's classifier.
        layers.extend([weightless("dense"), weightless("dense_1")]);
        let error = inception_v3_variables(&layers, KerasFormat::Keras2).unwrap_err();
        assert!(error.contains("and 2 dense layers"), "{error}");
    }

    /// A layer named `name` with no weights: only its name matters to `numbered`.
    fn weightless(name: &str) -> KerasLayer {
        KerasLayer {
            name: name.into(),
            weights: Vec::new(),
        }
    }

    #[test]
    fn layers_are_taken_in_the_order_keras_numbered_them() {
        let layers = [
            "conv2d_10",
            "conv2d",
            "conv2d_2",
            "conv2d_transpose",
            "conv2d_1x",
        ]
        .map(weightless);
        let names: Vec<&str> = numbered(&layers, "conv2d")
            .iter()
            .map(|l| l.name.as_str())
            .collect();
        assert_eq!(names, ["conv2d", "conv2d_2", "conv2d_10"]);
    }
}
