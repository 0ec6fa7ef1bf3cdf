//! [`TransformerEncoder`], its config and [`TransformerEncoderInput`]: Burn's transformer
//! encoder, a stack of drop-in [`TransformerEncoderLayer`]s.

use burn::config::Config;
use burn::module::Module;
use burn::nn::Initializer;
use burn::nn::activation::ActivationConfig;
use burn::tensor::{Bool, Device, Tensor};

use super::display::displayed_as_burns;
use super::{PositionWiseFeedForward, TransformerEncoderLayer};
use crate::nn::attention::{AttentionMasks, MultiHeadAttention, assert_heads_divide};
use crate::nn::layer_norm::LayerNormConfig;

/// [`burn::nn::transformer::TransformerEncoderConfig`], field for field (a config saved from
/// either loads as the other), whose [`init`](Self::init) makes this crate's
/// [`TransformerEncoder`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct TransformerEncoderConfig {
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

impl TransformerEncoderConfig {
    /// A new [`TransformerEncoder`], initialized as Burn's `TransformerEncoderConfig::init`
    /// initializes it (the same draws, in the same order).
    ///
    /// # Panics
    ///
    /// If `d_model` is not a multiple of `n_heads`.
    pub fn init(&self, device: &Device) -> TransformerEncoder {
        assert_heads_divide(self.d_model, self.n_heads);
        let burns = burn::nn::transformer::TransformerEncoderConfig::from(self).init(device);
        let norm = LayerNormConfig::new(self.d_model).with_epsilon(self.layer_norm_eps);
        let layers = (burns.layers.into_iter())
            .map(|layer| TransformerEncoderLayer {
                mha: MultiHeadAttention::from(layer.mha),
                pwff: PositionWiseFeedForward::from(layer.pwff),
                // Ones and zeros, as Burn's: its layer norms drew nothing.
                norm_1: norm.init(device),
                norm_2: norm.init(device),
                dropout: layer.dropout,
                norm_first: layer.norm_first,
            })
            .collect();
        TransformerEncoder {
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

impl From<&TransformerEncoderConfig> for burn::nn::transformer::TransformerEncoderConfig {
    fn from(config: &TransformerEncoderConfig) -> Self {
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

/// Burn's [`burn::nn::transformer::TransformerEncoder`], field for field (a record saved from
/// either loads into the other), of drop-in layers. [`From`] makes Burn's encoder of it, for
/// Burn's `forward_autoregressive_inference` (decoding with a cache, on Burn's ops).
#[derive(Module, Debug)]
#[module(custom_display)]
pub struct TransformerEncoder {
    /// The layers.
    pub layers: Vec<TransformerEncoderLayer>,
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

impl TransformerEncoder {
    /// `[batch, seq, d_model]` through every layer, as Burn's `TransformerEncoder::forward`.
    pub fn forward(&self, input: TransformerEncoderInput) -> Tensor<3> {
        let (masks, mut x) = (input.masks, input.tensor);
        for layer in &self.layers {
            x = layer.forward(x, masks.pad.clone(), masks.attn.clone());
        }
        x
    }
}

impl From<TransformerEncoder> for burn::nn::transformer::TransformerEncoder {
    fn from(encoder: TransformerEncoder) -> Self {
        Self {
            layers: encoder.layers.into_iter().map(Into::into).collect(),
            d_model: encoder.d_model,
            d_ff: encoder.d_ff,
            n_heads: encoder.n_heads,
            n_layers: encoder.n_layers,
            dropout: encoder.dropout,
            norm_first: encoder.norm_first,
            quiet_softmax: encoder.quiet_softmax,
        }
    }
}

displayed_as_burns!(TransformerEncoder);

/// [`burn::nn::transformer::TransformerEncoderInput`] (whose fields Burn keeps to itself): the
/// sequence `[batch, seq, d_model]` and its masks, made and given as Burn's are.
#[derive(Debug, Clone)]
pub struct TransformerEncoderInput {
    tensor: Tensor<3>,
    masks: AttentionMasks,
}

impl TransformerEncoderInput {
    /// The sequence `[batch, seq, d_model]`, without masks.
    pub fn new(tensor: Tensor<3>) -> Self {
        Self {
            tensor,
            masks: AttentionMasks::default(),
        }
    }

    /// With the padding mask `[batch, seq]` (`true`: padding, attended to by none).
    pub fn mask_pad(mut self, mask_pad: Tensor<2, Bool>) -> Self {
        self.masks.pad = Some(mask_pad);
        self
    }

    /// With the attention mask `[batch, seq, seq]` (`true`: a place its query may not attend
    /// to).
    pub fn mask_attn(mut self, mask_attn: Tensor<3, Bool>) -> Self {
        self.masks.attn = Some(mask_attn);
        self
    }
}

impl From<TransformerEncoderInput> for burn::nn::transformer::TransformerEncoderInput {
    fn from(input: TransformerEncoderInput) -> Self {
        let burns = Self::new(input.tensor);
        input.masks.set_on(burns, Self::mask_pad, Self::mask_attn)
    }
}
