//! A Keras weights file ([`KerasFile`]) seen through a model's parameter paths, by way of the
//! TF names of its parameters ([`TfNamed`]): each weight of the file is given the TF name of
//! the variable it is in keras.applications' network.
//!
//! - Layers named by the code have their TF names in the file: `ResNet50`'s
//!   `conv2_block1_1_conv` has `conv2_block1_1_conv/kernel` (`resnet_keras_names.rs`). The one
//!   dense layer of a file without `predictions` (a transfer model's new head) is taken as
//!   `predictions`.
//! - InceptionV3 names its layers as Keras numbers them, and its TF names are TF-slim's. Its
//!   code builds the convolutions in TF-slim's order (`inception_scopes_in_order`), so the
//!   n-th convolution and batch norm it creates are the n-th scope's. Sorted by number, the
//!   layers' own names come in creation order, whatever a process created before (the file
//!   lists them in the graph's order, which interleaves branches).
//! - Keras 3 before 3.6 recorded no own names ([`LayerNames::ByClass`]): its layers are named
//!   by class, numbered in the graph's order. InceptionV3's n-th convolution is then the
//!   `GRAPH_ORDER[n]`-th created, a ResNet's n-th is the n-th of `resnet_graph_order`, and
//!   MobileNetV2's and the EfficientNets' (whose depthwise convolutions are a class of their
//!   own) the n-th of `mobilenet_v2_graph_order` and `efficientnet_keras_names::graph_order`.
//! - EfficientNet's `Normalization` has no name of the code's: the only one of a file is
//!   `normalization`, and its `count` (of the examples it adapted to) is no parameter.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use super::efficientnet_keras_names::graph_order as efficientnet_graph_order;
use super::error::{Result, WeightsError};
use super::keras_file::{KerasFile, KerasLayer, KerasWeight, LayerNames};
use super::mobilenet_keras_names::keras_layers_in_order;
use super::mobilenet_v3_keras_names::graph_order as mobilenet_v3_graph_order;
use super::restore::{SourceTensor, WeightSource};
use super::tf_checkpoint::TfCheckpoint;
use super::tf_names::inception_scopes_in_order;
use super::tf_source::{TfLayout, TfNamed, TfVariable};
use crate::nets::{MobileNetV3Variant, STAGES_50, STAGES_101, STAGES_152, variants_stage_blocks};

/// A Keras file of one of keras.applications' networks as a [`WeightSource`] for one model
/// type (see [`KerasSource::open`]).
pub struct KerasSource {
    file: KerasFile,
    /// The TF variable name of each weight of the file.
    variables: HashMap<String, KerasWeight>,
    names: fn(&str) -> Option<TfVariable>,
    accounted: BTreeSet<String>,
}

impl KerasSource {
    /// The weights of keras.applications' `InceptionV3`, `ResNet50`, `ResNet50V2` or
    /// `MobileNetV2` (also `ResNet101`, `ResNet152` and their v2s, MobileNetV2 of any width,
    /// and any without its top or inside a transfer model) at `path` for the parameters of
    /// `M`, which names them as TF does ([`TfNamed`]: TF-slim's names for Inception v3, Keras's
    /// for a `ResNetV2`, a `ResNet` in `ResNetLayout::Keras` and a `MobileNetV2` in
    /// `MobileNetLayout::Keras`). The file is Keras 2's
    /// (`save_weights`, `model.save`, and the ImageNet weights keras.applications downloads,
    /// such as `resnet50_weights_tf_dim_ordering_tf_kernels.h5`), a Keras 3 `.weights.h5` or a
    /// Keras 3 `.keras` archive. A file whose weights fit no parameter of `M` fails in
    /// [`restore`](super::restore).
    pub fn open<M: TfNamed>(path: &Path) -> Result<Self> {
        Self::of_file::<M>(KerasFile::open(path)?)
    }

