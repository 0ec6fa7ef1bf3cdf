//! The image models of burn-towers, layer for layer as TensorFlow users know them:
//! the CIFAR-10 tutorial network and Inception v3 (TF-slim layout), behind one
//! [`ImageClassifier`] trait that the trainer and the towers code against.

mod basic_conv;
mod batch_norm;
mod cifar10;
mod classifier;
mod dropout;
mod fast_ops;
#[cfg(feature = "flex")]
mod flex;
mod image_conv;
mod inception;
mod init;
mod lrn;
mod padding;
mod params;
mod precision;
mod summary;
#[cfg(test)]
mod test_util;
pub mod weights;

pub use basic_conv::{BasicConv, BasicConvConfig};
pub use batch_norm::{OffsetBatchNorm, OffsetBatchNormConfig};
pub use cifar10::{Cifar10Config, Cifar10Net};
pub use classifier::{ClassifierLoss, ImageClassifier};
pub use dropout::{dropout, with_dropout_seed, with_example_dropout};
pub use fast_ops::{avg_pool2d, conv2d, conv2d_relu, linear, max_pool2d};
pub use image_conv::conv_images;
pub use inception::{
    AuxHead, AuxHeadConfig, InceptionA, InceptionAConfig, InceptionB, InceptionBConfig, InceptionC,
    InceptionCConfig, InceptionD, InceptionDConfig, InceptionE, InceptionEConfig, InceptionV3,
    InceptionV3Config,
};
pub use init::truncated_normal;
pub use lrn::{Lrn, LrnConfig};
pub use params::{ParamCounts, WeightDecay, count_params, l2_penalty, weight_decays};
pub use precision::{
    Bf16Kernel, Precision, bf16_kernel, bf16_on_amx, current_precision, with_precision,
};
pub use summary::{SummaryRow, summary_table};
