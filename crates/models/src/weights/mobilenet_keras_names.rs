//! The TF names of [`MobileNetV2`]'s parameters: the names keras.applications gives the
//! variables of its `MobileNetV2` (`keras/src/applications/mobilenet_v2.py`), layer by layer.
//! Our `stem` is Keras's `Conv1` (batch norm `bn_Conv1`), block 0 its `expanded_conv`, block
//! `b` its `block_{b}`, a block's `expand`, `depthwise` and `project` its `_expand`,
//! `_depthwise` and `_project` (batch norms `_BN`), `last_conv` its `Conv_1` (`Conv_1_bn`), and
//! `fc` its `predictions`. A depthwise kernel is Keras's `depthwise_kernel`, `[3, 3, c, 1]`.
//!
//! Only a MobileNetV2 in [`MobileNetLayout::Keras`](crate::nets::MobileNetLayout) is Keras's
//! network: torchvision's layout has the same shapes but pads its strided convolutions
//! otherwise.

use super::tf_source::{TfLayout, TfNamed, TfVariable};
use crate::nets::{MOBILENET_V2_BLOCKS, MobileNetLayout, MobileNetV2};

impl TfNamed for MobileNetV2 {
    fn tf_variable(path: &str) -> Option<TfVariable> {
        let (module, field) = path.rsplit_once('.')?;
        if module == "fc" {
            let name = match field {
                "weight" => "kernel",
                "bias" => "bias",
                _ => return None,
            };
            return Some(TfVariable::new(
                format!("predictions/{name}"),
                TfLayout::Same,
            ));
        }
        let (unit, kind) = module.rsplit_once('.')?;
        let (conv, norm) = keras_layers(unit)?;
        conv_bn_variable([conv, norm], unit.ends_with(".depthwise"), kind, field)
    }

    fn classifier_paths() -> &'static [&'static str] {
        &["fc"]
    }

    fn refuses_tf_weights(&self) -> Option<String> {
        (self.layout() != MobileNetLayout::Keras).then(|| {
            "keras.applications' MobileNetV2 weights for a MobileNetV2 in torchvision's layout, \
             which pads and normalizes otherwise: build it with `MobileNetLayout::Keras` \
             (`MobileNetV2Config::keras`)"
                .to_string()
        })
    }
}

/// The TF variable of `field` of the `kind` (`conv` or `bn`) of a [`ConvBn`](crate::nets::ConvBn)
/// whose convolution (`depthwise` or not) and batch norm are Keras's layers `conv` and `norm`
/// (MobileNetV2's, and the EfficientNets'): a kernel (`depthwise_kernel`, `[k, k, c, 1]`, for a
/// depthwise one), a batch norm's `gamma`, `beta` and moving statistics.
pub(super) fn conv_bn_variable(
    [conv, norm]: [String; 2],
    depthwise: bool,
    kind: &str,
    field: &str,
) -> Option<TfVariable> {
    let (layer, name, layout) = match (kind, field) {
        ("conv", "weight") if depthwise => (conv, "depthwise_kernel", TfLayout::DepthwiseKernel),
        ("conv", "weight") => (conv, "kernel", TfLayout::ConvKernel),
        ("bn", "gamma" | "beta") => (norm, field, TfLayout::Same),
        ("bn", "running_mean") => (norm, "moving_mean", TfLayout::Same),
        ("bn", "running_var") => (norm, "moving_variance", TfLayout::Same),
        _ => return None,
    };
    Some(TfVariable::new(format!("{layer}/{name}"), layout))
}