    /// The weights of the same networks in a TF2 object-based `checkpoint` of their Keras
    /// model (a SavedModel's variables, a `tf.train.Checkpoint`: see
    /// [`TfCheckpoint::is_object_based`]), by their variables' own names, Keras's
    /// `layer/weight`; as [`open`](Self::open) takes them from a Keras 2 file.
    pub fn from_checkpoint<M: TfNamed>(checkpoint: TfCheckpoint) -> Result<Self> {
        Self::of_file::<M>(KerasFile::from_checkpoint(checkpoint))
    }

    /// The file's weight that is `variable`, if any: by its TF name, or a depthwise kernel by
    /// the name of Keras 3's variable for it (`kernel`; tf-keras's `depthwise_kernel`, which a
    /// Keras 3 `.weights.h5` spells too).
    fn weight(&self, variable: &TfVariable) -> Option<&KerasWeight> {
        if let Some(weight) = self.variables.get(&variable.name) {
            return Some(weight);
        }
        let depthwise = variable.layout == TfLayout::DepthwiseKernel;
        let layer = variable
            .name
            .strip_suffix("/depthwise_kernel")
            .filter(|_| depthwise)?;
        self.variables.get(&format!("{layer}/kernel"))
    }

    fn of_file<M: TfNamed>(file: KerasFile) -> Result<Self> {
        let variables = tf_variables(&file.layers, file.names)
            .map_err(|reason| WeightsError::format(file.path(), reason))?;
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
        let Some(weight) = self.weight(&variable).cloned() else {
            return Ok(None);
        };
        self.accounted.insert(weight.dataset.clone());
        let (shape, values) = self.file.read(&weight)?;
        let (shape, values) = variable.layout.convert(shape, values);
        Ok(Some(SourceTensor {
            name: weight.dataset,
            shape,
            values,
        }))
    }

    fn unused(&self) -> Vec<String> {
        let weights = self
            .file
            .weights()
            .filter(|weight| weight.name != ADAPTED_COUNT && weight.name != SEED_STATE);
        let unused = weights.filter(|weight| !self.accounted.contains(&weight.dataset));
        let mut unused: Vec<String> = unused.map(|weight| weight.dataset.clone()).collect();
        unused.sort();
        unused
    }
}

/// The creation number of the n-th convolution (and of the n-th batch norm) of Keras's
/// InceptionV3 in the order of its graph, `model.layers`: Keras 3 before 3.6 names the layers
/// of a `.weights.h5` in this order. Keras 2 lists them in it too (the root's `layer_names`),
/// and `graph_order_is_the_order_keras_2_lists_the_layers_in` reads it back from such a file.
const GRAPH_ORDER: [usize; 94] = [
    0, 1, 2, 3, 4, 8, 6, 9, 5, 7, 10, 11, 15, 13, 16, 12, 14, 17, 18, 22, 20, 23, 19, 21, 24, 25,
    27, 28, 26, 29, 34, 35, 31, 36, 32, 37, 30, 33, 38, 39, 44, 45, 41, 46, 42, 47, 40, 43, 48, 49,
    54, 55, 51, 56, 52, 57, 50, 53, 58, 59, 64, 65, 61, 66, 62, 67, 60, 63, 68, 69, 72, 73, 70, 74,
    71, 75, 80, 77, 81, 78, 79, 82, 83, 76, 84, 89, 86, 90, 87, 88, 91, 92, 85, 93,
];

/// The weight of a `Normalization` that counts the examples it adapted to: no network
/// computes with it, so it is never "unused".
const ADAPTED_COUNT: &str = "count";

/// Keras 3's random-number state of a layer that draws (`Dropout`'s `SeedGenerator`), which a
/// SavedModel it exports keeps as a variable: no network's outputs depend on it, so it is never
/// "unused" either.
const SEED_STATE: &str = "seed_generator_state";

/// The blocks of each stage of keras.applications' ResNet50, ResNet101 and ResNet152 (and of
/// their v2s).
const RESNET_STAGES: [[usize; 4]; 3] = [STAGES_50, STAGES_101, STAGES_152];

