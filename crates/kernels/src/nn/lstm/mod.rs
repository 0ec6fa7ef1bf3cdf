//! Burn's `burn::nn::lstm`, with [`Lstm`] computed by [`crate::lstm`] (`layer.rs`, with its
//! config) and [`BiLstm`] by [`crate::bi_lstm`] (`bi_lstm.rs`). Its `LstmState` is Burn's.

mod bi_lstm;
mod layer;

pub use bi_lstm::{BiLstm, BiLstmConfig};
pub use burn::nn::lstm::*;
pub use layer::{Lstm, LstmConfig};
