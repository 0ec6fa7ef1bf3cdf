//! The flags that choose an ImageNet-style network (the `resnet` and `resnet_eval` examples): a
//! ResNet v1 or v2, a MobileNetV2 or V3 or an EfficientNet, in torchvision's or Keras's layout,
//! and the preprocessing its weights expect. [`NetworkArgs::build`] hands the chosen network to
//! a [`NetworkUser`]: a trainer, an evaluation.

use std::path::Path;

use burn::tensor::Device;
use towers_models::weights::{TfNamed, TorchNamed};
use towers_models::{
    BasicBlock, Bottleneck, EfficientNetConfig, EfficientNetLayout, ImageClassifier,
    MobileNetLayout, MobileNetV2Config, MobileNetV3Config, MobileNetV3Variant, ResNetConfig,
    ResNetLayout, ResNetV2Config, ResidualBlock,
};

use crate::error::{Error, Result};
use crate::preprocessing::Preprocessing;
use crate::pretrained::{efficientnet_for_weights, mobilenet_v3_for_weights, resnet_layout_for};

/// Which network, in whose layout, through which preprocessing (`#[command(flatten)]` it).
#[derive(Debug, Clone, clap::Args)]
#[non_exhaustive]
pub struct NetworkArgs {
    /// 50, 101 or 152 (bottleneck blocks), 18 or 34 (basic blocks); with `--v2`, 50, 101 or
    /// 152.
    #[arg(long, default_value_t = 50)]
    pub depth: usize,
    /// keras.applications' pre-activation ResNet v2 (`ResNet50V2`) instead of v1.
    #[arg(long)]
    pub v2: bool,
    /// MobileNetV2 instead of a ResNet, in `--layout`'s library's layout.
    #[arg(long, conflicts_with_all = ["v2", "depth"])]
    pub mobilenet_v2: bool,
    /// MobileNetV3 (`large` or `small`) instead of a ResNet, in `--layout`'s library's layout.
    #[arg(long, value_name = "VARIANT", conflicts_with_all = ["v2", "depth", "mobilenet_v2"])]
    pub mobilenet_v3: Option<MobileNetV3Variant>,
    /// MobileNetV2's and V3's width multiplier (Keras's `alpha`, torchvision's `width_mult`).
    #[arg(long, default_value_t = 1.0)]
    pub width: f64,
    /// MobileNetV3: Keras's minimalistic network (3x3 kernels, ReLU, no gates).
    #[arg(long, requires = "mobilenet_v3")]
    pub minimalistic: bool,
    /// EfficientNet-B`B` (0 to 7) instead of a ResNet, in `--layout`'s library's layout.
    #[arg(long, value_name = "B", conflicts_with_all = ["v2", "depth", "mobilenet_v2", "mobilenet_v3"])]
    #[arg(value_parser = clap::value_parser!(u8).range(0..=7))]
    pub efficientnet: Option<u8>,
    /// Whose ResNet (or MobileNet, EfficientNet): `torchvision` (v1.5) or `keras`
    /// (keras.applications' v1, with biases); default: Keras's for Keras weights, else
    /// torchvision's.
    #[arg(long)]
    pub layout: Option<ResNetLayout>,
    /// The input preprocessing: torchvision's (what its ResNet weights expect; with
    /// `torchvision-bicubic` its evaluation resizes by Pillow's bicubic filter, as for its
    /// EfficientNets), TF's Inception distortions, Keras's (BGR less the mean pixel), Keras's
    /// "tf" mode (in [-1, 1]) or Keras's pixels (in 0-255); default: the layout's library's,
    /// `keras-tf` for `--v2` and Keras's MobileNetV2, `keras-pixels` for Keras's EfficientNet
    /// and MobileNetV3, `torchvision-bicubic` for torchvision's EfficientNet.
    #[arg(long, value_enum)]
    pub preprocessing: Option<Preprocessing>,
}

/// What takes the network [`NetworkArgs`] chose: a trainer, an evaluation. A trait, not a
/// closure: the network's type depends on the flags, and a closure cannot be generic over it.
pub trait NetworkUser {
    /// What it makes of the network.
    type Output;

    /// Takes `net`, which builds the network of (classes, image side, weight decay) on a
    /// device, and the preprocessing its weights expect (`--preprocessing` where given).
    fn take<M, Net>(self, net: Net, preprocessing: Preprocessing) -> Self::Output
    where
        M: ImageClassifier + TfNamed + TorchNamed + 'static,
        Net: Fn(usize, usize, f64, &Device) -> M + Sync;
}

impl NetworkArgs {
    /// The network's name (`ResNet-50`, `MobileNetV3-Small`, `EfficientNet-B0`).
    pub fn name(&self) -> String {
        match (self.efficientnet, self.mobilenet_v3) {
            (Some(variant), _) => format!("EfficientNet-B{variant}"),
            (_, Some(variant)) => format!("MobileNetV3-{variant:?}"),
            _ if self.mobilenet_v2 => "MobileNetV2".to_string(),
            _ if self.v2 => format!("ResNet{}V2", self.depth),
            _ => format!("ResNet-{}", self.depth),
        }
    }

