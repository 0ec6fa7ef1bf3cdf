//! The TF names of [`EfficientNet`]'s parameters: the names keras.applications gives the
//! variables of its `EfficientNetB0` .. `B7` (`keras/src/applications/efficientnet.py`),
//! layer by layer. Our `input_norm` is Keras's `normalization`, `stem` its `stem_conv` (batch
//! norm `stem_bn`), block `i` of stage `s` its `block{s + 1}{a + i}_` (`block2b_`), a block's
//! `expand`, `depthwise` and `project` its `expand_conv`, `dwconv` and `project_conv` (batch
//! norms `expand_bn`, `bn`, `project_bn`), its gate's `reduce` and `expand` `se_reduce` and
//! `se_expand`, `top` its `top_conv` (`top_bn`), and `fc` its `predictions`. A depthwise
//! kernel is Keras's `depthwise_kernel`, `[k, k, c, 1]`.
//!
//! Only an EfficientNet in [`EfficientNetLayout::Keras`](crate::nets::EfficientNetLayout) is
//! Keras's network: torchvision's layout has the same shapes but pads its strided
//! convolutions otherwise, and takes normalized images.

use std::path::Path;

use super::error::Result;
use super::keras_config::KerasConfig;
use super::mobilenet_keras_names::conv_bn_variable;
use super::tf_source::{TfLayout, TfNamed, TfVariable};
use crate::nets::{EfficientNet, EfficientNetConfig, EfficientNetLayout, stage_expands};

impl TfNamed for EfficientNet {
    fn tf_variable(path: &str) -> Option<TfVariable> {
        let (module, field) = path.rsplit_once('.')?;
        let same = |layer: &str, name: &str| {
            Some(TfVariable::new(format!("{layer}/{name}"), TfLayout::Same))
        };
        match (module, field) {
            ("fc", "weight") => return same("predictions", "kernel"),
            ("fc", "bias") => return same("predictions", "bias"),
            ("input_norm", "adapted_mean") => return same("normalization", "mean"),
            ("input_norm", "adapted_var") => return same("normalization", "variance"),
            _ => {}
        }
        let (unit, kind) = module.rsplit_once('.')?;
        if let Some(block) = unit.strip_suffix(".se") {
            let layer = format!("{}se_{kind}", block_prefix(block)?);
            return match (kind, field) {
                ("reduce" | "expand", "weight") => Some(TfVariable::new(
                    format!("{layer}/kernel"),
                    TfLayout::ConvKernel,
                )),
                ("reduce" | "expand", "bias") => same(&layer, "bias"),
                _ => None,
            };
        }
        let (conv, norm) = keras_layers(unit)?;
        conv_bn_variable([conv, norm], unit.ends_with(".depthwise"), kind, field)
    }

    fn classifier_paths() -> &'static [&'static str] {
        &["fc"]
    }

    fn refuses_tf_weights(&self) -> Option<String> {
        (self.layout() != EfficientNetLayout::Keras).then(|| {
            "keras.applications' EfficientNet weights for an EfficientNet in torchvision's \
             layout, which pads otherwise and takes normalized images: build it with \
             `EfficientNetLayout::Keras` (`EfficientNetConfig::keras`)"
                .to_string()
        })
    }

    fn refuses_keras_config(&self, config: &KerasConfig) -> Option<String> {
        let ours = self.input_norm.as_ref()?.channel_scales();
        rescaling_refusal(ours.as_ref().map(|s| &s[..]), config.channel_scales())
    }
}

impl EfficientNetConfig {
    /// This configuration with the input rescaling of the network whose model configuration
    /// the Keras file at `path` keeps ([`KerasConfig`]: a `.keras` archive, a whole-model
    /// `.h5`, a tf-keras SavedModel), in Keras's layout: a network saved from `weights=None`
    /// has none. Unchanged for a file of weights only (keras.applications' ImageNet files are
    /// the rescaled network's) and a Keras 3 SavedModel, which keeps no configuration.
    pub fn matching_keras_file(self, path: &Path) -> Result<Self> {
        let Some(config) = KerasConfig::read(path)? else {
            return Ok(self);
        };
        Ok(self.with_imagenet_rescaling(config.channel_scales().is_some()))
    }
}

