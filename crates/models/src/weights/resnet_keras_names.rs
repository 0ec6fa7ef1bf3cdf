//! The TF names of [`ResNet`]'s and [`ResNetV2`]'s parameters: the names keras.applications
//! gives the variables of its `ResNet50` (`keras/src/applications/resnet.py`, v1; also
//! `ResNet101` and `ResNet152`) and `ResNet50V2` (`keras/src/applications/resnet_v2.py`, also
//! `101V2` and `152V2`), layer by layer (`conv2_block1_1_conv/kernel`). Our stages
//! `layer1`..`layer4` are Keras's `conv2`..`conv5`, block `b` its `block{b + 1}`, a block's
//! `conv1`..`conv3` its `_1_conv`..`_3_conv` (batch norms `_bn`, v2's `preact_bn` its
//! `_preact_bn`), the shortcut its `_0_conv` and `_0_bn` (v2's `shortcut`: `_0_conv`), and `fc`
//! its `predictions`.
//!
//! Only a ResNet in [`ResNetLayout::Keras`](crate::nets::ResNetLayout) is Keras's network:
//! torchvision's layout has the same shapes but its stride elsewhere and no convolution biases.

use super::tf_source::{TfLayout, TfNamed, TfVariable};
use crate::nets::{ResNet, ResNetV2, ResidualBlock};

impl<Block: ResidualBlock> TfNamed for ResNet<Block> {
    fn tf_variable(path: &str) -> Option<TfVariable> {
        keras_variable(path)
    }

    fn classifier_paths() -> &'static [&'static str] {
        &["fc"]
    }
}

impl TfNamed for ResNetV2 {
    fn tf_variable(path: &str) -> Option<TfVariable> {
        keras_variable(path)
    }

    fn classifier_paths() -> &'static [&'static str] {
        &["fc"]
    }
}

/// Keras's variable for the parameter at our path `path` of either ResNet.
fn keras_variable(path: &str) -> Option<TfVariable> {
    let (module, field) = path.rsplit_once('.')?;
    let layer = keras_layer(module)?;
    let dense = layer == "predictions";
    let (name, layout) = match field {
        "weight" if dense => ("kernel", TfLayout::Same),
        "weight" => ("kernel", TfLayout::ConvKernel),
        "bias" => ("bias", TfLayout::Same),
        "gamma" | "beta" => (field, TfLayout::Same),
        "running_mean" => ("moving_mean", TfLayout::Same),
        "running_var" => ("moving_variance", TfLayout::Same),
        _ => return None,
    };
    Some(TfVariable::new(format!("{layer}/{name}"), layout))
}