    /// The side of the images the network's weights were trained on: 224, an EfficientNet's
    /// variant's own.
    pub fn full_image_size(&self) -> usize {
        match self.efficientnet {
            Some(variant) => EfficientNetConfig::b(variant.into()).image_size,
            None => 224,
        }
    }

    /// The layout: `--layout`, else that of the `weights` (Keras's for a Keras file).
    pub fn layout(&self, weights: Option<&Path>) -> ResNetLayout {
        (self.layout)
            .or(weights.map(resnet_layout_for))
            .unwrap_or(ResNetLayout::Torchvision)
    }

    /// Hands the chosen network to `user`, built to take the `weights` it will start from
    /// (their layout where `--layout` does not say; the head and input scaling of the network
    /// a Keras file or a checkpoint of ours holds), or why the flags name no network.
    pub fn build<U: NetworkUser>(&self, weights: Option<&Path>, user: U) -> Result<U::Output> {
        let layout = self.layout(weights);
        if self.v2 {
            return self.resnet_v2(user);
        }
        if self.mobilenet_v2 {
            let layout = MobileNetLayout::from(layout);
            let config = MobileNetV2Config::new().with_layout(layout);
            let config = config.with_width(self.width);
            let net = |classes, size, decay, device: &Device| {
                (config.clone().with_num_classes(classes))
                    .with_image_size(size)
                    .with_weight_decay(decay)
                    .init(device)
            };
            return Ok(self.hand(user, net, Preprocessing::for_mobilenet(layout)));
        }
        if let Some(variant) = self.mobilenet_v3 {
            return self.mobilenet_v3(variant, MobileNetLayout::from(layout), weights, user);
        }
        if let Some(variant) = self.efficientnet {
            return self.efficientnet(variant, EfficientNetLayout::from(layout), weights, user);
        }
        match self.depth {
            18 => Ok(self.resnet_v1::<BasicBlock, U>(ResNetConfig::resnet18(0), layout, user)),
            34 => Ok(self.resnet_v1::<BasicBlock, U>(ResNetConfig::resnet34(0), layout, user)),
            50 => Ok(self.resnet_v1::<Bottleneck, U>(ResNetConfig::resnet50(0), layout, user)),
            101 => Ok(self.resnet_v1::<Bottleneck, U>(ResNetConfig::resnet101(0), layout, user)),
            152 => Ok(self.resnet_v1::<Bottleneck, U>(ResNetConfig::resnet152(0), layout, user)),
            other => Err(Error::Config(format!(
                "--depth is 18, 34, 50, 101 or 152, not {other}"
            ))),
        }
    }

    /// keras.applications' ResNet v2 of `--depth`: Keras's network alone.
    fn resnet_v2<U: NetworkUser>(&self, user: U) -> Result<U::Output> {
        if self.layout.is_some() {
            return Err(Error::Config(
                "--layout chooses a ResNet v1's; --v2 is Keras's network alone".into(),
            ));
        }
        let stages = ResNetV2Config::of_depth(self.depth, 0)
            .ok_or_else(|| Error::Config("--v2 takes --depth 50, 101 or 152".into()))?;
        let net = |classes, size, decay, device: &Device| {
            (stages.clone().with_num_classes(classes))
                .with_image_size(size)
                .with_weight_decay(decay)
                .init(device)
        };
        Ok(self.hand(user, net, Preprocessing::KerasTf))
    }

