//! The TF names of our models' parameters: the CIFAR-10 tutorial's (`conv1/weights`, ...)
//! and TF-slim Inception v3's (`InceptionV3/Mixed_5b/Branch_1/Conv2d_0b_5x5/weights`, ...);
//! ResNet's, Keras's, are in `resnet_keras_names.rs`.

use std::collections::HashMap;
use std::sync::LazyLock;

use super::tf_source::{TfLayout, TfNamed, TfVariable};
use crate::nets::{Cifar10Net, InceptionV3};

impl TfNamed for Cifar10Net {
    /// `conv1.weight` is `conv1/weights` (HWIO), `local3.bias` is `local3/biases`, and so on.
    /// `local3/weights` needs no permutation: [`Cifar10Net`] flattens its features in TF's
    /// NHWC order.
    fn tf_variable(path: &str) -> Option<TfVariable> {
        let (layer, field) = path.split_once('.')?;
        let conv = matches!(layer, "conv1" | "conv2");
        if !conv && !matches!(layer, "local3" | "local4" | "softmax_linear") {
            return None;
        }
        let (name, layout) = match field {
            "weight" if conv => ("weights", TfLayout::ConvKernel),
            "weight" => ("weights", TfLayout::Same),
            "bias" => ("biases", TfLayout::Same),
            _ => return None,
        };
        Some(TfVariable::new(format!("{layer}/{name}"), layout))
    }

    fn classifier_paths() -> &'static [&'static str] {
        &["softmax_linear"]
    }
}

impl TfNamed for InceptionV3 {
    /// A [`BasicConv`](crate::layers::BasicConv) at `S` has `S.conv.weight` (TF's `SCOPE/weights`) and
    /// `S.bn.{beta,running_mean,running_var}` (`SCOPE/BatchNorm/{beta,moving_mean,
    /// moving_variance}`); the logits layers are 1x1 convolutions in TF.
    fn tf_variable(path: &str) -> Option<TfVariable> {
        let linear = |scope: &str, field: &str| {
            let (name, layout) = match field {
                "weight" => ("weights", TfLayout::Kernel1x1),
                "bias" => ("biases", TfLayout::Same),
                _ => return None,
            };
            Some(TfVariable::new(
                format!("InceptionV3/{scope}/{name}"),
                layout,
            ))
        };
        if let Some(field) = path.strip_prefix("logits.") {
            return linear("Logits/Conv2d_1c_1x1", field);
        }
        if let Some(field) = path.strip_prefix("aux_logits.conv2d_2b_1x1.") {
            return linear("AuxLogits/Conv2d_2b_1x1", field);
        }
        let (module, field) = path.rsplit_once('.')?;
        let (module, kind) = module.rsplit_once('.')?;
        let scope = INCEPTION_SCOPES.get(module)?;
        let (name, layout) = match (kind, field) {
            ("conv", "weight") => ("weights", TfLayout::ConvKernel),
            ("bn", "beta") => ("BatchNorm/beta", TfLayout::Same),
            ("bn", "running_mean") => ("BatchNorm/moving_mean", TfLayout::Same),
            ("bn", "running_var") => ("BatchNorm/moving_variance", TfLayout::Same),
            _ => return None,
        };
        Some(TfVariable::new(
            format!("InceptionV3/{scope}/{name}"),
            layout,
        ))
    }

    fn classifier_paths() -> &'static [&'static str] {
        &["logits", "aux_logits.conv2d_2b_1x1"]
    }
}

/// TF-slim's scope of each [`BasicConv`](crate::layers::BasicConv) of [`InceptionV3`], by module path.
pub(super) static INCEPTION_SCOPES: LazyLock<HashMap<String, String>> = LazyLock::new(|| {
    let mut scopes = HashMap::new();
    for stem in STEM {
        scopes.insert(format!("conv2d_{stem}"), format!("Conv2d_{stem}"));
    }
    let aux = [
        ("conv2d_1b_1x1", "Conv2d_1b_1x1"),
        ("conv2d_2a", "Conv2d_2a_5x5"),
    ];
    for (ours, tf) in aux {
        scopes.insert(format!("aux_logits.{ours}"), format!("AuxLogits/{tf}"));
    }
    for (block, convs) in BLOCKS {
        for (ours, tf) in *convs {
            scopes.insert(
                format!("{block}.{ours}"),
                format!("{}/{tf}", tf_block(block)),
            );
        }
    }
    scopes
});

/// TF-slim's scope of each [`BasicConv`](crate::layers::BasicConv) of [`InceptionV3`] but the
/// aux head's, in the order its graph builds them: the stem's, then each mixed block's,
/// branch by branch. keras.applications' InceptionV3 builds the same convolutions in the same
/// order, which is how its layers (`conv2d`, `conv2d_1`, ... in that order) find their scopes.
pub(super) fn inception_scopes_in_order() -> Vec<String> {
    let stem = STEM.iter().map(|stem| format!("Conv2d_{stem}"));
    let blocks = BLOCKS.iter().flat_map(|(block, convs)| {
        convs
            .iter()
            .map(move |(_, tf)| format!("{}/{tf}", tf_block(block)))
    });
    stem.chain(blocks).collect()
}

/// The stem's convolutions, in order: `conv2d_1a_3x3` is TF-slim's `Conv2d_1a_3x3`, ...
const STEM: [&str; 5] = ["1a_3x3", "2a_3x3", "2b_3x3", "3b_1x1", "4a_3x3"];

/// TF-slim's scope of our mixed block `block` (`mixed_5b` is `Mixed_5b`).
fn tf_block(block: &str) -> String {
    format!("Mixed_{}", &block["mixed_".len()..])
}

