//! [`Gru`] and [`GruConfig`]: Burn's GRU layer, computed by [`crate::gru`].

use burn::config::Config;
use burn::nn::Initializer;
use burn::nn::activation::ActivationConfig;
use burn::tensor::{Device, Tensor};

use crate::dispatch::gru;
use crate::nn::wrapped::wrapped_module;

/// [`burn::nn::GruConfig`], field for field (a config saved from either loads as the other),
/// whose [`init`](Self::init) makes this crate's [`Gru`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct GruConfig {
    /// The size of the input features.
    pub d_input: usize,
    /// The size of the hidden state.
    pub d_hidden: usize,
    /// Whether the gates' dense layers have biases.
    pub bias: bool,
    /// Whether the reset gate multiplies the hidden state's product (PyTorch's GRU) rather than
    /// the hidden state before it.
    #[config(default = "true")]
    pub reset_after: bool,
    /// How the weights are initialized.
    #[config(default = "Initializer::XavierNormal{gain:1.0}")]
    pub initializer: Initializer,
    /// The update and reset gates' activation.
    #[config(default = "ActivationConfig::Sigmoid")]
    pub gate_activation: ActivationConfig,
    /// The new gate's activation.
    #[config(default = "ActivationConfig::Tanh")]
    pub hidden_activation: ActivationConfig,
    /// The bound the hidden state is clipped to after each step, if any.
    pub clip: Option<f64>,
}

impl GruConfig {
    /// A new [`Gru`], initialized as Burn's `GruConfig::init` initializes it.
    pub fn init(&self, device: &Device) -> Gru {
        Gru::from(burn::nn::GruConfig::from(self).init(device))
    }
}

impl From<&GruConfig> for burn::nn::GruConfig {
    fn from(config: &GruConfig) -> Self {
        Self {
            d_input: config.d_input,
            d_hidden: config.d_hidden,
            bias: config.bias,
            reset_after: config.reset_after,
            initializer: config.initializer.clone(),
            gate_activation: config.gate_activation.clone(),
            hidden_activation: config.hidden_activation.clone(),
            clip: config.clip,
        }
    }
}

/// Burn's [`burn::nn::Gru`] (the same parameters, names and records; its gates and settings
/// read through `Deref`), whose [`forward`](Self::forward) runs its recurrence as one op on
/// flex, for a GRU with PyTorch's gates (Burn's defaults).
#[derive(Clone, Debug)]
pub struct Gru {
    inner: burn::nn::Gru,
}

wrapped_module!(Gru, burn::nn::Gru);

impl Gru {
    /// The hidden state of every step of `batched_input` (`[batch, steps, features]`) from
    /// `state` (zeros if none), as Burn's `Gru::forward`.
    pub fn forward(&self, batched_input: Tensor<3>, state: Option<Tensor<2>>) -> Tensor<3> {
        gru(&self.inner, batched_input, state)
    }
}
