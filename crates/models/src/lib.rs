//! The image models of burn-towers, layer for layer as TensorFlow users know them:
//! the CIFAR-10 tutorial network and Inception v3 (TF-slim layout), and ResNet (torchvision's
//! layout or keras.applications', and Keras's pre-activation ResNet50V2), MobileNetV2 and
//! EfficientNet B0-B7 (torchvision's or keras.applications'), behind one
//! [`ImageClassifier`] trait that the trainer and the towers code against.
//!
//! The crate's folders, bottom up: `layers/` (TF-slim's layers on the ops of `towers-kernels`:
//! burn-towers' flex kernels or Burn's, in the thread's precision),
//! `nets/` (the CIFAR-10 net, Inception v3, ResNet, MobileNetV2 and EfficientNet), and
//! [`weights`] (restoring TF, PyTorch and Keras weights into the nets). Beside them, `params.rs` counts parameters and collects weight
//! decay, `penalty.rs` sums its L2 penalty, and `parameter_table.rs` prints a net's parameters
//! layer by layer. The public items of `layers/` and `nets/` are re-exported here, their one
//! path.

mod layers;
mod nets;
mod parameter_table;
mod params;
mod penalty;
pub mod weights;

pub use layers::{
    BasicConv, BasicConvConfig, Lrn, LrnConfig, OffsetBatchNorm, OffsetBatchNormConfig,
    drop_examples, dropout, truncated_normal, with_dropout_seed, with_example_dropout,
};
pub use nets::{
    AuxHead, AuxHeadConfig, Cifar10Config, Cifar10Net, ClassifierLoss, ImageClassifier, InceptionA,
    InceptionAConfig, InceptionB, InceptionBConfig, InceptionC, InceptionCConfig, InceptionD,
    InceptionDConfig, InceptionE, InceptionEConfig, InceptionV3, InceptionV3Config,
};
pub use nets::{
    BasicBlock, Bottleneck, Downsample, DownsampleConfig, PreActBottleneck, PreActBottleneckConfig,
    ResNet, ResNet18, ResNet50, ResNetConfig, ResNetLayout, ResNetV2, ResNetV2Config,
    ResidualBlock,
};
pub use nets::{
    ConvBn, ConvBnConfig, InvertedResidual, InvertedResidualConfig, MobileNetLayout, MobileNetV2,
    MobileNetV2Config, MobileNetV3, MobileNetV3Block, MobileNetV3BlockConfig, MobileNetV3Config,
    MobileNetV3Variant,
};
pub use nets::{
    EfficientNet, EfficientNetConfig, EfficientNetLayout, InputNormalization,
    InputNormalizationConfig, MbConv, MbConvConfig, SqueezeExcitation, SqueezeExcitationConfig,
    SqueezeGate,
};
pub use parameter_table::{ParameterRow, parameter_table};
pub use params::{
    ParamCounts, TrainedParam, WeightDecay, count_params, frozen_params, is_moving_statistic,
    trained_params, weight_decays,
};
pub use penalty::l2_penalty;
