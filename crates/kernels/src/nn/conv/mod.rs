//! Burn's `burn::nn::conv`, with [`Conv1d`], [`Conv2d`], [`Conv3d`], [`ConvTranspose1d`] and
//! [`ConvTranspose2d`] on burn-towers' kernels.

mod conv1d;
mod conv2d;
mod conv3d;
mod conv_transpose1d;
mod conv_transpose2d;

pub use burn::nn::conv::*;
pub use conv_transpose1d::{ConvTranspose1d, ConvTranspose1dConfig};
pub use conv_transpose2d::{ConvTranspose2d, ConvTranspose2dConfig};
pub use conv1d::{Conv1d, Conv1dConfig};
pub use conv2d::{Conv2d, Conv2dConfig};
pub use conv3d::{Conv3d, Conv3dConfig};
