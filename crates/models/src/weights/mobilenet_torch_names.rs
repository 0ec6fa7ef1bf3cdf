//! The torchvision names of [`MobileNetV2`]'s parameters: torchvision's `mobilenet_v2` keys
//! its `state_dict` by the positions of its `Sequential`s. Our `stem` is its `features.0` (the
//! convolution `.0`, the batch norm `.1`), block `b` its `features.{b + 1}.conv`, whose
//! convolutions and batch norms are numbered in order (`expand` `.0.0`/`.0.1` where the block
//! has one, then `depthwise` `.0` or `.1`, then the projection's convolution and batch norm,
//! each a number of its own), `last_conv` its `features.18`, and `fc` its `classifier.1`
//! (`[out, in]` there). A batch norm's `gamma` and `beta` are `weight` and `bias` there.
//!
//! torchvision's `mobilenet_v2` expands in every block but the first, so block 0 is the one
//! without `expand` here.

use crate::nets::{MOBILENET_V2_BLOCKS, MobileNetLayout, MobileNetV2};
use crate::weights::torch_names::{TorchLayout, TorchNamed, TorchParameter};

/// `MobileNetV2`'s blocks: `last_conv` follows them in `features`.
const BLOCKS: usize = MOBILENET_V2_BLOCKS;

impl TorchNamed for MobileNetV2 {
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
        let torch = torchvision_module(unit, kind)?;
        let field = match (kind, field) {
            ("conv", "weight") => "weight",
            ("bn", "gamma") => "weight",
            ("bn", "beta") => "bias",
            ("bn", "running_mean" | "running_var") => field,
            _ => return None,
        };
        parameter(format!("{torch}.{field}"), TorchLayout::Same)
    }

    fn companions(key: &str) -> Vec<String> {
        // Every module with a bias is a batch norm but the classifier.
        match key.rsplit_once('.') {
            Some((module, "running_mean" | "running_var" | "bias")) if module != "classifier.1" => {
                vec![format!("{module}.num_batches_tracked")]
            }
            _ => Vec::new(),
        }
    }

    fn refuses_torch_weights(&self) -> Option<String> {
        (self.layout() != MobileNetLayout::Torchvision).then(|| {
            "torchvision's MobileNetV2 weights for a MobileNetV2 in Keras's layout, which pads \
             and normalizes otherwise: build it with `MobileNetLayout::Torchvision` (the \
             default)"
                .to_string()
        })
    }
}

/// torchvision's module of the convolution (`kind` `conv`) or batch norm (`bn`) of our
/// [`ConvBn`](crate::nets::ConvBn) at `unit`.
fn torchvision_module(unit: &str, kind: &str) -> Option<String> {
    let layer = match kind {
        "conv" => 0,
        "bn" => 1,
        _ => return None,
    };
    match unit {
        "stem" => return Some(format!("features.0.{layer}")),
        "last_conv" => return Some(format!("features.{}.{layer}", BLOCKS + 1)),
        _ => {}
    }
    let mut parts = unit.strip_prefix("blocks.")?.split('.');
    let block: usize = parts.next()?.parse().ok()?;
    let part = parts.next()?;
    if block >= BLOCKS || parts.next().is_some() {
        return None;
    }
    // Block 0 has no expanding convolution: its depthwise one comes first.
    let first = usize::from(block > 0);
    let features = format!("features.{}.conv", block + 1);
    match part {
        "expand" if block > 0 => Some(format!("{features}.0.{layer}")),
        "depthwise" => Some(format!("{features}.{first}.{layer}")),
        "project" => Some(format!("{features}.{}", first + 1 + layer)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_map_to_torchvision_keys() {
        let key = |path: &str| MobileNetV2::torch_parameter(path).map(|p| (p.key, p.layout));
        let same = |k: &str| Some((k.to_string(), TorchLayout::Same));
        assert_eq!(key("stem.conv.weight"), same("features.0.0.weight"));
        assert_eq!(key("stem.bn.gamma"), same("features.0.1.weight"));
        assert_eq!(
            key("blocks.0.depthwise.conv.weight"),
            same("features.1.conv.0.0.weight")
        );
        assert_eq!(
            key("blocks.0.project.conv.weight"),
            same("features.1.conv.1.weight")
        );
        assert_eq!(
            key("blocks.0.project.bn.beta"),
            same("features.1.conv.2.bias")
        );
        assert_eq!(
            key("blocks.1.expand.bn.running_var"),
            same("features.2.conv.0.1.running_var")
        );
        assert_eq!(
            key("blocks.1.depthwise.conv.weight"),
            same("features.2.conv.1.0.weight")
        );
        assert_eq!(
            key("blocks.16.project.conv.weight"),
            same("features.17.conv.2.weight")
        );
        assert_eq!(
            key("blocks.16.project.bn.running_mean"),
            same("features.17.conv.3.running_mean")
        );
        assert_eq!(key("last_conv.bn.gamma"), same("features.18.1.weight"));
        assert_eq!(
            key("fc.weight"),
            Some(("classifier.1.weight".into(), TorchLayout::Transposed))
        );
        for outside in [
            "blocks.0.expand.conv.weight",
            "blocks.17.depthwise.conv.weight",
            "stem.conv.bias",
        ] {
            assert_eq!(key(outside), None, "{outside}");
        }
        assert_eq!(
            MobileNetV2::companions("features.2.conv.3.bias"),
            ["features.2.conv.3.num_batches_tracked"]
        );
        assert!(MobileNetV2::companions("features.2.conv.2.weight").is_empty());
        assert!(MobileNetV2::companions("classifier.1.bias").is_empty());
    }
}
