//! The torchvision names of [`ResNet`]'s parameters: its paths are torchvision's `state_dict`
//! keys (`layer1.0.conv1.weight`, `fc.bias`) but for three renamings: a batch norm's `gamma`
//! and `beta` are `weight` and `bias` there, a shortcut's `downsample.conv` and `downsample.bn`
//! are `downsample.0` and `downsample.1` (a `Sequential`), and `fc.weight` is `[out, in]`
//! there (a `Linear` of Burn's keeps `[in, out]`).

use crate::nets::{ResNet, ResidualBlock};
use crate::weights::torch_names::{TorchLayout, TorchNamed, TorchParameter};

/// torchvision's module path of our module path `module` (the shortcut's two layers renamed).
fn torchvision_module(module: &str) -> String {
    module
        .replace(".downsample.conv", ".downsample.0")
        .replace(".downsample.bn", ".downsample.1")
}

/// Whether torchvision's module at `module` is a batch norm (`bn1`, `layer1.0.bn3`,
/// `layer2.0.downsample.1`).
fn is_batch_norm(module: &str) -> bool {
    let last = module.rsplit('.').next().unwrap_or(module);
    last.starts_with("bn") || module.ends_with(".downsample.1")
}

impl<Block: ResidualBlock> TorchNamed for ResNet<Block> {
    fn torch_parameter(path: &str) -> Option<TorchParameter> {
        let (module, field) = path.rsplit_once('.')?;
        let module = torchvision_module(module);
        let (field, layout) = match field {
            "weight" if module == "fc" => ("weight", TorchLayout::Transposed),
            "weight" | "bias" | "running_mean" | "running_var" => (field, TorchLayout::Same),
            "gamma" => ("weight", TorchLayout::Same),
            "beta" => ("bias", TorchLayout::Same),
            _ => return None,
        };
        Some(TorchParameter {
            key: format!("{module}.{field}"),
            layout,
        })
    }

    fn companions(key: &str) -> Vec<String> {
        match key.rsplit_once('.') {
            Some((module, _)) if is_batch_norm(module) => {
                vec![format!("{module}.num_batches_tracked")]
            }
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nets::{ResNet50, ResNetConfig};

    #[test]
    fn paths_map_to_torchvision_keys() {
        let key = |path: &str| ResNet50::torch_parameter(path).map(|p| (p.key, p.layout));
        let same = |k: &str| Some((k.to_string(), TorchLayout::Same));
        assert_eq!(key("conv1.weight"), same("conv1.weight"));
        assert_eq!(key("bn1.gamma"), same("bn1.weight"));
        assert_eq!(key("layer3.5.bn3.beta"), same("layer3.5.bn3.bias"));
        assert_eq!(
            key("layer2.0.downsample.conv.weight"),
            same("layer2.0.downsample.0.weight")
        );
        assert_eq!(
            key("layer2.0.downsample.bn.running_var"),
            same("layer2.0.downsample.1.running_var")
        );
        assert_eq!(
            key("fc.weight"),
            Some(("fc.weight".into(), TorchLayout::Transposed))
        );
        assert_eq!(key("fc.bias"), same("fc.bias"));
        assert_eq!(
            ResNet50::companions("layer2.0.downsample.1.weight"),
            ["layer2.0.downsample.1.num_batches_tracked"]
        );
        assert_eq!(
            ResNet50::companions("bn1.running_mean"),
            ["bn1.num_batches_tracked"]
        );
        assert!(ResNet50::companions("layer1.0.conv2.weight").is_empty());
        // Every parameter of the model has a key.
        let model: ResNet50 = ResNetConfig::resnet50(10).init(&burn::tensor::Device::flex());
        let mut paths = crate::params::walk(&model, Vec::new(), |all, path, _, _, _| {
            all.push(path.to_string())
        });
        assert_eq!(
            paths.len(),
            53 + 53 * 4 + 2,
            "53 convolutions, their batch norms, fc"
        );
        paths.retain(|p| ResNet50::torch_parameter(p).is_none());
        assert!(paths.is_empty(), "without a torchvision key: {paths:?}");
    }
}