/// The TF variable name of each weight of the file's `layers`, named as `names` says, or why
/// they cannot be named.
fn tf_variables(
    layers: &[KerasLayer],
    names: LayerNames,
) -> Result<HashMap<String, KerasWeight>, String> {
    let (convs, norms) = (
        numbered(layers, "conv2d"),
        numbered(layers, "batch_normalization"),
    );
    let scopes = inception_scopes_in_order();
    if convs.len() == scopes.len() && norms.len() == scopes.len() {
        return inception_v3_variables(&scopes, &convs, &norms, names, layers);
    }
    let depthwise = numbered(layers, "depthwise_conv2d");
    match names {
        LayerNames::Own => by_own_names(layers),
        LayerNames::ByClass if !depthwise.is_empty() => {
            by_depthwise_graph_order(&convs, &depthwise, &norms, layers)
        }
        LayerNames::ByClass => by_resnet_graph_order(&convs, &norms, layers),
    }
}

/// TF's name of each weight of keras.applications' ResNet, v1 or v2, whose convolutions and
/// batch norms are `convs` and `norms` (of `layers`, named by class in the graph's order), or
/// why they are no such ResNet's.
fn by_resnet_graph_order(
    convs: &[&KerasLayer],
    norms: &[&KerasLayer],
    layers: &[KerasLayer],
) -> Result<HashMap<String, KerasWeight>, String> {
    let candidates = [false, true].into_iter().flat_map(|v2| {
        RESNET_STAGES.map(|stages| {
            let order = |kind| resnet_graph_order(v2, stages, kind);
            (order("conv"), order("bn"))
        })
    });
    let mut known = candidates.filter(|(conv_names, norm_names)| {
        conv_names.len() == convs.len() && norm_names.len() == norms.len()
    });
    let Some((conv_names, norm_names)) = known.next() else {
        return Err(format!(
            "{} convolution and {} batch-norm layers with weights (`conv2d_N`, \
             `batch_normalization_N`), named by class (Keras 3 before 3.6): only \
             keras.applications' InceptionV3 (94 of each), ResNet50, 101 and 152 (53, 104, 155 \
             of each) and ResNet50V2, 101V2 and 152V2 (53, 104, 155 and 49, 100, 151) are \
             known in that order",
            convs.len(),
            norms.len()
        ));
    };
    renamed_in_order(&[(convs, conv_names), (norms, norm_names)], layers)
}

/// TF's name of each weight of keras.applications' MobileNetV2, one of its EfficientNets or
/// MobileNetV3s,
/// whose convolutions, depthwise convolutions and batch norms are `convs`, `depthwise` and
/// `norms` (of `layers`, named by class in the graph's order), or why they are no such
/// network's. The network is the one with as many layers of each kind (EfficientNet B1 and
/// B2 have the same layers, of other widths).
fn by_depthwise_graph_order(
    convs: &[&KerasLayer],
    depthwise: &[&KerasLayer],
    norms: &[&KerasLayer],
    layers: &[KerasLayer],
) -> Result<HashMap<String, KerasWeight>, String> {
    let efficientnets = variants_stage_blocks().map(|blocks| efficientnet_graph_order(&blocks));
    let variants = [MobileNetV3Variant::Large, MobileNetV3Variant::Small];
    let mobilenet_v3s = [false, true].into_iter().flat_map(|minimalistic| {
        variants.map(|variant| mobilenet_v3_graph_order(variant, minimalistic))
    });
    // Without its top (`include_top=False`, and in a transfer model): `conv_2` and `logits`
    // are the last two convolutions.
    let without_top = |[mut convs, depthwise, norms]: [Vec<String>; 3]| {
        convs.truncate(convs.len() - 2);
        [convs, depthwise, norms]
    };
    let mobilenet_v3s = mobilenet_v3s.flat_map(|order| [order.clone(), without_top(order)]);
    let mut candidates = std::iter::once(mobilenet_v2_graph_order())
        .chain(efficientnets)
        .chain(mobilenet_v3s);
    let counts = [convs.len(), depthwise.len(), norms.len()];
    let Some([conv_names, depthwise_names, norm_names]) =
        candidates.find(|names| names.each_ref().map(Vec::len) == counts)
    else {
        return Err(format!(
            "{} convolution, {} depthwise convolution and {} batch-norm layers with weights \
             (`conv2d_N`, `depthwise_conv2d_N`, `batch_normalization_N`), named by class \
             (Keras 3 before 3.6): only keras.applications' MobileNetV2 (35, 17 and 52), \
             EfficientNetB0 to B7 (B0: 65, 16 and 49) and MobileNetV3Large and Small (49, 15, \
             46 and 43, 11, 34; minimalistic: 33 and 25 convolutions; without their top: 2 \
             convolutions fewer) are known with depthwise convolutions in that order",
            convs.len(),
            depthwise.len(),
            norms.len()
        ));
    };
    let kinds = [
        (convs, conv_names),
        (depthwise, depthwise_names),
        (norms, norm_names),
    ];
    renamed_in_order(&kinds, layers)
}

