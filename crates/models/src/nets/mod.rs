//! The networks, built of `layers/`: the CIFAR-10 tutorial net ([`Cifar10Net`]) and
//! Inception v3 ([`InceptionV3`], `inception/`), both behind [`ImageClassifier`]
//! (`classifier.rs`), the trait the trainer and the towers code against.

mod cifar10;
mod classifier;
mod inception;

pub use cifar10::{Cifar10Config, Cifar10Net};
pub use classifier::{ClassifierLoss, ImageClassifier};
pub use inception::{
    AuxHead, AuxHeadConfig, InceptionA, InceptionAConfig, InceptionB, InceptionBConfig, InceptionC,
    InceptionCConfig, InceptionD, InceptionDConfig, InceptionE, InceptionEConfig, InceptionV3,
    InceptionV3Config,
};
