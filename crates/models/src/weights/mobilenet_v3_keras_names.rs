//! The TF names of [`MobileNetV3`]'s parameters: the names keras.applications (Keras 3) gives
//! the variables of its `MobileNetV3Large` and `MobileNetV3Small`
//! (`keras/src/applications/mobilenet_v3.py`), layer by layer. Our `stem` is Keras's `conv`
//! (batch norm `conv_bn`), block 0 its `expanded_conv_`, block `b` its `expanded_conv_{b}_`, a
//! block's `expand`, `depthwise` and `project` its `expand`, `depthwise` and `project` (batch
//! norms `_bn`), its gate's `reduce` and `expand` `squeeze_excite_conv` and
//! `squeeze_excite_conv_1`, `last_conv` its `conv_1` (`conv_1_bn`), and the head's `hidden`
//! and `fc` its 1x1 `conv_2` and `logits` (`fc` the dense layer of a transfer model, which has
//! no `conv_2`).
//!
//! tf-keras named the same layers as TF-slim's scopes (`Conv/BatchNorm`,
//! `expanded_conv_3/squeeze_excite/Conv`, `Logits`: the ImageNet files keras.applications
//! downloads); a file's layers answer to Keras 3's spelling too (`keras_source.rs`).
//!
//! Only a MobileNetV3 in [`MobileNetLayout::Keras`](crate::nets::MobileNetLayout) is Keras's
//! network: torchvision's layout has the same shapes but pads its strided convolutions
//! otherwise and takes scaled images.

use std::path::Path;

use super::error::Result;
use super::keras_source::KerasSource;
use super::mobilenet_keras_names::conv_bn_variable;
use super::restore::WeightSource;
use super::tf_source::{TfLayout, TfNamed, TfVariable};
use crate::nets::{MobileNetLayout, MobileNetV3, MobileNetV3Config, MobileNetV3Variant};

impl TfNamed for MobileNetV3 {
    fn tf_variable(path: &str) -> Option<TfVariable> {
        let (module, field) = path.rsplit_once('.')?;
        let dense = match module {
            "hidden" => Some("conv_2"),
            "fc" => Some("logits"),
            _ => None,
        };
        if let Some(layer) = dense {
            return match field {
                "weight" => Some(TfVariable::new(
                    format!("{layer}/kernel"),
                    TfLayout::Kernel1x1,
                )),
                "bias" => Some(TfVariable::new(format!("{layer}/bias"), TfLayout::Same)),
                _ => None,
            };
        }
        let (unit, kind) = module.rsplit_once('.')?;
        if let Some(block) = unit.strip_suffix(".se") {
            let layer = match kind {
                "reduce" => format!("{}squeeze_excite_conv", block_prefix(block)?),
                "expand" => format!("{}squeeze_excite_conv_1", block_prefix(block)?),
                _ => return None,
            };
            let layout = match field {
                "weight" => TfLayout::ConvKernel,
                "bias" => TfLayout::Same,
                _ => return None,
            };
            let name = if field == "weight" { "kernel" } else { "bias" };
            return Some(TfVariable::new(format!("{layer}/{name}"), layout));
        }
        let conv = keras_conv(unit)?;
        conv_bn_variable(
            [conv.clone(), format!("{conv}_bn")],
            unit.ends_with(".depthwise"),
            kind,
            field,
        )
    }

    fn classifier_paths() -> &'static [&'static str] {
        &["fc"]
    }

    fn refuses_tf_weights(&self) -> Option<String> {
        (self.layout() != MobileNetLayout::Keras).then(|| {
            "keras.applications' MobileNetV3 weights for a MobileNetV3 in torchvision's layout, \
             which pads otherwise and takes scaled images: build it with \
             `MobileNetLayout::Keras`"
                .to_string()
        })
    }
}

impl MobileNetV3Config {
    /// This configuration with the head of the network in the Keras file at `path`: with the
    /// hidden layer where the file has `conv_2` (keras.applications' network with its top),
    /// without where it has not (a transfer model built on the network without its top, or
    /// that network alone, `include_top=False`).
    pub fn matching_keras_file(self, path: &Path) -> Result<Self> {
        let hidden = KerasSource::open::<MobileNetV3>(path)?.tensor("hidden.weight")?;
        Ok(self.with_hidden_layer(hidden.is_some()))
    }
}

/// Keras's prefix of the block at `block` (`blocks.3`: `expanded_conv_3_`; block 0's is
/// `expanded_conv_`), of either variant's up to 15 blocks.
fn block_prefix(block: &str) -> Option<String> {
    let index: usize = block.strip_prefix("blocks.")?.parse().ok()?;
    match index {
        0 => Some("expanded_conv_".into()),
        1..15 => Some(format!("expanded_conv_{index}_")),
        _ => None,
    }
}

