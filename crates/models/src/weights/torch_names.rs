//! The torchvision names of our models' parameters: torchvision's `inception_v3` (a port of
//! TF-slim's, `torchvision/models/inception.py`) keyed as its `state_dict()` keys them
//! (`Mixed_5b.branch5x5_1.conv.weight`, `Mixed_5b.branch5x5_1.bn.running_mean`, `fc.weight`).
//!
//! Two differences of layout: torchvision's batch norms have a scale (gamma, `bn.weight`) where
//! slim's have none, and its fully-connected weights are `[out, in]`. A scale is folded into the
//! convolution before the batch norm: `W' = gamma W` (per output channel) and `mean' = gamma
//! mean` give `(W'x - mean') / sqrt(var + eps) + beta = gamma (Wx - mean) / sqrt(var + eps) +
//! beta`, torchvision's batch norm in evaluation, exactly in real arithmetic. (In training the
//! batch's own statistics stand in for the moving ones, and the epsilon then weighs
//! `gamma^2` times less: a fine-tuned model starts from torchvision's function, not from its
//! parametrization.)

use super::tf_names::INCEPTION_SCOPES;
use crate::nets::{Cifar10Net, InceptionV3, ResNetV2};

/// How a torchvision tensor becomes our parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TorchLayout {
    /// Identical (biases, beta, moving variances).
    Same,
    /// `[out, in]` to `[in, out]` (a `Linear`'s weight).
    Transposed,
    /// Multiplied along its first axis (the output channel) by the batch-norm scale at this key:
    /// a convolution kernel or a moving mean, with gamma folded in.
    ScaledBy(String),
}

/// A parameter's torchvision tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TorchParameter {
    /// The `state_dict` key, e.g. `Conv2d_1a_3x3.conv.weight`.
    pub key: String,
    /// How its layout maps onto the parameter's.
    pub layout: TorchLayout,
}

/// A model whose parameters have torchvision counterparts.
pub trait TorchNamed {
    /// The torchvision tensor of the parameter at module path `path`, if it has one.
    fn torch_parameter(path: &str) -> Option<TorchParameter>;

    /// Every torchvision tensor the parameter at `path` may be, of which a file holds one
    /// ([`torch_parameter_in`]): [`torch_parameter`](Self::torch_parameter)'s by default. A
    /// network whose variants number a module otherwise lists each variant's (MobileNetV3's
    /// Large and Small, where a gate before it shifts a block's projection by one).
    fn torch_parameters(path: &str) -> Vec<TorchParameter> {
        Self::torch_parameter(path).into_iter().collect()
    }

    /// The `state_dict` keys that belong to parameters read through others (a batch norm's
    /// scale and step count), given one key of that layer: they are never "unused".
    fn companions(key: &str) -> Vec<String>;

    /// Why this model cannot take torchvision's weights though it has their names and shapes
    /// (a network in another library's layout), or `None`: none by default.
    fn refuses_torch_weights(&self) -> Option<String> {
        None
    }
}

/// The torchvision tensor of the parameter at `path` of `M` in a file that holds the keys
/// `holds` says: the first of [`TorchNamed::torch_parameters`] it holds, else the first (which
/// the file then lacks).
pub fn torch_parameter_in<M: TorchNamed>(
    path: &str,
    holds: impl Fn(&str) -> bool,
) -> Option<TorchParameter> {
    first_held(M::torch_parameters(path), holds)
}

/// The first of `candidates` whose key `holds` says a file holds, else the first.
fn first_held(
    candidates: Vec<TorchParameter>,
    holds: impl Fn(&str) -> bool,
) -> Option<TorchParameter> {
    let held = candidates
        .iter()
        .position(|candidate| holds(&candidate.key));
    candidates.into_iter().nth(held.unwrap_or(0))
}

impl TorchNamed for Cifar10Net {
    /// torchvision has no CIFAR-10 tutorial network.
    fn torch_parameter(_: &str) -> Option<TorchParameter> {
        None
    }

    fn companions(_: &str) -> Vec<String> {
        Vec::new()
    }
}

