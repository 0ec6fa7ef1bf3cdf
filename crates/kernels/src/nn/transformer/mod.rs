//! Burn's `burn::nn::transformer`, with the encoder on the drop-in layers: [`TransformerEncoder`]
//! (`encoder.rs`, with its config and input), [`TransformerEncoderLayer`] (`encoder_layer.rs`)
//! and [`PositionWiseFeedForward`] (`pwff.rs`). Burn's decoder is not among them yet (its
//! layers' cross-attention and caches are Burn's).

mod encoder;
mod encoder_layer;
mod pwff;

pub use burn::nn::transformer::*;
pub use encoder::{TransformerEncoder, TransformerEncoderConfig, TransformerEncoderInput};
pub use encoder_layer::TransformerEncoderLayer;
pub use pwff::{PositionWiseFeedForward, PositionWiseFeedForwardConfig};