/// Why an EfficientNet that multiplies its normalized input by `ours` (one factor a channel,
/// or nothing) cannot take the weights of a Keras network that multiplies by `file`.
fn rescaling_refusal(ours: Option<&[f64]>, file: Option<Vec<f64>>) -> Option<String> {
    const MATCH: &str = "`EfficientNetConfig::matching_keras_file` builds the file's";
    match (ours, file) {
        (None, None) => None,
        (Some(ours), Some(file)) if same_factors(ours, &file) => None,
        (Some(ours), Some(file)) => Some(format!(
            "the file's EfficientNet multiplies its normalized input by {file:?}, where \
             keras.applications' and this one multiply by {ours:?}"
        )),
        (None, Some(_)) => Some(format!(
            "the file's EfficientNet was built for the ImageNet weights (`weights=\"imagenet\"`) \
             and divides its normalized input by √[0.229, 0.224, 0.225], this one was built \
             without (`with_imagenet_rescaling(false)`): {MATCH}"
        )),
        (Some(_), None) => Some(format!(
            "the file's EfficientNet was built without the ImageNet weights' rescaling \
             (`weights=None`), this one with it: build it `with_imagenet_rescaling(false)`; \
             {MATCH}"
        )),
    }
}

/// Whether `a` and `b` are the same factors, but for rounding to f32 (tf-keras keeps them so).
fn same_factors(a: &[f64], b: &[f64]) -> bool {
    let close = |(x, y): (&f64, &f64)| (x - y).abs() <= 1e-6 * x.abs().max(y.abs());
    a.len() == b.len() && a.iter().zip(b).all(close)
}

/// Keras's prefix of the block at `block` (`stages.1.0`: `block2a_`).
fn block_prefix(block: &str) -> Option<String> {
    let mut parts = block.strip_prefix("stages.")?.split('.');
    let stage: usize = parts.next()?.parse().ok()?;
    let index: u8 = parts.next()?.parse().ok().filter(|&i| i < 26)?;
    if parts.next().is_some() {
        return None;
    }
    Some(prefix(stage, index))
}

/// Keras's prefix of block `index` of `stage`, both from 0 (`block2a_`).
fn prefix(stage: usize, index: u8) -> String {
    format!("block{}{}_", stage + 1, char::from(b'a' + index))
}

/// The names keras.applications' EfficientNet of `stage_blocks` blocks per stage gives its
/// convolutions, depthwise convolutions and batch norms, each kind in the order of its graph,
/// which is the order its code builds them (the network is a chain): the stem's; each block's
/// `expand_conv` (none in the first stage), `se_reduce`, `se_expand`, `project_conv`, its
/// `dwconv`, and its `expand_bn`, `bn`, `project_bn`; then the top's.
pub(super) fn graph_order(stage_blocks: &[usize]) -> [Vec<String>; 3] {
    let mut convs = vec!["stem_conv".to_string()];
    let mut depthwise = Vec::new();
    let mut norms = vec!["stem_bn".to_string()];
    for (stage, &blocks) in stage_blocks.iter().enumerate() {
        let expands = stage_expands(stage) == Some(true);
        for index in 0..blocks as u8 {
            let named = |layer: &str| format!("{}{layer}", prefix(stage, index));
            if expands {
                convs.push(named("expand_conv"));
                norms.push(named("expand_bn"));
            }
            depthwise.push(named("dwconv"));
            convs.extend(["se_reduce", "se_expand", "project_conv"].map(named));
            norms.extend(["bn", "project_bn"].map(named));
        }
    }
    convs.push("top_conv".into());
    norms.push("top_bn".into());
    [convs, depthwise, norms]
}