/// TF's name of each weight of `layers` whose layers of each kind (`kinds`: the layers, named
/// by class in the graph's order, and their own names in that order) are renamed to their
/// own names, the dense layer and the normalization kept.
fn renamed_in_order(
    kinds: &[(&[&KerasLayer], Vec<String>)],
    layers: &[KerasLayer],
) -> Result<HashMap<String, KerasWeight>, String> {
    let own = |layer: &&KerasLayer, name: &String| KerasLayer {
        name: name.clone(),
        weights: layer.weights.clone(),
    };
    let mut renamed: Vec<KerasLayer> = kinds
        .iter()
        .flat_map(|(layers, names)| layers.iter().zip(names).map(|(l, n)| own(l, n)))
        .collect();
    for kept in ["dense", "normalization"] {
        renamed.extend(numbered(layers, kept).into_iter().cloned());
    }
    by_own_names(&renamed)
}

/// The names keras.applications' MobileNetV2 gives its convolutions, depthwise convolutions
/// and batch norms, in the order of its graph, which is the order its code builds them (the
/// network is a chain: `keras_layers_in_order`).
fn mobilenet_v2_graph_order() -> [Vec<String>; 3] {
    let [mut convs, mut depthwise, mut norms] = [Vec::new(), Vec::new(), Vec::new()];
    for (conv, norm, is_depthwise) in keras_layers_in_order() {
        match is_depthwise {
            true => depthwise.push(conv),
            false => convs.push(conv),
        }
        norms.push(norm);
    }
    [convs, depthwise, norms]
}

/// TF's name of each weight of layers named as the code names them: `{layer}/{weight}`, the
/// only dense layer of a file without `predictions` as `predictions` (and as MobileNetV3's
/// `logits` where the file has none), the only normalization (`normalization_N` where a
/// process built others first) as `normalization`.
fn by_own_names(layers: &[KerasLayer]) -> Result<HashMap<String, KerasWeight>, String> {
    let classifier = classifier(layers)?.map(|layer| layer.name.as_str());
    let normalization = match numbered(layers, "normalization")[..] {
        [only] => Some(only.name.as_str()),
        _ => None,
    };
    let mut variables = HashMap::new();
    for layer in layers {
        let name = match Some(layer.name.as_str()) {
            name if name == classifier => "predictions",
            name if name == normalization => "normalization",
            _ => &layer.name,
        };
        for weight in &layer.weights {
            variables.insert(format!("{name}/{}", weight.name), weight.clone());
        }
    }
    // MobileNetV3 names its classifier `logits`: a transfer model's dense layer is that too.
    let aliases = (variables.iter())
        .filter_map(|(name, weight)| Some((name.strip_prefix("predictions/")?, weight.clone())))
        .map(|(weight_name, weight)| (format!("logits/{weight_name}"), weight))
        .collect::<Vec<_>>();
    let respelled = (variables.iter())
        .map(|(name, weight)| (keras_3_spelling(name), weight.clone()))
        .collect::<Vec<_>>();
    for (name, weight) in respelled.into_iter().chain(aliases) {
        variables.entry(name).or_insert(weight);
    }
    Ok(variables)
}

