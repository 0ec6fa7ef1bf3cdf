//! Burn's `burn::nn::conv`, with [`Conv2d`] on burn-towers' kernels.

mod conv2d;

pub use burn::nn::conv::*;
pub use conv2d::{Conv2d, Conv2dConfig};
