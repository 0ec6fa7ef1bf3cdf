//! Burn's `burn::nn::lstm`, with [`Lstm`] computed by [`crate::lstm`] (`layer.rs`, with its
//! config). Its `LstmState` and the rest are Burn's.

mod layer;

pub use burn::nn::lstm::*;
pub use layer::{Lstm, LstmConfig};