/// A tf-keras variable name as Keras 3 spells the same layer's: tf-keras's MobileNetV3 named
/// its layers as TF-slim's scopes (`Conv/BatchNorm/gamma`,
/// `expanded_conv_3/squeeze_excite/Conv_1/kernel`, `Logits/bias`), Keras 3 renamed them
/// (`conv_bn/gamma`, `expanded_conv_3_squeeze_excite_conv_1/kernel`, `logits/bias`).
fn keras_3_spelling(variable: &str) -> String {
    let (layer, weight) = variable.rsplit_once('/').unwrap_or((variable, ""));
    let layer = layer.replace("/BatchNorm", "_bn").replace('/', "_");
    format!("{}/{weight}", layer.to_lowercase())
}

/// The names keras.applications' ResNet of `stages` (v1, or `v2`) gives its convolutions
/// (`kind` `conv`) or batch norms (`bn`), in the order of its graph. Convolutions: the stem's,
/// then each block's `_1`, `_2`, the shortcut's `_0` (a stage's first block), `_3`. Batch
/// norms: v1's as its convolutions; v2's each block's `_preact`, `_1`, `_2`, then `post_bn`.
fn resnet_graph_order(v2: bool, stages: [usize; 4], kind: &str) -> Vec<String> {
    let v2_norms = v2 && kind == "bn";
    let mut names = match v2_norms {
        true => Vec::new(),
        false => vec![format!("conv1_{kind}")],
    };
    for (stage, blocks) in stages.into_iter().enumerate() {
        for block in 1..=blocks {
            let layers: &[&str] = match (v2_norms, block) {
                (true, _) => &["preact", "1", "2"],
                (false, 1) => &["1", "2", "0", "3"],
                (false, _) => &["1", "2", "3"],
            };
            let name = |n| format!("conv{}_block{block}_{n}_{kind}", stage + 2);
            names.extend(layers.iter().map(name));
        }
    }
    if v2_norms {
        names.push("post_bn".into());
    }
    names
}

