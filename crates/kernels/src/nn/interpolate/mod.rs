//! Burn's `burn::nn::interpolate`, with [`Interpolate2d`] and [`Interpolate1d`] resizing
//! bilinearly ([`InterpolateMode::Linear`]) on burn-towers' kernel ([`crate::interpolate`]).

mod interpolate1d;
mod interpolate2d;

pub use burn::nn::interpolate::*;
pub use interpolate1d::{Interpolate1d, Interpolate1dConfig};
pub use interpolate2d::{Interpolate2d, Interpolate2dConfig};