/// Keras's convolution and batch-norm layers of our [`ConvBn`](crate::nets::ConvBn) at
/// `unit` (`stages.1.0.expand`: `block2a_expand_conv` and `block2a_expand_bn`).
fn keras_layers(unit: &str) -> Option<(String, String)> {
    match unit {
        "stem" => return Some(("stem_conv".into(), "stem_bn".into())),
        "top" => return Some(("top_conv".into(), "top_bn".into())),
        _ => {}
    }
    let (block, part) = unit.rsplit_once('.')?;
    let prefix = block_prefix(block)?;
    let (conv, norm) = match part {
        "expand" => ("expand_conv", "expand_bn"),
        "depthwise" => ("dwconv", "bn"),
        "project" => ("project_conv", "project_bn"),
        _ => return None,
    };
    Some((format!("{prefix}{conv}"), format!("{prefix}{norm}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_map_to_keras_names() {
        let name = |path: &str| EfficientNet::tf_variable(path).map(|v| (v.name, v.layout));
        let same = |n: &str| Some((n.to_string(), TfLayout::Same));
        let kernel = |n: &str| Some((n.to_string(), TfLayout::ConvKernel));
        assert_eq!(
            name("input_norm.adapted_var"),
            same("normalization/variance")
        );
        assert_eq!(name("stem.conv.weight"), kernel("stem_conv/kernel"));
        assert_eq!(name("stem.bn.gamma"), same("stem_bn/gamma"));
        assert_eq!(
            name("stages.0.0.depthwise.conv.weight"),
            Some((
                "block1a_dwconv/depthwise_kernel".into(),
                TfLayout::DepthwiseKernel
            ))
        );
        assert_eq!(
            name("stages.0.0.depthwise.bn.running_var"),
            same("block1a_bn/moving_variance")
        );
        assert_eq!(
            name("stages.1.1.expand.conv.weight"),
            kernel("block2b_expand_conv/kernel")
        );
        assert_eq!(
            name("stages.5.3.se.reduce.weight"),
            kernel("block6d_se_reduce/kernel")
        );
        assert_eq!(
            name("stages.5.3.se.expand.bias"),
            same("block6d_se_expand/bias")
        );
        assert_eq!(
            name("stages.6.0.project.bn.running_mean"),
            same("block7a_project_bn/moving_mean")
        );
        assert_eq!(name("top.bn.beta"), same("top_bn/beta"));
        assert_eq!(name("fc.weight"), same("predictions/kernel"));
        for outside in [
            "stages.1.1.shortcut.conv.weight",
            "stages.1.1.expand.conv.bias",
            "stages.1.1.se.squeeze.weight",
            "stages.1.x.expand.conv.weight",
            "stages.1.26.expand.conv.weight",
            "stages.1.expand.conv.weight",
            "stem.act.weight",
        ] {
            assert_eq!(name(outside), None, "{outside}");
        }
    }

    /// Every parameter of Keras's EfficientNetB0 has a name, each its own: 81 convolutions
    /// (16 depthwise, 32 of the gates with biases), 49 batch norms, the normalization's two
    /// statistics, the dense layer: the file's weights but the normalization's count.
    #[test]
    fn every_parameter_has_its_own_keras_name() {
        let model = EfficientNetConfig::keras(10).init(&burn::tensor::Device::flex());
        let paths = crate::params::walk(&model, Vec::new(), |all, path, _, _, _| {
            all.push(path.to_string())
        });
        assert_eq!(paths.len(), 81 + 32 + 49 * 4 + 2 + 2);
        let names: std::collections::BTreeSet<String> = paths
            .iter()
            .map(|path| EfficientNet::tf_variable(path).expect(path).name)
            .collect();
        assert_eq!(names.len(), paths.len());
    }

    /// A network takes a file's weights where both scale their normalized input alike (but
    /// for tf-keras's rounding to f32), and says which was built how where they do not.
    #[test]
    fn a_keras_network_of_another_rescaling_is_refused() {
        let model = EfficientNetConfig::keras(10).init(&burn::tensor::Device::flex());
        let ours = model.input_norm.as_ref().unwrap().channel_scales().unwrap();
        let as_f32 = ours.map(|factor| factor as f32 as f64).to_vec();
        assert_eq!(rescaling_refusal(Some(&ours), Some(as_f32)), None);
        assert_eq!(rescaling_refusal(None, None), None);

        let refusal = |ours, file| rescaling_refusal(ours, file).unwrap();
        let without = refusal(Some(&ours), None);
        assert!(
            without.contains("built without the ImageNet weights' rescaling"),
            "{without}"
        );
        let with = refusal(None, Some(ours.to_vec()));
        assert!(with.contains("built for the ImageNet weights"), "{with}");
        let other = refusal(Some(&ours), Some(vec![2.0, 2.0, 2.0]));
        assert!(
            other.contains("multiplies its normalized input by [2.0, 2.0, 2.0]"),
            "{other}"
        );
    }
}
