//! Drop-in layers: Burn's `burn::nn`, whose convolutions (1D, 2D, 3D, 1D and 2D transposed),
//! pooling, batch, group, instance, layer and RMS norms, dense layers, dropout, bilinear
//! resizing, rotary position encoding, LSTMs and GRUs, multi-head attention, transformers and
//! some activations run on burn-towers' kernels, and whose cross-entropy loss has its own
//! backward pass.
//! Changing `use burn::nn::...` to `use towers_kernels::nn::...` is all a model needs: the
//! same names, `Config`s (field for field), parameters and records (saved from either, loaded
//! into the other), the same outputs and gradients on every backend (Burn's ops wherever the
//! kernels do not apply), products in the thread's [`Precision`](crate::Precision). Every other
//! layer is Burn's own, re-exported.
//!
//! - `conv/`: [`conv::Conv1d`], [`conv::Conv2d`], [`conv::Conv3d`], [`conv::ConvTranspose1d`],
//!   [`conv::ConvTranspose2d`] (the rest of `burn::nn::conv` re-exported).
//! - `pool/`: [`pool::MaxPool2d`], [`pool::AvgPool2d`], [`pool::MaxPool1d`],
//!   [`pool::AvgPool1d`], [`pool::AdaptiveAvgPool1d`], [`pool::AdaptiveAvgPool2d`],
//!   [`pool::AdaptiveAvgPool3d`]: every layer of `burn::nn::pool`.
//! - `linear.rs`: [`Linear`]; `batch_norm.rs`: [`BatchNorm`]; `group_norm.rs`: [`GroupNorm`];
//!   `instance_norm.rs`: [`InstanceNorm`] (on the group norm's kernel); `layer_norm.rs`:
//!   [`LayerNorm`] (Burn's fields, not a wrapper: see there); `rms_norm.rs`: [`RmsNorm`].
//! - `dropout.rs`: [`Dropout`]; `rotary_encoding.rs`: [`RotaryEncoding`].
//! - `interpolate/`: [`interpolate::Interpolate2d`], [`interpolate::Interpolate1d`] (the rest
//!   of `burn::nn::interpolate`).
//! - `gru/`: [`Gru`], [`BiGru`] (also at the root, as Burn's).
//! - `lstm/`: [`Lstm`], [`BiLstm`] (also at the root, as Burn's; the rest of `burn::nn::lstm`).
//! - `activation/`: [`Gelu`], [`Sigmoid`], [`Tanh`], [`LeakyRelu`], [`PRelu`], [`SwiGlu`] (also
//!   at the root, as Burn's), [`activation::SiLU`], [`activation::Relu6`], [`activation::HardSwish`],
//!   [`activation::Mish`] (the rest of `burn::nn::activation`).
//! - `attention/`: [`attention::MultiHeadAttention`] (the rest of `burn::nn::attention`).
//! - `transformer/`: [`transformer::TransformerEncoder`], [`transformer::TransformerDecoder`]
//!   and their layers (the rest of `burn::nn::transformer`).
//! - `loss/`: [`loss::CrossEntropyLoss`] (the rest of `burn::nn::loss` re-exported).
//! - `wrapped.rs`: Burn's `Module` for a layer that holds Burn's, handed every call.

pub mod activation;
pub mod attention;
mod batch_norm;
pub mod conv;
mod dropout;
mod group_norm;
pub mod gru;
mod instance_norm;
pub mod interpolate;
mod layer_norm;
mod linear;
pub mod loss;
pub mod lstm;
pub mod pool;
mod rms_norm;
mod rotary_encoding;
pub mod transformer;
mod wrapped;

pub use activation::{
    Gelu, LeakyRelu, LeakyReluConfig, PRelu, PReluConfig, Sigmoid, SwiGlu, SwiGluConfig, Tanh,
};
pub use batch_norm::{BatchNorm, BatchNormConfig};
pub use burn::nn::*;
pub use dropout::{Dropout, DropoutConfig};
pub use group_norm::{GroupNorm, GroupNormConfig};
pub use gru::{BiGru, BiGruConfig, Gru, GruConfig};
pub use instance_norm::{InstanceNorm, InstanceNormConfig};
pub use layer_norm::{LayerNorm, LayerNormConfig};
pub use linear::{Linear, LinearConfig};
pub use lstm::{BiLstm, BiLstmConfig, Lstm, LstmConfig};
pub use rms_norm::{RmsNorm, RmsNormConfig};
pub use rotary_encoding::{RotaryEncoding, RotaryEncodingConfig};
