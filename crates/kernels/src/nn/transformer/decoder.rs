//! [`TransformerDecoder`], its config and [`TransformerDecoderInput`]: Burn's transformer
//! decoder, a stack of drop-in [`TransformerDecoderLayer`]s.

use burn::config::Config;
use burn::module::Module;
use burn::nn::Initializer;
use burn::nn::activation::ActivationConfig;
use burn::tensor::{Bool, Device, Tensor};

use super::display::displayed_as_burns;
use super::{PositionWiseFeedForward, TransformerDecoderLayer};
use crate::nn::attention::{AttentionMasks, MultiHeadAttention, assert_heads_divide};
use crate::nn::layer_norm::LayerNormConfig;

/// [`burn::nn::transformer::TransformerDecoderConfig`], field for field (a config saved from
/// either loads as the other), whose [`init`](Self::init) makes this crate's
/// [`TransformerDecoder`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct TransformerDecoderConfig {
    /// The size of the model.
    pub d_model: usize,
    /// The size of the feed-forward networks' hidden features.
    pub d_ff: usize,
    /// The number of attention heads.
    pub n_heads: usize,
    /// The number of layers.
    pub n_layers: usize,
    /// The dropout rate (attention weights, feed-forward networks, residual branches).
    #[config(default = 0.1)]
    pub dropout: f64,
    /// Layer norms before each branch (pre-norm) rather than after each sum (post-norm).
    #[config(default = false)]
    pub norm_first: bool,
    /// Burn's "quiet softmax" in the attention, `e^x / (1 + Σ e^x)`.
    #[config(default = false)]
    pub quiet_softmax: bool,
    /// The function that initializes the parameters (Burn's default).
    #[config(default = "Initializer::KaimingUniform{gain:1.0/3.0f64.sqrt(),fan_out_only:false}")]
    pub initializer: Initializer,
    /// The activation of the feed-forward networks.
    #[config(default = "ActivationConfig::Gelu")]
    pub activation: ActivationConfig,
    /// The layer norms' epsilon.
    #[config(default = 1e-5)]
    pub layer_norm_eps: f64,
}

impl TransformerDecoderConfig {
    /// A new [`TransformerDecoder`], initialized as Burn's `TransformerDecoderConfig::init`
    /// initializes it (the same draws, in the same order).
    ///
    /// # Panics
    ///
    /// If `d_model` is not a multiple of `n_heads`.
    pub fn init(&self, device: &Device) -> TransformerDecoder {
        assert_heads_divide(self.d_model, self.n_heads);
        let burns = burn::nn::transformer::TransformerDecoderConfig::from(self).init(device);
        let norm = LayerNormConfig::new(self.d_model).with_epsilon(self.layer_norm_eps);
        let layers = (burns.layers.into_iter())
            .map(|layer| TransformerDecoderLayer {
                cross_attn: MultiHeadAttention::from(layer.cross_attn),
                self_attn: MultiHeadAttention::from(layer.self_attn),
                pwff: PositionWiseFeedForward::from(layer.pwff),
                // Ones and zeros, as Burn's: its layer norms drew nothing.
                norm_1: norm.init(device),
                norm_2: norm.init(device),
                norm_3: norm.init(device),
                dropout: layer.dropout,
                norm_first: layer.norm_first,
            })
            .collect();
        TransformerDecoder {
            layers,
            d_model: self.d_model,
            d_ff: self.d_ff,
            n_heads: self.n_heads,
            n_layers: self.n_layers,
            dropout: self.dropout,
            norm_first: self.norm_first,
            quiet_softmax: self.quiet_softmax,
        }
    }
}

impl From<&TransformerDecoderConfig> for burn::nn::transformer::TransformerDecoderConfig {
    fn from(config: &TransformerDecoderConfig) -> Self {
        Self {
            d_model: config.d_model,
            d_ff: config.d_ff,
            n_heads: config.n_heads,
            n_layers: config.n_layers,
            dropout: config.dropout,
            norm_first: config.norm_first,
            quiet_softmax: config.quiet_softmax,
            initializer: config.initializer.clone(),
            activation: config.activation.clone(),
            layer_norm_eps: config.layer_norm_eps,
        }
    }
}

