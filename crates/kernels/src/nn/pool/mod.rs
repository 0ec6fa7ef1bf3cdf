//! Burn's `burn::nn::pool`, with [`MaxPool2d`] and [`AvgPool2d`] on burn-towers' kernels.

mod avg_pool2d;
mod max_pool2d;

pub use avg_pool2d::{AvgPool2d, AvgPool2dConfig};
pub use burn::nn::pool::*;
pub use max_pool2d::{MaxPool2d, MaxPool2dConfig};
