//! [`TransformerDecoderLayer`]: one layer of Burn's transformer decoder (self-attention,
//! attention to the encoder's memory and a feed-forward network, each a residual sub-layer with
//! a layer norm) of drop-in layers.

use burn::module::Module;
use burn::nn::Dropout;

use super::residual::{Residual, norms_in_order};
use super::{PositionWiseFeedForward, TransformerDecoderInput};
use crate::nn::attention::{MhaInput, MultiHeadAttention};
use crate::nn::layer_norm::LayerNorm;

/// Burn's [`burn::nn::transformer::TransformerDecoderLayer`], field for field (a record saved
/// from either loads into the other), of this crate's attention, feed-forward network and
/// layer norms. Not a wrapper of Burn's: Burn keeps its layer norms' epsilon private.
#[derive(Module, Debug)]
pub struct TransformerDecoderLayer {
    /// Attention of the target to the memory.
    pub cross_attn: MultiHeadAttention,
    /// Self-attention of the target.
    pub self_attn: MultiHeadAttention,
    /// The position-wise feed-forward network.
    pub pwff: PositionWiseFeedForward,
    /// The first layer norm (after the self-attention in post-norm).
    pub norm_1: LayerNorm,
    /// The second layer norm (after the cross-attention in post-norm).
    pub norm_2: LayerNorm,
    /// The third layer norm (after the feed-forward network in post-norm).
    pub norm_3: LayerNorm,
    /// Dropout on each residual branch.
    pub dropout: Dropout,
    /// Layer norms before each branch (pre-norm) rather than after each sum (post-norm).
    pub norm_first: bool,
}

impl TransformerDecoderLayer {
    /// The input with its target `[batch, seq, d_model]` through the self-attention, the
    /// attention to the memory and the feed-forward network, as Burn's
    /// `TransformerDecoderLayer::forward`.
    pub fn forward(&self, mut input: TransformerDecoderInput) -> TransformerDecoderInput {
        let residual = Residual {
            dropout: &self.dropout,
            norm_first: self.norm_first,
        };
        let norms = [&self.norm_1, &self.norm_2, &self.norm_3];
        let [self_norm, cross_norm, feed_forward_norm] = norms_in_order(norms, self.norm_first);
        let x = residual.apply(input.target.clone(), self_norm, |x| {
            let attention = MhaInput::self_attn(x).with_masks(input.target_masks.clone());
            self.self_attn.context(attention)
        });
        let x = residual.apply(x, cross_norm, |x| {
            let memory = &input.memory;
            let attention = MhaInput::new(x, memory.clone(), memory.clone());
            let attention = attention.with_masks(input.memory_masks.clone());
            self.cross_attn.context(attention)
        });
        input.target = residual.apply(x, feed_forward_norm, |x| self.pwff.forward(x));
        input
    }
}

impl From<TransformerDecoderLayer> for burn::nn::transformer::TransformerDecoderLayer {
    fn from(layer: TransformerDecoderLayer) -> Self {
        Self {
            cross_attn: layer.cross_attn.into(),
            self_attn: layer.self_attn.into(),
            pwff: layer.pwff.into(),
            norm_1: layer.norm_1.into(),
            norm_2: layer.norm_2.into(),
            norm_3: layer.norm_3.into(),
            dropout: layer.dropout,
            norm_first: layer.norm_first,
        }
    }
}
