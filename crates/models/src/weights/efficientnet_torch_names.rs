//! The torchvision names of [`EfficientNet`]'s parameters: torchvision's `efficientnet_b0` ..
//! `b7` key their `state_dict` by the positions of their `Sequential`s. Our `stem` is its
//! `features.0` (the convolution `.0`, the batch norm `.1`), block `i` of stage `s` its
//! `features.{s + 1}.{i}.block`, whose parts are numbered in order (`expand` where the block
//! has one, `depthwise`, the gate `se`, `project`; each unit's convolution `.0` and batch norm
//! `.1`, the gate's `reduce` and `expand` `fc1` and `fc2`), `top` the `features` after the
//! stages, and `fc` its `classifier.1` (`[out, in]` there). A batch norm's `gamma` and `beta`
//! are `weight` and `bias` there.

use crate::nets::{EFFICIENTNET_STAGES, EfficientNet, EfficientNetLayout, stage_expands};
use crate::weights::torch_names::{TorchLayout, TorchNamed, TorchParameter};

impl TorchNamed for EfficientNet {
    fn torch_parameter(path: &str) -> Option<TorchParameter> {
        let (module, field) = path.rsplit_once('.')?;
        let parameter = |key: String, layout| Some(TorchParameter { key, layout });
        if module == "fc" {
            return match field {
                "weight" => parameter("classifier.1.weight".into(), TorchLayout::Transposed),
                "bias" => parameter("classifier.1.bias".into(), TorchLayout::Same),
                _ => None,
            };
        }
        let (unit, kind) = module.rsplit_once('.')?;
        let field = gated_unit_field(kind, field)?;
        parameter(
            format!("{}.{field}", torchvision_module(unit, kind)?),
            TorchLayout::Same,
        )
    }

    fn companions(key: &str) -> Vec<String> {
        match key.rsplit_once('.') {
            Some((module, "running_mean")) => vec![format!("{module}.num_batches_tracked")],
            _ => Vec::new(),
        }
    }

    fn refuses_torch_weights(&self) -> Option<String> {
        (self.layout() != EfficientNetLayout::Torchvision).then(|| {
            "torchvision's EfficientNet weights for an EfficientNet in Keras's layout, which \
             pads otherwise and normalizes its own input: build it with \
             `EfficientNetLayout::Torchvision` (the default)"
                .to_string()
        })
    }
}

/// torchvision's name of `field` of the `kind` of unit it belongs to: a convolution's
/// (`conv`) or a gate's (`reduce`, `expand`) weight and bias, a batch norm's (`bn`) scale,
/// offset and statistics (`weight`, `bias` there). EfficientNet's and MobileNetV3's.
pub(super) fn gated_unit_field<'a>(kind: &str, field: &'a str) -> Option<&'a str> {
    match (kind, field) {
        ("conv" | "reduce" | "expand", "weight") => Some("weight"),
        ("reduce" | "expand", "bias") => Some("bias"),
        ("bn", "gamma") => Some("weight"),
        ("bn", "beta") => Some("bias"),
        ("bn", "running_mean" | "running_var") => Some(field),
        _ => None,
    }
}

/// torchvision's module of the convolution (`kind` `conv`) or batch norm (`bn`) of our
/// [`ConvBn`](crate::nets::ConvBn) at `unit`, or of the gate's `reduce` or `expand` (`unit`
/// ending in `.se`).
fn torchvision_module(unit: &str, kind: &str) -> Option<String> {
    let layer = match kind {
        "conv" | "reduce" => "0",
        "bn" | "expand" => "1",
        _ => return None,
    };
    match unit {
        "stem" => return Some(format!("features.0.{layer}")),
        "top" => return Some(format!("features.{}.{layer}", EFFICIENTNET_STAGES + 1)),
        _ => {}
    }
    let (block, part) = unit.rsplit_once('.')?;
    let mut parts = block.strip_prefix("stages.")?.split('.');
    let stage: usize = parts.next()?.parse().ok()?;
    let index: usize = parts.next()?.parse().ok()?;
    let expands = stage_expands(stage)?;
    if parts.next().is_some() {
        return None;
    }
    let first = usize::from(expands);
    let position = match (part, kind) {
        ("expand", "conv" | "bn") if expands => 0,
        ("depthwise", "conv" | "bn") => first,
        ("project", "conv" | "bn") => first + 2,
        ("se", "reduce" | "expand") => {
            let fc = if kind == "reduce" { "fc1" } else { "fc2" };
            return Some(format!(
                "features.{}.{index}.block.{}.{fc}",
                stage + 1,
                first + 1
            ));
        }
        _ => return None,
    };
    Some(format!(
        "features.{}.{index}.block.{position}.{layer}",
        stage + 1
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_map_to_torchvision_keys() {
        let key = |path: &str| EfficientNet::torch_parameter(path).map(|p| (p.key, p.layout));
        let same = |k: &str| Some((k.to_string(), TorchLayout::Same));
        assert_eq!(key("stem.conv.weight"), same("features.0.0.weight"));
        assert_eq!(key("stem.bn.gamma"), same("features.0.1.weight"));
        assert_eq!(
            key("stages.0.0.depthwise.conv.weight"),
            same("features.1.0.block.0.0.weight")
        );
        assert_eq!(
            key("stages.0.0.se.reduce.bias"),
            same("features.1.0.block.1.fc1.bias")
        );
        assert_eq!(
            key("stages.0.0.project.bn.beta"),
            same("features.1.0.block.2.1.bias")
        );
        assert_eq!(
            key("stages.1.1.expand.bn.running_var"),
            same("features.2.1.block.0.1.running_var")
        );
        assert_eq!(
            key("stages.1.1.depthwise.conv.weight"),
            same("features.2.1.block.1.0.weight")
        );
        assert_eq!(
            key("stages.5.3.se.expand.weight"),
            same("features.6.3.block.2.fc2.weight")
        );
        assert_eq!(
            key("stages.6.0.project.bn.running_mean"),
            same("features.7.0.block.3.1.running_mean")
        );
        assert_eq!(key("top.bn.gamma"), same("features.8.1.weight"));
        assert_eq!(
            key("fc.weight"),
            Some(("classifier.1.weight".into(), TorchLayout::Transposed))
        );
        for outside in [
            "stages.0.0.expand.conv.weight",
            "stages.7.0.depthwise.conv.weight",
            "stages.1.1.se.reduce.running_mean",
            "stages.1.1.depthwise.reduce.weight",
            "input_norm.adapted_mean",
            "stem.conv.bias",
        ] {
            assert_eq!(key(outside), None, "{outside}");
        }
        assert_eq!(
            EfficientNet::companions("features.2.1.block.0.1.running_mean"),
            ["features.2.1.block.0.1.num_batches_tracked"]
        );
        assert!(EfficientNet::companions("features.2.1.block.2.fc1.bias").is_empty());
    }
}
