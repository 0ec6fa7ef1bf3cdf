//! The networks: the CIFAR-10 tutorial net ([`Cifar10Net`]) and Inception v3 ([`InceptionV3`],
//! `inception/`), built of `layers/`, ResNet ([`ResNet`], [`ResNetV2`], `resnet/`)
//! MobileNetV2 ([`MobileNetV2`], `mobilenet/`), MobileNetV3 ([`MobileNetV3`], `mobilenet_v3/`)
//! and EfficientNet ([`EfficientNet`], `efficientnet/`), built of
//! `towers_kernels::nn`'s drop-in layers as Burn users write models; all behind
//! [`ImageClassifier`] (`classifier.rs`), the trait the trainer and the towers code against.

mod cifar10;
mod classifier;
mod efficientnet;
mod inception;
mod mobilenet;
mod mobilenet_v3;
mod resnet;

pub use cifar10::{Cifar10Config, Cifar10Net};
pub(crate) use classifier::features_classifier;
pub use classifier::{ClassifierLoss, ImageClassifier};
pub(crate) use efficientnet::{EFFICIENTNET_STAGES, stage_expands, variants_stage_blocks};
pub use efficientnet::{
    EfficientNet, EfficientNetConfig, EfficientNetLayout, InputNormalization,
    InputNormalizationConfig, MbConv, MbConvConfig, SqueezeExcitation, SqueezeExcitationConfig,
    SqueezeGate,
};
pub use inception::{
    AuxHead, AuxHeadConfig, InceptionA, InceptionAConfig, InceptionB, InceptionBConfig, InceptionC,
    InceptionCConfig, InceptionD, InceptionDConfig, InceptionE, InceptionEConfig, InceptionV3,
    InceptionV3Config,
};
pub use mobilenet::{
    ConvBn, ConvBnConfig, InvertedResidual, InvertedResidualConfig, MobileNetLayout, MobileNetV2,
    MobileNetV2Config,
};
pub(crate) use mobilenet::{MOBILENET_V2_BLOCKS, divisible_by_8};
pub use mobilenet_v3::{
    MobileNetV3, MobileNetV3Block, MobileNetV3BlockConfig, MobileNetV3Config, MobileNetV3Variant,
};
pub use resnet::{
    BasicBlock, Bottleneck, Downsample, DownsampleConfig, PreActBottleneck, PreActBottleneckConfig,
    ResNet, ResNet18, ResNet50, ResNetConfig, ResNetLayout, ResNetV2, ResNetV2Config,
    ResidualBlock,
};
pub(crate) use resnet::{STAGES_50, STAGES_101, STAGES_152};