/// Keras's layer name for our module path `module` (`layer1.0.conv2`: `conv2_block1_2_conv`).
fn keras_layer(module: &str) -> Option<String> {
    match module {
        "conv1" => return Some("conv1_conv".into()),
        "bn1" => return Some("conv1_bn".into()),
        "post_bn" => return Some("post_bn".into()),
        "fc" => return Some("predictions".into()),
        _ => {}
    }
    let mut parts = module.split('.');
    let stage: usize = parts.next()?.strip_prefix("layer")?.parse().ok()?;
    let block: usize = parts.next()?.parse().ok()?;
    let layer = match (parts.next()?, parts.next()) {
        ("downsample", Some("conv")) | ("shortcut", None) => "0_conv".to_string(),
        ("downsample", Some("bn")) => "0_bn".to_string(),
        ("preact_bn", None) => "preact_bn".to_string(),
        (layer, None) => {
            let (kind, number) = layer.split_at(layer.find(|c: char| c.is_ascii_digit())?);
            let number: usize = number.parse().ok()?;
            matches!(kind, "conv" | "bn").then(|| format!("{number}_{kind}"))?
        }
        _ => return None,
    };
    if !(1..=4).contains(&stage) || parts.next().is_some() {
        return None;
    }
    Some(format!("conv{}_block{}_{layer}", stage + 1, block + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nets::{ResNet50, ResNetConfig, ResNetV2Config};

    #[test]
    fn paths_map_to_keras_names() {
        let name = |path: &str| ResNet50::tf_variable(path).map(|v| (v.name, v.layout));
        let same = |n: &str| Some((n.to_string(), TfLayout::Same));
        let kernel = |n: &str| Some((n.to_string(), TfLayout::ConvKernel));
        assert_eq!(name("conv1.weight"), kernel("conv1_conv/kernel"));
        assert_eq!(name("conv1.bias"), same("conv1_conv/bias"));
        assert_eq!(name("bn1.gamma"), same("conv1_bn/gamma"));
        assert_eq!(
            name("layer1.0.conv2.weight"),
            kernel("conv2_block1_2_conv/kernel")
        );
        assert_eq!(
            name("layer3.5.bn3.running_var"),
            same("conv4_block6_3_bn/moving_variance")
        );
        assert_eq!(
            name("layer2.0.downsample.conv.bias"),
            same("conv3_block1_0_conv/bias")
        );
        assert_eq!(
            name("layer4.0.downsample.bn.running_mean"),
            same("conv5_block1_0_bn/moving_mean")
        );
        assert_eq!(name("fc.weight"), same("predictions/kernel"));
        assert_eq!(name("fc.bias"), same("predictions/bias"));
        for outside in [
            "layer5.0.conv1.weight",
            "layer1.0.conv1.weight.x",
            "layer1.0.relu.weight",
            "layer1.x.conv1.weight",
            "layer1.0.downsample.pool.weight",
            "bn1.num_batches_tracked",
        ] {
            assert_eq!(name(outside), None, "{outside}");
        }
    }

    /// Every parameter of Keras's ResNet-50 has a name, each its own: 53 convolutions with
    /// biases, 53 batch norms of four tensors, the dense layer.
    #[test]
    fn every_parameter_has_its_own_keras_name() {
        let model: ResNet50 = ResNetConfig::keras_resnet50(10).init(&burn::tensor::Device::flex());
        let paths = crate::params::walk(&model, Vec::new(), |all, path, _, _, _| {
            all.push(path.to_string())
        });
        assert_eq!(paths.len(), 53 * 2 + 53 * 4 + 2);
        let names: std::collections::BTreeSet<String> = paths
            .iter()
            .map(|path| ResNet50::tf_variable(path).expect(path).name)
            .collect();
        assert_eq!(names.len(), paths.len());
    }

    #[test]
    fn resnet_v2_paths_map_to_keras_names() {
        let name = |path: &str| ResNetV2::tf_variable(path).map(|v| (v.name, v.layout));
        let same = |n: &str| Some((n.to_string(), TfLayout::Same));
        let kernel = |n: &str| Some((n.to_string(), TfLayout::ConvKernel));
        assert_eq!(name("conv1.bias"), same("conv1_conv/bias"));
        assert_eq!(
            name("layer2.3.preact_bn.gamma"),
            same("conv3_block4_preact_bn/gamma")
        );
        assert_eq!(
            name("layer1.0.shortcut.weight"),
            kernel("conv2_block1_0_conv/kernel")
        );
        assert_eq!(
            name("layer4.2.conv3.bias"),
            same("conv5_block3_3_conv/bias")
        );
        assert_eq!(name("post_bn.running_var"), same("post_bn/moving_variance"));
        for outside in [
            "layer1.0.preact_bn.x.gamma",
            "layer1.0.subsample.weight",
            "layer1.0.shortcut.conv.weight",
            "layer0.0.preact_bn.gamma",
        ] {
            assert_eq!(name(outside), None, "{outside}");
        }
    }

    /// Every parameter of Keras's ResNet50V2 has a name, each its own: 53 convolutions, 21 of
    /// them with biases (the stem's, every block's `_3_conv`, the four `_0_conv`s), 49 batch
    /// norms of four tensors, the dense layer: the 272 weights of Keras's file.
    #[test]
    fn every_parameter_of_resnet_v2_has_its_own_keras_name() {
        let model = ResNetV2Config::resnet50v2(10).init(&burn::tensor::Device::flex());
        let paths = crate::params::walk(&model, Vec::new(), |all, path, _, _, _| {
            all.push(path.to_string())
        });
        assert_eq!(paths.len(), 53 + 21 + 49 * 4 + 2);
        let names: std::collections::BTreeSet<String> = paths
            .iter()
            .map(|path| ResNetV2::tf_variable(path).expect(path).name)
            .collect();
        assert_eq!(names.len(), paths.len());
    }
}
