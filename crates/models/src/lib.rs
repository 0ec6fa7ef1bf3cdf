//! The image models of burn-towers, layer for layer as TensorFlow users know them:
//! the CIFAR-10 tutorial network and Inception v3 (TF-slim layout), behind one
//! [`ImageClassifier`] trait that the trainer and the towers code against.
//!
//! The crate's folders, bottom up: `kernels/` (how each op is computed: burn-towers' flex
//! kernels or Burn's, and in what precision), `layers/` (TF-slim's layers on those kernels),
//! `nets/` (the CIFAR-10 net and Inception v3), and [`weights`] (restoring TF and PyTorch
//! checkpoints into the nets). Beside them, `params.rs` counts parameters and collects weight
//! decay, and `parameter_table.rs` prints a net's parameters layer by layer. The public items
//! of `kernels/`, `layers/` and `nets/` are re-exported here, their one path.

mod kernels;
mod layers;
mod nets;
mod parameter_table;
mod params;
#[cfg(test)]
mod test_util;
pub mod weights;

pub use kernels::{
    AdamStep, Bf16Kernel, MomentumStep, Precision, RmsPropStep, SgdStep, SgdTensors, avg_pool2d,
    bf16_kernel, bf16_on_amx, conv_images, conv2d, conv2d_relu, current_precision, fused_adam,
    fused_rmsprop, fused_sgd, linear, max_pool2d, with_precision,
};
pub use layers::{
    BasicConv, BasicConvConfig, Lrn, LrnConfig, OffsetBatchNorm, OffsetBatchNormConfig, dropout,
    truncated_normal, with_dropout_seed, with_example_dropout,
};
pub use nets::{
    AuxHead, AuxHeadConfig, Cifar10Config, Cifar10Net, ClassifierLoss, ImageClassifier, InceptionA,
    InceptionAConfig, InceptionB, InceptionBConfig, InceptionC, InceptionCConfig, InceptionD,
    InceptionDConfig, InceptionE, InceptionEConfig, InceptionV3, InceptionV3Config,
};
pub use parameter_table::{ParameterRow, parameter_table};
pub use params::{ParamCounts, WeightDecay, count_params, l2_penalty, weight_decays};
