//! Burn's `burn::nn::loss`, with [`CrossEntropyLoss`] on [`crate::softmax_cross_entropy`].

mod cross_entropy;

pub use burn::nn::loss::*;
pub use cross_entropy::{CrossEntropyLoss, CrossEntropyLossConfig};