/// Keras's convolution layer of our [`ConvBn`](crate::nets::ConvBn) at `unit`; its batch norm
/// is the same name and `_bn`.
fn keras_conv(unit: &str) -> Option<String> {
    match unit {
        "stem" => return Some("conv".into()),
        "last_conv" => return Some("conv_1".into()),
        _ => {}
    }
    let (block, part) = unit.rsplit_once('.')?;
    if !matches!(part, "expand" | "depthwise" | "project")
        || (block, part) == ("blocks.0", "expand")
    {
        return None;
    }
    Some(format!("{}{part}", block_prefix(block)?))
}

/// The names `variant`'s Keras network (`minimalistic` or not: without gates) gives its
/// convolutions, depthwise convolutions and batch norms, in the order of its graph (a chain,
/// built in the order of its code): Keras 3 before 3.6 numbers its layers by class in this
/// order. Convolutions: the stem's, each block's expansion, gate and projection, the last's,
/// `conv_2` and `logits`.
pub(super) fn graph_order(variant: MobileNetV3Variant, minimalistic: bool) -> [Vec<String>; 3] {
    let [mut convs, mut depthwise, mut norms] = [Vec::new(), Vec::new(), Vec::new()];
    let mut conv_bn = |convs: &mut Vec<String>, conv: String| {
        norms.push(format!("{conv}_bn"));
        convs.push(conv);
    };
    conv_bn(&mut convs, "conv".into());
    for (block, setting) in variant.blocks().iter().enumerate() {
        let prefix = block_prefix(&format!("blocks.{block}")).expect("a block of MobileNetV3");
        if block > 0 {
            conv_bn(&mut convs, format!("{prefix}expand"));
        }
        conv_bn(&mut depthwise, format!("{prefix}depthwise"));
        if setting.has_squeeze_excitation() && !minimalistic {
            convs.push(format!("{prefix}squeeze_excite_conv"));
            convs.push(format!("{prefix}squeeze_excite_conv_1"));
        }
        conv_bn(&mut convs, format!("{prefix}project"));
    }
    conv_bn(&mut convs, "conv_1".into());
    convs.extend(["conv_2".into(), "logits".into()]);
    [convs, depthwise, norms]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nets::MobileNetV3Config;

    #[test]
    fn paths_map_to_keras_names() {
        let name = |path: &str| MobileNetV3::tf_variable(path).map(|v| (v.name, v.layout));
        let named = |n: &str, layout| Some((n.to_string(), layout));
        assert_eq!(
            name("stem.conv.weight"),
            named("conv/kernel", TfLayout::ConvKernel)
        );
        assert_eq!(
            name("stem.bn.running_var"),
            named("conv_bn/moving_variance", TfLayout::Same)
        );
        assert_eq!(
            name("blocks.0.depthwise.conv.weight"),
            named(
                "expanded_conv_depthwise/depthwise_kernel",
                TfLayout::DepthwiseKernel
            )
        );
        assert_eq!(
            name("blocks.3.expand.bn.gamma"),
            named("expanded_conv_3_expand_bn/gamma", TfLayout::Same)
        );
        assert_eq!(
            name("blocks.3.se.expand.weight"),
            named(
                "expanded_conv_3_squeeze_excite_conv_1/kernel",
                TfLayout::ConvKernel
            )
        );
        assert_eq!(
            name("blocks.14.se.reduce.bias"),
            named("expanded_conv_14_squeeze_excite_conv/bias", TfLayout::Same)
        );
        assert_eq!(
            name("last_conv.bn.beta"),
            named("conv_1_bn/beta", TfLayout::Same)
        );
        assert_eq!(
            name("hidden.weight"),
            named("conv_2/kernel", TfLayout::Kernel1x1)
        );
        assert_eq!(name("fc.bias"), named("logits/bias", TfLayout::Same));
        assert_eq!(name("blocks.0.expand.conv.weight"), None);
        assert_eq!(name("blocks.15.project.conv.weight"), None);
        assert_eq!(name("blocks.3.se.reduce.gamma"), None);
    }

    /// Every parameter of both variants has a name of its own, and the graph order names each
    /// layer once: as many convolutions, depthwise ones and batch norms as the network has.
    #[test]
    fn every_parameter_is_named_once() {
        for variant in [MobileNetV3Variant::Large, MobileNetV3Variant::Small] {
            let model = MobileNetV3Config::new(variant).init(&burn::tensor::Device::flex());
            let paths = crate::params::walk(&model, Vec::new(), |all, path, _, _, _| {
                all.push(path.to_string())
            });
            let names: std::collections::BTreeSet<String> = paths
                .iter()
                .map(|path| MobileNetV3::tf_variable(path).expect(path).name)
                .collect();
            assert_eq!(names.len(), paths.len());
            let [convs, depthwise, norms] = graph_order(variant, false);
            let layers = |suffix: &str| names.iter().filter(|n| n.ends_with(suffix)).count();
            assert_eq!(convs.len() + depthwise.len(), layers("kernel"));
            assert_eq!(norms.len(), layers("/gamma"));
        }
    }
}
