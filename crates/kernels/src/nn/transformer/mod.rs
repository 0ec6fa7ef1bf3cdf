//! Burn's `burn::nn::transformer` on the drop-in layers: [`TransformerEncoder`] and
//! [`TransformerDecoder`] (`encoder.rs`, `decoder.rs`, with their configs and inputs), their
//! layers (`encoder_layer.rs`, `decoder_layer.rs`), each a stack of residual sub-layers wrapped
//! alike (`residual.rs`), and [`PositionWiseFeedForward`] (`pwff.rs`); the stacks display as
//! Burn's (`display.rs`).

mod decoder;
mod decoder_layer;
mod display;
mod encoder;
mod encoder_layer;
mod pwff;
mod residual;

pub use burn::nn::transformer::*;
pub use decoder::{TransformerDecoder, TransformerDecoderConfig, TransformerDecoderInput};
pub use decoder_layer::TransformerDecoderLayer;
pub use encoder::{TransformerEncoder, TransformerEncoderConfig, TransformerEncoderInput};
pub use encoder_layer::TransformerEncoderLayer;
pub use pwff::{PositionWiseFeedForward, PositionWiseFeedForwardConfig};
