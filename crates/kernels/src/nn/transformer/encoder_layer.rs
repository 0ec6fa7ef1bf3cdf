//! [`TransformerEncoderLayer`]: one layer of Burn's transformer encoder (self-attention and a
//! feed-forward network, each with a layer norm and a residual connection) of drop-in layers.

use burn::module::Module;
use burn::nn::Dropout;
use burn::tensor::{Bool, Tensor};

use super::PositionWiseFeedForward;
use super::residual::{Residual, norms_in_order};
use crate::nn::attention::{AttentionMasks, MhaInput, MultiHeadAttention};
use crate::nn::layer_norm::LayerNorm;

/// Burn's [`burn::nn::transformer::TransformerEncoderLayer`], field for field (a record saved
/// from either loads into the other), of this crate's attention, feed-forward network and
/// layer norms. Not a wrapper of Burn's: Burn keeps its layer norms' epsilon private.
#[derive(Module, Debug)]
pub struct TransformerEncoderLayer {
    /// Multi-head self-attention.
    pub mha: MultiHeadAttention,
    /// The position-wise feed-forward network.
    pub pwff: PositionWiseFeedForward,
    /// The layer norm around the feed-forward network.
    pub norm_1: LayerNorm,
    /// The layer norm around the attention.
    pub norm_2: LayerNorm,
    /// Dropout on each residual branch.
    pub dropout: Dropout,
    /// Layer norms before each branch (pre-norm) rather than after each sum (post-norm).
    pub norm_first: bool,
}

impl TransformerEncoderLayer {
    /// `input` `[batch, seq, d_model]` through the attention and the feed-forward network, as
    /// Burn's `TransformerEncoderLayer::forward`.
    pub fn forward(
        &self,
        input: Tensor<3>,
        mask_pad: Option<Tensor<2, Bool>>,
        mask_attn: Option<Tensor<3, Bool>>,
    ) -> Tensor<3> {
        let residual = Residual {
            dropout: &self.dropout,
            norm_first: self.norm_first,
        };
        let [attention_norm, feed_forward_norm] =
            norms_in_order([&self.norm_1, &self.norm_2], self.norm_first);
        let x = residual.apply(input, attention_norm, |x| {
            let masks = AttentionMasks {
                pad: mask_pad,
                attn: mask_attn,
            };
            let attention = MhaInput::self_attn(x).with_masks(masks);
            self.mha.context(attention)
        });
        residual.apply(x, feed_forward_norm, |x| self.pwff.forward(x))
    }
}

impl From<TransformerEncoderLayer> for burn::nn::transformer::TransformerEncoderLayer {
    fn from(layer: TransformerEncoderLayer) -> Self {
        Self {
            mha: layer.mha.into(),
            pwff: layer.pwff.into(),
            norm_1: layer.norm_1.into(),
            norm_2: layer.norm_2.into(),
            dropout: layer.dropout,
            norm_first: layer.norm_first,
        }
    }
}
