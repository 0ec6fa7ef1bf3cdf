//! The torchvision names of [`MobileNetV3`]'s parameters: torchvision's `mobilenet_v3_large`
//! and `mobilenet_v3_small` key their `state_dict` by the positions of their `Sequential`s.
//! Our `stem` is its `features.0` (the convolution `.0`, the batch norm `.1`), block `b` its
//! `features.{b + 1}.block`, whose parts are numbered in order (`expand` where the block has
//! one, `depthwise`, the gate `se` where it has one, `project`; each unit's convolution `.0`
//! and batch norm `.1`, the gate's `reduce` and `expand` `fc1` and `fc2`), `last_conv` the
//! `features` after the blocks, `hidden` its `classifier.0` and `fc` its `classifier.3`
//! (`[out, in]` there). A batch norm's `gamma` and `beta` are `weight` and `bias` there.
//!
//! A module path does not say which variant it is of, and the two put gates in other blocks:
//! a projection's position is listed for each ([`TorchNamed::torch_parameters`]), and a file
//! holds one of them. Every block expands but the first, in both.

use super::efficientnet_torch_names::gated_unit_field;
use crate::nets::{MobileNetLayout, MobileNetV3, MobileNetV3Variant};
use crate::weights::torch_names::{TorchLayout, TorchNamed, TorchParameter};

const VARIANTS: [MobileNetV3Variant; 2] = [MobileNetV3Variant::Large, MobileNetV3Variant::Small];

impl TorchNamed for MobileNetV3 {
    /// Large's key.
    fn torch_parameter(path: &str) -> Option<TorchParameter> {
        Self::torch_parameters(path).into_iter().next()
    }

    fn torch_parameters(path: &str) -> Vec<TorchParameter> {
        let mut keys: Vec<TorchParameter> = Vec::new();
        for variant in VARIANTS {
            let key = torch_parameter_of(variant, path);
            if let Some(key) = key.filter(|key| !keys.contains(key)) {
                keys.push(key);
            }
        }
        keys
    }

    fn companions(key: &str) -> Vec<String> {
        match key.rsplit_once('.') {
            Some((module, "running_mean")) => vec![format!("{module}.num_batches_tracked")],
            _ => Vec::new(),
        }
    }

    fn refuses_torch_weights(&self) -> Option<String> {
        (self.layout() != MobileNetLayout::Torchvision).then(|| {
            "torchvision's MobileNetV3 weights for a MobileNetV3 in Keras's layout, which pads \
             otherwise and scales its own input: build it with `MobileNetLayout::Torchvision` \
             (the default)"
                .to_string()
        })
    }
}

/// The torchvision tensor of the parameter at `path` in `variant`'s network.
fn torch_parameter_of(variant: MobileNetV3Variant, path: &str) -> Option<TorchParameter> {
    let (module, field) = path.rsplit_once('.')?;
    let parameter = |key: String, layout| Some(TorchParameter { key, layout });
    let linear = match module {
        "hidden" => Some("classifier.0"),
        "fc" => Some("classifier.3"),
        _ => None,
    };
    if let Some(linear) = linear {
        return match field {
            "weight" => parameter(format!("{linear}.weight"), TorchLayout::Transposed),
            "bias" => parameter(format!("{linear}.bias"), TorchLayout::Same),
            _ => None,
        };
    }
    let (unit, kind) = module.rsplit_once('.')?;
    let field = gated_unit_field(kind, field)?;
    let module = torchvision_module(variant, unit, kind)?;
    parameter(format!("{module}.{field}"), TorchLayout::Same)
}

/// torchvision's module of the convolution (`kind` `conv`) or batch norm (`bn`) of our
/// [`ConvBn`](crate::nets::ConvBn) at `unit`, or of the gate's `reduce` or `expand` (`unit`
/// ending in `.se`), in `variant`'s network.
fn torchvision_module(variant: MobileNetV3Variant, unit: &str, kind: &str) -> Option<String> {
    let layer = match kind {
        "conv" => "0",
        "bn" => "1",
        "reduce" => "fc1",
        "expand" => "fc2",
        _ => return None,
    };
    let blocks = variant.blocks();
    match unit {
        "stem" => return Some(format!("features.0.{layer}")),
        "last_conv" => return Some(format!("features.{}.{layer}", blocks.len() + 1)),
        _ => {}
    }
    let (block, part) = unit.strip_prefix("blocks.")?.split_once('.')?;
    let block: usize = block.parse().ok()?;
    let gated = blocks.get(block)?.has_squeeze_excitation();
    let first = usize::from(block > 0);
    let position = match (part, kind) {
        ("expand", "conv" | "bn") if block > 0 => 0,
        ("depthwise", "conv" | "bn") => first,
        ("se", "reduce" | "expand") if gated => first + 1,
        ("project", "conv" | "bn") => first + 1 + usize::from(gated),
        _ => return None,
    };
    Some(format!("features.{}.block.{position}.{layer}", block + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_map_to_torchvision_keys() {
        let keys = |path: &str| -> Vec<String> {
            MobileNetV3::torch_parameters(path)
                .into_iter()
                .map(|p| p.key)
                .collect()
        };
        assert_eq!(keys("stem.conv.weight"), ["features.0.0.weight"]);
        assert_eq!(keys("stem.bn.gamma"), ["features.0.1.weight"]);
        // Block 0: Large has no gate, Small one.
        assert_eq!(
            keys("blocks.0.depthwise.conv.weight"),
            ["features.1.block.0.0.weight"]
        );
        assert_eq!(
            keys("blocks.0.se.reduce.bias"),
            ["features.1.block.1.fc1.bias"]
        );
        assert_eq!(
            keys("blocks.0.project.bn.running_var"),
            [
                "features.1.block.1.1.running_var",
                "features.1.block.2.1.running_var"
            ]
        );
        assert_eq!(
            keys("blocks.3.expand.conv.weight"),
            ["features.4.block.0.0.weight"]
        );
        assert_eq!(
            keys("blocks.3.se.expand.weight"),
            ["features.4.block.2.fc2.weight"]
        );
        assert_eq!(
            keys("blocks.3.project.bn.beta"),
            ["features.4.block.3.1.bias"]
        );
        // Only Large has a block 14, and its last convolution is `features.16`, Small's
        // `features.12`.
        assert_eq!(
            keys("blocks.14.project.conv.weight"),
            ["features.15.block.3.0.weight"]
        );
        assert_eq!(
            keys("last_conv.bn.running_mean"),
            ["features.16.1.running_mean", "features.12.1.running_mean"]
        );
        let hidden = MobileNetV3::torch_parameter("hidden.weight").unwrap();
        assert_eq!(
            (hidden.key.as_str(), hidden.layout),
            ("classifier.0.weight", TorchLayout::Transposed)
        );
        assert_eq!(keys("fc.bias"), ["classifier.3.bias"]);
        assert!(keys("blocks.0.expand.conv.weight").is_empty());
        assert!(keys("blocks.15.depthwise.conv.weight").is_empty());
        assert!(keys("blocks.3.se.reduce.gamma").is_empty());
    }
}