/// Keras's convolution and batch-norm layers of MobileNetV2, each pair with whether the
/// convolution is depthwise, in the order the code builds them: the stem, each block's
/// `expand` (none in block 0), `depthwise` and `project`, then the last convolution.
pub(super) fn keras_layers_in_order() -> Vec<(String, String, bool)> {
    let blocks = (0..MOBILENET_V2_BLOCKS).flat_map(|block| {
        let parts: &[&str] = match block {
            0 => &["depthwise", "project"],
            _ => &["expand", "depthwise", "project"],
        };
        parts
            .iter()
            .map(move |part| format!("blocks.{block}.{part}"))
    });
    let units = std::iter::once("stem".to_string())
        .chain(blocks)
        .chain(std::iter::once("last_conv".to_string()));
    let layers = units.map(|unit| {
        let (conv, norm) = keras_layers(&unit).expect("one of MobileNetV2's units");
        (conv, norm, unit.ends_with(".depthwise"))
    });
    layers.collect()
}

/// Keras's convolution and batch-norm layers of our [`ConvBn`](crate::nets::ConvBn) at
/// `unit` (`blocks.3.expand`: `block_3_expand` and `block_3_expand_BN`).
fn keras_layers(unit: &str) -> Option<(String, String)> {
    match unit {
        "stem" => return Some(("Conv1".into(), "bn_Conv1".into())),
        "last_conv" => return Some(("Conv_1".into(), "Conv_1_bn".into())),
        _ => {}
    }
    let mut parts = unit.strip_prefix("blocks.")?.split('.');
    let block: usize = parts.next()?.parse().ok()?;
    let part = parts.next()?;
    if parts.next().is_some() || !matches!(part, "expand" | "depthwise" | "project") {
        return None;
    }
    let conv = match block {
        0 => format!("expanded_conv_{part}"),
        _ => format!("block_{block}_{part}"),
    };
    Some((conv.clone(), format!("{conv}_BN")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nets::MobileNetV2Config;

    #[test]
    fn paths_map_to_keras_names() {
        let name = |path: &str| MobileNetV2::tf_variable(path).map(|v| (v.name, v.layout));
        let same = |n: &str| Some((n.to_string(), TfLayout::Same));
        let kernel = |n: &str| Some((n.to_string(), TfLayout::ConvKernel));
        assert_eq!(name("stem.conv.weight"), kernel("Conv1/kernel"));
        assert_eq!(name("stem.bn.gamma"), same("bn_Conv1/gamma"));
        assert_eq!(
            name("blocks.0.depthwise.conv.weight"),
            Some((
                "expanded_conv_depthwise/depthwise_kernel".into(),
                TfLayout::DepthwiseKernel
            ))
        );
        assert_eq!(
            name("blocks.0.project.bn.running_var"),
            same("expanded_conv_project_BN/moving_variance")
        );
        assert_eq!(
            name("blocks.16.expand.conv.weight"),
            kernel("block_16_expand/kernel")
        );
        assert_eq!(
            name("blocks.5.depthwise.bn.running_mean"),
            same("block_5_depthwise_BN/moving_mean")
        );
        assert_eq!(name("last_conv.bn.beta"), same("Conv_1_bn/beta"));
        assert_eq!(name("fc.weight"), same("predictions/kernel"));
        assert_eq!(name("fc.bias"), same("predictions/bias"));
        for outside in [
            "blocks.1.shortcut.conv.weight",
            "blocks.1.expand.conv.bias",
            "blocks.1.expand.x.conv.weight",
            "blocks.x.expand.conv.weight",
            "stem.relu.weight",
        ] {
            assert_eq!(name(outside), None, "{outside}");
        }
    }

    /// Every parameter of Keras's MobileNetV2 has a name, each its own: 52 convolutions (17
    /// depthwise) with their batch norms, the dense layer: the 262 weights of Keras's file.
    #[test]
    fn every_parameter_has_its_own_keras_name() {
        let model = MobileNetV2Config::keras(10).init(&burn::tensor::Device::flex());
        let paths = crate::params::walk(&model, Vec::new(), |all, path, _, _, _| {
            all.push(path.to_string())
        });
        assert_eq!(paths.len(), 52 + 52 * 4 + 2);
        let names: std::collections::BTreeSet<String> = paths
            .iter()
            .map(|path| MobileNetV2::tf_variable(path).expect(path).name)
            .collect();
        assert_eq!(names.len(), paths.len());
    }
}