    /// A ResNet v1 of `Block`s with `stages`' blocks per stage, in `layout`.
    fn resnet_v1<Block: ResidualBlock + 'static, U: NetworkUser>(
        &self,
        stages: ResNetConfig,
        layout: ResNetLayout,
        user: U,
    ) -> U::Output {
        let stages = stages.with_layout(layout);
        let net = |classes, size, decay, device: &Device| {
            (stages.clone().with_num_classes(classes))
                .with_image_size(size)
                .with_weight_decay(decay)
                .init::<Block>(device)
        };
        self.hand(user, net, Preprocessing::for_resnet(layout))
    }

    /// MobileNetV3 `variant` in `layout`, with the head of the network of the `weights`.
    fn mobilenet_v3<U: NetworkUser>(
        &self,
        variant: MobileNetV3Variant,
        layout: MobileNetLayout,
        weights: Option<&Path>,
        user: U,
    ) -> Result<U::Output> {
        let mut config = (MobileNetV3Config::new(variant).with_layout(layout))
            .with_width(self.width)
            .with_minimalistic(self.minimalistic);
        if let Some(weights) = weights {
            config = mobilenet_v3_for_weights(config, weights)?;
        }
        let net = |classes, size, decay, device: &Device| {
            (config.clone().with_num_classes(classes))
                .with_image_size(size)
                .with_weight_decay(decay)
                .init(device)
        };
        Ok(self.hand(user, net, Preprocessing::for_mobilenet_v3(layout)))
    }

    /// EfficientNet-B`variant` in `layout`, with the input rescaling of the network of the
    /// `weights`.
    fn efficientnet<U: NetworkUser>(
        &self,
        variant: u8,
        layout: EfficientNetLayout,
        weights: Option<&Path>,
        user: U,
    ) -> Result<U::Output> {
        let mut config = EfficientNetConfig::b(variant.into()).with_layout(layout);
        if let Some(weights) = weights {
            config = efficientnet_for_weights(config, weights)?;
        }
        let net = |classes, size, decay, device: &Device| {
            (config.clone().with_num_classes(classes))
                .with_image_size(size)
                .with_weight_decay(decay)
                .init(device)
        };
        Ok(self.hand(user, net, Preprocessing::for_efficientnet(layout)))
    }

    /// `user` given `net` and `--preprocessing`, else `preprocessing`.
    fn hand<U, M, Net>(&self, user: U, net: Net, preprocessing: Preprocessing) -> U::Output
    where
        U: NetworkUser,
        M: ImageClassifier + TfNamed + TorchNamed + 'static,
        Net: Fn(usize, usize, f64, &Device) -> M + Sync,
    {
        user.take(net, self.preprocessing.unwrap_or(preprocessing))
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Command {
        #[command(flatten)]
        network: NetworkArgs,
    }

    /// The network's type (without module paths: `ResNet<Bottleneck>`) and the preprocessing
    /// it is handed with.
    struct Chosen;

    impl NetworkUser for Chosen {
        type Output = (String, Preprocessing);

        fn take<M, Net>(self, _: Net, preprocessing: Preprocessing) -> Self::Output
        where
            M: ImageClassifier + TfNamed + TorchNamed + 'static,
            Net: Fn(usize, usize, f64, &Device) -> M + Sync,
        {
            let name = std::any::type_name::<M>();
            let parts = name.split(['<', '>']).filter(|part| !part.is_empty());
            let short: Vec<&str> = parts.map(|p| p.rsplit("::").next().unwrap_or(p)).collect();
            let name = match short[..] {
                [outer, inner] => format!("{outer}<{inner}>"),
                _ => short.concat(),
            };
            (name, preprocessing)
        }
    }

    /// The flags (as `resnet` would take them) parsed.
    fn parsed(flags: &str) -> NetworkArgs {
        let words = std::iter::once("resnet").chain(flags.split_whitespace());
        Command::try_parse_from(words)
            .expect("flags that parse")
            .network
    }

    /// What `flags` choose for the `weights`.
    fn chosen(flags: &str, weights: Option<&str>) -> Result<(String, Preprocessing)> {
        parsed(flags).build(weights.map(Path::new), Chosen)
    }

    #[test]
    fn the_flags_choose_the_network_and_its_libraries_preprocessing() {
        use Preprocessing::*;
        let cases = [
            ("", None, "ResNet<Bottleneck>", Torchvision),
            ("--depth 18", None, "ResNet<BasicBlock>", Torchvision),
            ("", Some("resnet50.h5"), "ResNet<Bottleneck>", Keras),
            ("--v2", None, "ResNetV2", KerasTf),
            (
                "--mobilenet-v2 --layout keras",
                None,
                "MobileNetV2",
                KerasTf,
            ),
            ("--mobilenet-v3 small", None, "MobileNetV3", Torchvision),
            ("--efficientnet 3", None, "EfficientNet", TorchvisionBicubic),
            (
                "--efficientnet 0 --layout keras --preprocessing inception",
                None,
                "EfficientNet",
                Inception,
            ),
        ];
        for (flags, weights, name, preprocessing) in cases {
            let expected = (name.to_string(), preprocessing);
            let chosen = chosen(flags, weights).unwrap();
            assert_eq!(chosen, expected, "{flags} {weights:?}");
        }
    }

    #[test]
    fn flags_that_name_no_network_say_why() {
        let error = |flags| chosen(flags, None).unwrap_err().to_string();
        assert!(error("--depth 20").contains("--depth is 18, 34, 50, 101 or 152, not 20"));
        assert!(error("--v2 --depth 18").contains("--v2 takes --depth 50, 101 or 152"));
        assert!(error("--v2 --layout keras").contains("--v2 is Keras's network alone"));
    }

    #[test]
    fn names_and_image_sides_are_the_networks() {
        assert_eq!(parsed("").name(), "ResNet-50");
        assert_eq!(parsed("--v2 --depth 101").name(), "ResNet101V2");
        assert_eq!(parsed("--mobilenet-v3 large").name(), "MobileNetV3-Large");
        assert_eq!(parsed("--efficientnet 4").name(), "EfficientNet-B4");
        assert_eq!(parsed("--efficientnet 4").full_image_size(), 380);
        assert_eq!(parsed("--mobilenet-v2").full_image_size(), 224);
    }
}