impl TorchNamed for ResNetV2 {
    /// torchvision has no ResNet v2 (timm's has its strides and stem elsewhere).
    fn torch_parameter(_: &str) -> Option<TorchParameter> {
        None
    }

    fn companions(_: &str) -> Vec<String> {
        Vec::new()
    }
}

impl TorchNamed for InceptionV3 {
    /// A [`BasicConv`](crate::layers::BasicConv) at `S` is torchvision's `BasicConv2d` at `T`:
    /// `S.conv.weight` is `T.conv.weight` scaled by `T.bn.weight`, `S.bn.beta` `T.bn.bias`,
    /// `S.bn.running_{mean,var}` `T.bn.running_{mean,var}` (the mean scaled likewise). The
    /// logits are `fc`, the auxiliary logits `AuxLogits.fc`.
    fn torch_parameter(path: &str) -> Option<TorchParameter> {
        let parameter = |key: String, layout| Some(TorchParameter { key, layout });
        let linear = |module: &str, field: &str| match field {
            "weight" => parameter(format!("{module}.weight"), TorchLayout::Transposed),
            "bias" => parameter(format!("{module}.bias"), TorchLayout::Same),
            _ => None,
        };
        if let Some(field) = path.strip_prefix("logits.") {
            return linear("fc", field);
        }
        if let Some(field) = path.strip_prefix("aux_logits.conv2d_2b_1x1.") {
            return linear("AuxLogits.fc", field);
        }
        let (module, field) = path.rsplit_once('.')?;
        let (module, kind) = module.rsplit_once('.')?;
        INCEPTION_SCOPES.get(module)?;
        let torch = torchvision_module(module)?;
        let gamma = || TorchLayout::ScaledBy(format!("{torch}.bn.weight"));
        match (kind, field) {
            ("conv", "weight") => parameter(format!("{torch}.conv.weight"), gamma()),
            ("bn", "beta") => parameter(format!("{torch}.bn.bias"), TorchLayout::Same),
            ("bn", "running_mean") => parameter(format!("{torch}.bn.running_mean"), gamma()),
            ("bn", "running_var") => {
                parameter(format!("{torch}.bn.running_var"), TorchLayout::Same)
            }
            _ => None,
        }
    }

    fn companions(key: &str) -> Vec<String> {
        let Some(layer) = key
            .strip_suffix(".conv.weight")
            .or_else(|| key.rsplit_once(".bn.").map(|(layer, _)| layer))
        else {
            return Vec::new();
        };
        ["weight", "num_batches_tracked"]
            .iter()
            .map(|field| format!("{layer}.bn.{field}"))
            .collect()
    }
}

/// torchvision's module of the [`BasicConv`](crate::layers::BasicConv) at our module path `module`.
fn torchvision_module(module: &str) -> Option<String> {
    if let Some(stem) = module.strip_prefix("conv2d_") {
        return Some(format!("Conv2d_{stem}"));
    }
    if let Some(aux) = module.strip_prefix("aux_logits.") {
        let conv = match aux {
            "conv2d_1b_1x1" => "conv0",
            "conv2d_2a" => "conv1",
            _ => return None,
        };
        return Some(format!("AuxLogits.{conv}"));
    }
    let (block, conv) = module.split_once('.')?;
    let names: &[(&str, &str)] = match block {
        "mixed_5b" | "mixed_5c" | "mixed_5d" => &INCEPTION_A,
        "mixed_6a" => &INCEPTION_B,
        "mixed_6b" | "mixed_6c" | "mixed_6d" | "mixed_6e" => &INCEPTION_C,
        "mixed_7a" => &INCEPTION_D,
        "mixed_7b" | "mixed_7c" => &INCEPTION_E,
        _ => return None,
    };
    let (_, torch) = names.iter().find(|(ours, _)| *ours == conv)?;
    Some(format!("Mixed_{}.{torch}", &block["mixed_".len()..]))
}

