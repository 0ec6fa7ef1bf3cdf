//! Burn's `burn::nn::pool`, every pooling layer on burn-towers' kernels where they apply: max
//! and average pooling in 1D and 2D, adaptive average pooling in 1D, 2D and 3D.

mod adaptive_avg_pool1d;
mod adaptive_avg_pool2d;
mod adaptive_avg_pool3d;
mod avg_pool1d;
mod avg_pool2d;
mod max_pool1d;
mod max_pool2d;

pub use adaptive_avg_pool1d::{AdaptiveAvgPool1d, AdaptiveAvgPool1dConfig};
pub use adaptive_avg_pool2d::{AdaptiveAvgPool2d, AdaptiveAvgPool2dConfig};
pub use adaptive_avg_pool3d::{AdaptiveAvgPool3d, AdaptiveAvgPool3dConfig};
pub use avg_pool1d::{AvgPool1d, AvgPool1dConfig};
pub use avg_pool2d::{AvgPool2d, AvgPool2dConfig};
pub use max_pool1d::{MaxPool1d, MaxPool1dConfig};
pub use max_pool2d::{MaxPool2d, MaxPool2dConfig};