/// TF-slim's variable name of each weight of Keras's InceptionV3, whose convolutions and batch
/// norms are `convs` and `norms` (of `layers`, named as `names` says; TF-slim's `scopes` in
/// order), or what the layers lack.
fn inception_v3_variables(
    scopes: &[String],
    convs: &[&KerasLayer],
    norms: &[&KerasLayer],
    names: LayerNames,
    layers: &[KerasLayer],
) -> Result<HashMap<String, KerasWeight>, String> {
    let mut variables = HashMap::new();
    let mut take = |layer: &KerasLayer, weight: &str, variable: String| {
        let found = layer.weights.iter().find(|w| w.name == weight);
        let found = found.ok_or_else(|| format!("layer `{}` has no `{weight}`", layer.name))?;
        variables.insert(variable, found.clone());
        Ok::<_, String>(())
    };
    for (n, (conv, norm)) in convs.iter().zip(norms).enumerate() {
        let scope = match names {
            LayerNames::Own => &scopes[n],
            LayerNames::ByClass => &scopes[GRAPH_ORDER[n]],
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
    if let Some(classifier) = classifier(layers)? {
        let logits = "InceptionV3/Logits/Conv2d_1c_1x1";
        take(classifier, "kernel", format!("{logits}/weights"))?;
        take(classifier, "bias", format!("{logits}/biases"))?;
    }
    Ok(variables)
}

/// The classifier: `predictions` (keras.applications' name for it), else the one dense layer
/// (Keras 3 before 3.6 names it `dense`, and the new head of a transfer model is another);
/// none in a file without any (a network without its top, `include_top=False`).
fn classifier(layers: &[KerasLayer]) -> Result<Option<&KerasLayer>, String> {
    if let Some(predictions) = layers.iter().find(|layer| layer.name == "predictions") {
        return Ok(Some(predictions));
    }
    match numbered(layers, "dense")[..] {
        [] => Ok(None),
        [dense] => Ok(Some(dense)),
        ref dense => Err(format!(
            "no `predictions` layer and {} dense layers: the classifier is one",
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

    use burn::module::Module;
    use burn::tensor::Device;

    use super::*;
    use crate::nets::{
        Bottleneck, EfficientNet, EfficientNetConfig, InceptionV3, InceptionV3Config,
        MobileNetLayout, MobileNetV2, MobileNetV2Config, MobileNetV3Config, ResNet, ResNetConfig,
        ResNetV2, ResNetV2Config,
    };
    use crate::params::walk;

    /// `tests/data/keras_{net}_layers.txt`: the layers of a Keras 2 file of keras.applications'
    /// network in its order, `layer<TAB>weight<TAB>shape` a line
    /// (`scripts/tf_fixtures/keras_applications.py`), with each weight's shape.
    fn keras2_listing(net: &str) -> (Vec<KerasLayer>, BTreeMap<String, Vec<usize>>) {
        let path = format!(
            "{}/tests/data/keras_{net}_layers.txt",
            env!("CARGO_MANIFEST_DIR")
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

    /// Our InceptionV3 (1000 classes, no aux head).
    fn inception_v3() -> InceptionV3 {
        InceptionV3Config::new(1000)
            .with_aux_logits(false)
            .init(&Device::flex())
    }

    /// Our ResNet-50 in Keras's layout.
    fn resnet50() -> ResNet<Bottleneck> {
        ResNetConfig::keras_resnet50(1000).init(&Device::flex())
    }

    /// Our ResNet50V2.
    fn resnet50v2() -> ResNetV2 {
        ResNetV2Config::resnet50v2(1000).init(&Device::flex())
    }

    /// Our MobileNetV2 in Keras's layout.
    fn mobilenet_v2() -> MobileNetV2 {
        MobileNetV2Config::keras(1000).init(&Device::flex())
    }

    /// Our EfficientNet-B0 in Keras's layout.
    fn efficientnet_b0() -> EfficientNet {
        EfficientNetConfig::keras(1000).init(&Device::flex())
    }

    /// Every parameter of `model` finds a weight of `net`'s listing of its shape, and every
    /// weight of Keras's but a normalization's count is used once, when `layers` (the listing's, or renamed) are named as
    /// `names` says. An order of layers other than Keras's gives some convolution a kernel of
    /// another shape, unless it swaps convolutions of one shape: Keras's logits
    /// (`tests/keras_applications.rs`) tell those apart.
    fn fills_every_parameter_with_its_shape<M: Module + TfNamed>(
        model: &M,
        net: &str,
        layers: &[KerasLayer],
        names: LayerNames,
    ) {
        let (_, shapes) = keras2_listing(net);
        let variables = tf_variables(layers, names).unwrap();
        let params = walk(model, Vec::new(), |all, path, _, shape, _| {
            all.push((path.to_string(), shape.to_vec()))
        });
        let mut used = BTreeSet::new();
        for (path, shape) in params {
            let variable = M::tf_variable(&path).unwrap();
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
        let counts = shapes
            .keys()
            .filter(|dataset| dataset.ends_with("/count:0"));
        assert_eq!(used.len(), shapes.len() - counts.count());
    }

    #[test]
    fn keras_2_files_fill_every_parameter_with_its_shape() {
        let (inception, resnet) = (
            keras2_listing("inception_v3").0,
            keras2_listing("resnet50").0,
        );
        fills_every_parameter_with_its_shape(
            &inception_v3(),
            "inception_v3",
            &inception,
            LayerNames::Own,
        );
        fills_every_parameter_with_its_shape(&resnet50(), "resnet50", &resnet, LayerNames::Own);
        let (v2, _) = keras2_listing("resnet50v2");
        fills_every_parameter_with_its_shape(&resnet50v2(), "resnet50v2", &v2, LayerNames::Own);
        let (mobilenet, _) = keras2_listing("mobilenet_v2");
        fills_every_parameter_with_its_shape(
            &mobilenet_v2(),
            "mobilenet_v2",
            &mobilenet,
            LayerNames::Own,
        );
        let (efficientnet, _) = keras2_listing("efficientnet_b0");
        fills_every_parameter_with_its_shape(
            &efficientnet_b0(),
            "efficientnet_b0",
            &efficientnet,
            LayerNames::Own,
        );
    }

    /// `net`'s Keras 2 listing and the same renamed as Keras 3 before 3.6 names the layers (by
    /// class, in the order of the graph, which Keras 2 lists them in), each weight keeping its
    /// dataset.
    fn renamed_by_class(net: &str) -> (Vec<KerasLayer>, Vec<KerasLayer>) {
        let (keras2, _) = keras2_listing(net);
        let mut counts = HashMap::new();
        let keras3: Vec<KerasLayer> = (keras2.iter().cloned())
            .map(|mut layer| {
                let class = match layer.name.as_str() {
                    "predictions" => "dense",
                    "normalization" => "normalization",
                    name if name.ends_with("_depthwise") || name.ends_with("_dwconv") => {
                        "depthwise_conv2d"
                    }
                    name if name.ends_with("/depthwise") => "depthwise_conv2d",
                    "Conv1" | "Conv_1" | "Conv" | "Conv_2" | "Logits" => "conv2d",
                    name if ["/expand", "/project", "/Conv", "/Conv_1"]
                        .iter()
                        .any(|end| name.ends_with(end)) =>
                    {
                        "conv2d"
                    }
                    name if name.starts_with("conv2d")
                        || name.ends_with("_conv")
                        || name.ends_with("_expand")
                        || name.ends_with("_project")
                        || name.ends_with("_se_reduce") =>
                    {
                        "conv2d"
                    }
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
        (keras2, keras3)
    }

    /// Named by class, every parameter finds the weight it finds by the layers' own names.
    #[test]
    fn names_by_class_find_the_weights_own_names_find() {
        let nets = [
            "inception_v3",
            "resnet50",
            "resnet50v2",
            "mobilenet_v2",
            "efficientnet_b0",
        ];
        for net in nets {
            let (keras2, keras3) = renamed_by_class(net);
            assert_eq!(
                tf_variables(&keras3, LayerNames::ByClass).unwrap(),
                tf_variables(&keras2, LayerNames::Own).unwrap(),
                "{net}"
            );
        }
        let (_, inception) = renamed_by_class("inception_v3");
        fills_every_parameter_with_its_shape(
            &inception_v3(),
            "inception_v3",
            &inception,
            LayerNames::ByClass,
        );
        let (_, resnet) = renamed_by_class("resnet50");
        fills_every_parameter_with_its_shape(&resnet50(), "resnet50", &resnet, LayerNames::ByClass);
        let (_, v2) = renamed_by_class("resnet50v2");
        fills_every_parameter_with_its_shape(&resnet50v2(), "resnet50v2", &v2, LayerNames::ByClass);
        let (_, mobilenet) = renamed_by_class("mobilenet_v2");
        fills_every_parameter_with_its_shape(
            &mobilenet_v2(),
            "mobilenet_v2",
            &mobilenet,
            LayerNames::ByClass,
        );
        let (_, efficientnet) = renamed_by_class("efficientnet_b0");
        fills_every_parameter_with_its_shape(
            &efficientnet_b0(),
            "efficientnet_b0",
            &efficientnet,
            LayerNames::ByClass,
        );
    }

    /// tf-keras's MobileNetV3 files, of its names as TF-slim's scopes, fill Keras 3's
    /// names of both variants, and so do Keras 3's files named by class; each by-class name
    /// finds the weight of the layer's own name.
    #[test]
    fn keras_mobilenet_v3_files_fill_every_parameter_with_its_shape() {
        for (net, variant) in [
            ("mobilenet_v3_large", MobileNetV3Variant::Large),
            ("mobilenet_v3_small", MobileNetV3Variant::Small),
        ] {
            let model = MobileNetV3Config::new(variant)
                .with_layout(MobileNetLayout::Keras)
                .init(&Device::flex());
            let (keras2, keras3) = renamed_by_class(net);
            fills_every_parameter_with_its_shape(&model, net, &keras2, LayerNames::Own);
            fills_every_parameter_with_its_shape(&model, net, &keras3, LayerNames::ByClass);
            let own = tf_variables(&keras2, LayerNames::Own).unwrap();
            for (name, weight) in tf_variables(&keras3, LayerNames::ByClass).unwrap() {
                assert_eq!(own.get(&name), Some(&weight), "{net}: {name}");
            }
        }
    }

    /// A normalization numbered where a process built others first is the network's own; of
    /// two, neither is.
    #[test]
    fn the_only_normalization_is_the_networks() {
        let (mut layers, _) = keras2_listing("efficientnet_b0");
        layers[0].name = "normalization_3".into();
        let variables = tf_variables(&layers, LayerNames::Own).unwrap();
        assert_eq!(
            variables["normalization/mean"].dataset,
            "normalization/normalization/mean:0"
        );
        layers.push(KerasLayer {
            name: "normalization_4".into(),
            weights: layers[0].weights.clone(),
        });
        let variables = tf_variables(&layers, LayerNames::Own).unwrap();
        assert!(!variables.contains_key("normalization/mean"));
    }

    #[test]
    fn graph_order_is_the_order_keras_2_lists_the_layers_in() {
        let (layers, _) = keras2_listing("inception_v3");
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

    /// A file of another network opens, its layers by their own names, and fits no parameter.
    #[test]
    fn a_keras_file_of_another_network_is_refused_naming_it() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/keras/model.keras");
        let mut source = KerasSource::open::<InceptionV3>(&path).unwrap();
        let model = inception_v3();
        let options = crate::weights::RestoreOptions::new();
        let error = crate::weights::restore(model, &mut source, &options)
            .err()
            .unwrap()
            .to_string();
        let words = "model.keras: none of its tensors is one of the model's parameters";
        assert!(error.contains(words), "{error}");
    }

    /// Without `predictions` or a dense layer (`include_top=False`) the classifier is left
    /// out; a head of two dense layers has no one classifier.
    #[test]
    fn a_network_without_its_top_reads_without_a_classifier() {
        let (mut layers, _) = keras2_listing("inception_v3");
        layers.retain(|layer| layer.name != "predictions");
        let variables = tf_variables(&layers, LayerNames::Own).unwrap();
        assert_eq!(variables.len(), 94 * 4);
        assert!(!variables.keys().any(|name| name.contains("Logits")));
        layers.extend([weightless("dense"), weightless("dense_1")]);
        let error = tf_variables(&layers, LayerNames::Own).unwrap_err();
        assert!(
            error.contains("no `predictions` layer and 2 dense layers"),
            "{error}"
        );
    }

    /// Named by class, only the known networks' counts can be named.
    #[test]
    fn layers_named_by_class_of_an_unknown_network_are_refused_with_what_it_has() {
        let (mut layers, _) = keras2_listing("inception_v3");
        layers.retain(|layer| layer.name != "conv2d_50");
        let error = tf_variables(&layers, LayerNames::ByClass).unwrap_err();
        assert!(
            error.starts_with("93 convolution and 94 batch-norm layers"),
            "{error}"
        );
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
