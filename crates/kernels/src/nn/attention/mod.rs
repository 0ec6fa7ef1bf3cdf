//! Burn's `burn::nn::attention`, with [`MultiHeadAttention`] on burn-towers' dense layers and
//! softmax (`mha.rs`, with its config and [`MhaInput`]). Burn's `CrossAttention` is not among
//! them: its fields are Burn's own, so no drop-in can read its parameters.

mod mha;

pub use burn::nn::attention::*;
pub(crate) use mha::{AttentionMasks, assert_heads_divide};
pub use mha::{MhaInput, MultiHeadAttention, MultiHeadAttentionConfig};
