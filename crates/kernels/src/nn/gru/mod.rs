//! Burn's `burn::nn::gru`, whose every name is a drop-in here: [`Gru`] computed by
//! [`crate::gru`] (`layer.rs`, with its config) and [`BiGru`] by [`crate::bi_gru`]
//! (`bi_gru.rs`).

mod bi_gru;
mod layer;

pub use bi_gru::{BiGru, BiGruConfig};
pub use layer::{Gru, GruConfig};