/// Each torchvision block's convolutions: our path within the block, torchvision's name.
const INCEPTION_A: [(&str, &str); 7] = [
    ("branch_0", "branch1x1"),
    ("branch_1.0", "branch5x5_1"),
    ("branch_1.1", "branch5x5_2"),
    ("branch_2.0", "branch3x3dbl_1"),
    ("branch_2.1", "branch3x3dbl_2"),
    ("branch_2.2", "branch3x3dbl_3"),
    ("branch_3", "branch_pool"),
];

const INCEPTION_B: [(&str, &str); 4] = [
    ("branch_0", "branch3x3"),
    ("branch_1.0", "branch3x3dbl_1"),
    ("branch_1.1", "branch3x3dbl_2"),
    ("branch_1.2", "branch3x3dbl_3"),
];

const INCEPTION_C: [(&str, &str); 10] = [
    ("branch_0", "branch1x1"),
    ("branch_1.0", "branch7x7_1"),
    ("branch_1.1", "branch7x7_2"),
    ("branch_1.2", "branch7x7_3"),
    ("branch_2.0", "branch7x7dbl_1"),
    ("branch_2.1", "branch7x7dbl_2"),
    ("branch_2.2", "branch7x7dbl_3"),
    ("branch_2.3", "branch7x7dbl_4"),
    ("branch_2.4", "branch7x7dbl_5"),
    ("branch_3", "branch_pool"),
];

const INCEPTION_D: [(&str, &str); 6] = [
    ("branch_0.0", "branch3x3_1"),
    ("branch_0.1", "branch3x3_2"),
    ("branch_1.0", "branch7x7x3_1"),
    ("branch_1.1", "branch7x7x3_2"),
    ("branch_1.2", "branch7x7x3_3"),
    ("branch_1.3", "branch7x7x3_4"),
];

const INCEPTION_E: [(&str, &str); 9] = [
    ("branch_0", "branch1x1"),
    ("branch_1", "branch3x3_1"),
    ("branch_1_split.0", "branch3x3_2a"),
    ("branch_1_split.1", "branch3x3_2b"),
    ("branch_2.0", "branch3x3dbl_1"),
    ("branch_2.1", "branch3x3dbl_2"),
    ("branch_2_split.0", "branch3x3dbl_3a"),
    ("branch_2_split.1", "branch3x3dbl_3b"),
    ("branch_3", "branch_pool"),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn key(path: &str) -> Option<String> {
        InceptionV3::torch_parameter(path).map(|p| p.key)
    }

    #[test]
    fn slims_layers_map_to_torchvisions() {
        let cases = [
            ("conv2d_1a_3x3.conv.weight", "Conv2d_1a_3x3.conv.weight"),
            (
                "mixed_5c.branch_1.1.bn.beta",
                "Mixed_5c.branch5x5_2.bn.bias",
            ),
            (
                "mixed_6a.branch_0.bn.running_var",
                "Mixed_6a.branch3x3.bn.running_var",
            ),
            (
                "mixed_7b.branch_2_split.1.conv.weight",
                "Mixed_7b.branch3x3dbl_3b.conv.weight",
            ),
            (
                "aux_logits.conv2d_2a.bn.running_mean",
                "AuxLogits.conv1.bn.running_mean",
            ),
            ("aux_logits.conv2d_2b_1x1.weight", "AuxLogits.fc.weight"),
            ("logits.bias", "fc.bias"),
        ];
        for (ours, torch) in cases {
            assert_eq!(key(ours).as_deref(), Some(torch), "{ours}");
        }
        assert_eq!(key("mixed_5b.branch_9.conv.weight"), None);
        assert_eq!(key("mixed_5b.pool.weight"), None);
    }

    #[test]
    fn a_scale_is_folded_and_accounted_for() {
        let p = InceptionV3::torch_parameter("mixed_5b.branch_0.conv.weight").unwrap();
        let gamma = "Mixed_5b.branch1x1.bn.weight".to_string();
        assert_eq!(p.layout, TorchLayout::ScaledBy(gamma.clone()));
        let companions = InceptionV3::companions(&p.key);
        assert_eq!(
            companions,
            [gamma, "Mixed_5b.branch1x1.bn.num_batches_tracked".into()]
        );
        assert_eq!(InceptionV3::companions("fc.weight"), Vec::<String>::new());
    }
}