type Convs = &'static [(&'static str, &'static str)];

/// Each mixed block's convolutions: our path within the block, TF-slim's scope within it.
/// Slim's names are not regular (`Conv_1_0c_5x5` in Mixed_5c, `Conv2d_0c_3x1` in Mixed_7c's
/// first branch but `Conv2d_0b_3x1` in Mixed_7b's), so they are listed as slim spells them.
const BLOCKS: &[(&str, Convs)] = &[
    ("mixed_5b", &MIXED_5B),
    ("mixed_5c", &MIXED_5C),
    ("mixed_5d", &MIXED_5B),
    ("mixed_6a", &MIXED_6A),
    ("mixed_6b", &MIXED_6B),
    ("mixed_6c", &MIXED_6B),
    ("mixed_6d", &MIXED_6B),
    ("mixed_6e", &MIXED_6B),
    ("mixed_7a", &MIXED_7A),
    ("mixed_7b", &MIXED_7B),
    ("mixed_7c", &MIXED_7C),
];

const MIXED_5B: [(&str, &str); 7] = [
    ("branch_0", "Branch_0/Conv2d_0a_1x1"),
    ("branch_1.0", "Branch_1/Conv2d_0a_1x1"),
    ("branch_1.1", "Branch_1/Conv2d_0b_5x5"),
    ("branch_2.0", "Branch_2/Conv2d_0a_1x1"),
    ("branch_2.1", "Branch_2/Conv2d_0b_3x3"),
    ("branch_2.2", "Branch_2/Conv2d_0c_3x3"),
    ("branch_3", "Branch_3/Conv2d_0b_1x1"),
];

const MIXED_5C: [(&str, &str); 7] = [
    ("branch_0", "Branch_0/Conv2d_0a_1x1"),
    ("branch_1.0", "Branch_1/Conv2d_0b_1x1"),
    ("branch_1.1", "Branch_1/Conv_1_0c_5x5"),
    ("branch_2.0", "Branch_2/Conv2d_0a_1x1"),
    ("branch_2.1", "Branch_2/Conv2d_0b_3x3"),
    ("branch_2.2", "Branch_2/Conv2d_0c_3x3"),
    ("branch_3", "Branch_3/Conv2d_0b_1x1"),
];

const MIXED_6A: [(&str, &str); 4] = [
    ("branch_0", "Branch_0/Conv2d_1a_1x1"),
    ("branch_1.0", "Branch_1/Conv2d_0a_1x1"),
    ("branch_1.1", "Branch_1/Conv2d_0b_3x3"),
    ("branch_1.2", "Branch_1/Conv2d_1a_1x1"),
];

const MIXED_6B: [(&str, &str); 10] = [
    ("branch_0", "Branch_0/Conv2d_0a_1x1"),
    ("branch_1.0", "Branch_1/Conv2d_0a_1x1"),
    ("branch_1.1", "Branch_1/Conv2d_0b_1x7"),
    ("branch_1.2", "Branch_1/Conv2d_0c_7x1"),
    ("branch_2.0", "Branch_2/Conv2d_0a_1x1"),
    ("branch_2.1", "Branch_2/Conv2d_0b_7x1"),
    ("branch_2.2", "Branch_2/Conv2d_0c_1x7"),
    ("branch_2.3", "Branch_2/Conv2d_0d_7x1"),
    ("branch_2.4", "Branch_2/Conv2d_0e_1x7"),
    ("branch_3", "Branch_3/Conv2d_0b_1x1"),
];

const MIXED_7A: [(&str, &str); 6] = [
    ("branch_0.0", "Branch_0/Conv2d_0a_1x1"),
    ("branch_0.1", "Branch_0/Conv2d_1a_3x3"),
    ("branch_1.0", "Branch_1/Conv2d_0a_1x1"),
    ("branch_1.1", "Branch_1/Conv2d_0b_1x7"),
    ("branch_1.2", "Branch_1/Conv2d_0c_7x1"),
    ("branch_1.3", "Branch_1/Conv2d_1a_3x3"),
];

const MIXED_7B: [(&str, &str); 9] = [
    ("branch_0", "Branch_0/Conv2d_0a_1x1"),
    ("branch_1", "Branch_1/Conv2d_0a_1x1"),
    ("branch_1_split.0", "Branch_1/Conv2d_0b_1x3"),
    ("branch_1_split.1", "Branch_1/Conv2d_0b_3x1"),
    ("branch_2.0", "Branch_2/Conv2d_0a_1x1"),
    ("branch_2.1", "Branch_2/Conv2d_0b_3x3"),
    ("branch_2_split.0", "Branch_2/Conv2d_0c_1x3"),
    ("branch_2_split.1", "Branch_2/Conv2d_0d_3x1"),
    ("branch_3", "Branch_3/Conv2d_0b_1x1"),
];

const MIXED_7C: [(&str, &str); 9] = [
    ("branch_0", "Branch_0/Conv2d_0a_1x1"),
    ("branch_1", "Branch_1/Conv2d_0a_1x1"),
    ("branch_1_split.0", "Branch_1/Conv2d_0b_1x3"),
    ("branch_1_split.1", "Branch_1/Conv2d_0c_3x1"),
    ("branch_2.0", "Branch_2/Conv2d_0a_1x1"),
    ("branch_2.1", "Branch_2/Conv2d_0b_3x3"),
    ("branch_2_split.0", "Branch_2/Conv2d_0c_1x3"),
    ("branch_2_split.1", "Branch_2/Conv2d_0d_3x1"),
    ("branch_3", "Branch_3/Conv2d_0b_1x1"),
];