/// Burn's [`burn::nn::transformer::TransformerDecoder`], field for field (a record saved from
/// either loads into the other), of drop-in layers. [`From`] makes Burn's decoder of it, for
/// Burn's `forward_autoregressive_inference` (decoding with a cache, on Burn's ops).
#[derive(Module, Debug)]
#[module(custom_display)]
pub struct TransformerDecoder {
    /// The layers.
    pub layers: Vec<TransformerDecoderLayer>,
    /// The size of the model.
    pub d_model: usize,
    /// The size of the feed-forward networks' hidden features.
    pub d_ff: usize,
    /// The number of attention heads.
    pub n_heads: usize,
    /// The number of layers.
    pub n_layers: usize,
    /// The dropout rate.
    pub dropout: f64,
    /// Layer norms before each branch (pre-norm) rather than after each sum (post-norm).
    pub norm_first: bool,
    /// Burn's "quiet softmax" in the attention.
    pub quiet_softmax: bool,
}

impl TransformerDecoder {
    /// The target `[batch, seq, d_model]` through every layer, attending to the memory, as
    /// Burn's `TransformerDecoder::forward`.
    pub fn forward(&self, mut input: TransformerDecoderInput) -> Tensor<3> {
        for layer in &self.layers {
            input = layer.forward(input);
        }
        input.target
    }
}

impl From<TransformerDecoder> for burn::nn::transformer::TransformerDecoder {
    fn from(decoder: TransformerDecoder) -> Self {
        Self {
            layers: decoder.layers.into_iter().map(Into::into).collect(),
            d_model: decoder.d_model,
            d_ff: decoder.d_ff,
            n_heads: decoder.n_heads,
            n_layers: decoder.n_layers,
            dropout: decoder.dropout,
            norm_first: decoder.norm_first,
            quiet_softmax: decoder.quiet_softmax,
        }
    }
}

displayed_as_burns!(TransformerDecoder);

/// [`burn::nn::transformer::TransformerDecoderInput`] (whose fields Burn keeps to itself): the
/// target `[batch, seq, d_model]`, the encoder's memory `[batch, seq_memory, d_model]` and their
/// masks, made and given as Burn's are.
#[derive(Debug, Clone)]
pub struct TransformerDecoderInput {
    pub(super) target: Tensor<3>,
    pub(super) target_masks: AttentionMasks,
    pub(super) memory: Tensor<3>,
    pub(super) memory_masks: AttentionMasks,
}

impl TransformerDecoderInput {
    /// The target attending to the memory, without masks.
    pub fn new(target: Tensor<3>, memory: Tensor<3>) -> Self {
        Self {
            target,
            target_masks: AttentionMasks::default(),
            memory,
            memory_masks: AttentionMasks::default(),
        }
    }

    /// With the memory's padding mask `[batch, seq_memory]` (`true`: padding).
    pub fn memory_mask_pad(mut self, mask_pad: Tensor<2, Bool>) -> Self {
        self.memory_masks.pad = Some(mask_pad);
        self
    }

    /// With the memory's attention mask `[batch, seq, seq_memory]` (`true`: a place of the
    /// memory a target place may not attend to).
    pub fn memory_mask_attn(mut self, mask_attn: Tensor<3, Bool>) -> Self {
        self.memory_masks.attn = Some(mask_attn);
        self
    }

    /// With the target's padding mask `[batch, seq]` (`true`: padding).
    pub fn target_mask_pad(mut self, mask_pad: Tensor<2, Bool>) -> Self {
        self.target_masks.pad = Some(mask_pad);
        self
    }

    /// With the target's attention mask `[batch, seq, seq]` (`true`: a place its query may not
    /// attend to; `generate_autoregressive_mask` for a causal decoder).
    pub fn target_mask_attn(mut self, mask_attn: Tensor<3, Bool>) -> Self {
        self.target_masks.attn = Some(mask_attn);
        self
    }
}

impl From<TransformerDecoderInput> for burn::nn::transformer::TransformerDecoderInput {
    fn from(input: TransformerDecoderInput) -> Self {
        let burns = Self::new(input.target, input.memory);
        let burns =
            (input.target_masks).set_on(burns, Self::target_mask_pad, Self::target_mask_attn);
        (input.memory_masks).set_on(burns, Self::memory_mask_pad, Self::memory_mask_attn)
    }
}
