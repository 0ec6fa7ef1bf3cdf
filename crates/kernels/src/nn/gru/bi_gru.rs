//! [`BiGru`] and [`BiGruConfig`]: Burn's bidirectional GRU layer, computed by
//! [`crate::bi_gru`].

use burn::config::Config;
use burn::nn::Initializer;
use burn::nn::activation::ActivationConfig;
use burn::tensor::{Device, Tensor};

use crate::dispatch::bi_gru;
use crate::nn::wrapped::wrapped_module;

/// [`burn::nn::BiGruConfig`], field for field (a config saved from either loads as the
/// other), whose [`init`](Self::init) makes this crate's [`BiGru`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct BiGruConfig {
    /// The size of the input features.
    pub d_input: usize,
    /// The size of each direction's hidden state.
    pub d_hidden: usize,
    /// Whether the gates' dense layers have biases.
    pub bias: bool,
    /// Whether the reset gates multiply the hidden states' products (PyTorch's GRU).
    #[config(default = "true")]
    pub reset_after: bool,
    /// How the weights are initialized.
    #[config(default = "Initializer::XavierNormal{gain:1.0}")]
    pub initializer: Initializer,
    /// Whether the input is `[batch, steps, features]` (else `[steps, batch, features]`).
    #[config(default = true)]
    pub batch_first: bool,
    /// The update and reset gates' activation.
    #[config(default = "ActivationConfig::Sigmoid")]
    pub gate_activation: ActivationConfig,
    /// The new gates' activation.
    #[config(default = "ActivationConfig::Tanh")]
    pub hidden_activation: ActivationConfig,
    /// The bound the hidden states are clipped to after each step, if any.
    pub clip: Option<f64>,
}

impl BiGruConfig {
    /// A new [`BiGru`], initialized as Burn's `BiGruConfig::init` initializes it.
    pub fn init(&self, device: &Device) -> BiGru {
        BiGru::from(burn::nn::BiGruConfig::from(self).init(device))
    }
}

impl From<&BiGruConfig> for burn::nn::BiGruConfig {
    fn from(config: &BiGruConfig) -> Self {
        Self {
            d_input: config.d_input,
            d_hidden: config.d_hidden,
            bias: config.bias,
            reset_after: config.reset_after,
            initializer: config.initializer.clone(),
            batch_first: config.batch_first,
            gate_activation: config.gate_activation.clone(),
            hidden_activation: config.hidden_activation.clone(),
            clip: config.clip,
        }
    }
}

/// Burn's [`burn::nn::BiGru`] (the same parameters, names and records; its two GRUs read
/// through `Deref`), whose [`forward`](Self::forward) runs each direction's recurrence as one
/// op on flex, for GRUs with PyTorch's gates (Burn's defaults).
#[derive(Clone, Debug)]
pub struct BiGru {
    inner: burn::nn::BiGru,
}

wrapped_module!(BiGru, burn::nn::BiGru);

impl BiGru {
    /// Both directions' hidden states of every step side by side (`2 · d_hidden` features)
    /// and their last hidden states stacked (forward, then reverse), from `state` (`[2, batch,
    /// d_hidden]`; zeros if none), as Burn's `BiGru::forward`.
    pub fn forward(
        &self,
        batched_input: Tensor<3>,
        state: Option<Tensor<3>>,
    ) -> (Tensor<3>, Tensor<3>) {
        bi_gru(&self.inner, batched_input, state)
    }
}
