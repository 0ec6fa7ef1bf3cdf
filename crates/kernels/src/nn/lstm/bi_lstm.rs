//! [`BiLstm`] and [`BiLstmConfig`]: Burn's bidirectional LSTM layer, computed by
//! [`crate::bi_lstm`].

use burn::config::Config;
use burn::nn::activation::ActivationConfig;
use burn::nn::{Initializer, LstmState};
use burn::tensor::{Device, Tensor};

use crate::dispatch::bi_lstm;
use crate::nn::wrapped::wrapped_module;

/// [`burn::nn::BiLstmConfig`], field for field (a config saved from either loads as the
/// other), whose [`init`](Self::init) makes this crate's [`BiLstm`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct BiLstmConfig {
    /// The size of the input features.
    pub d_input: usize,
    /// The size of each direction's hidden state.
    pub d_hidden: usize,
    /// Whether the gates' dense layers have biases.
    pub bias: bool,
    /// How the weights are initialized.
    #[config(default = "Initializer::XavierNormal{gain:1.0}")]
    pub initializer: Initializer,
    /// Whether the input is `[batch, steps, features]` (else `[steps, batch, features]`).
    #[config(default = true)]
    pub batch_first: bool,
    /// The bound the cells are clipped to after each step, if any.
    pub clip: Option<f64>,
    /// Whether the forget gates are `1 - ` the input gates (and have no weights of their own).
    #[config(default = false)]
    pub input_forget: bool,
    /// The input, forget and output gates' activation.
    #[config(default = "ActivationConfig::Sigmoid")]
    pub gate_activation: ActivationConfig,
    /// The cell gates' activation.
    #[config(default = "ActivationConfig::Tanh")]
    pub cell_activation: ActivationConfig,
    /// The activation of the cells in the hidden states.
    #[config(default = "ActivationConfig::Tanh")]
    pub hidden_activation: ActivationConfig,
}

impl BiLstmConfig {
    /// A new [`BiLstm`], initialized as Burn's `BiLstmConfig::init` initializes it.
    pub fn init(&self, device: &Device) -> BiLstm {
        BiLstm::from(burn::nn::BiLstmConfig::from(self).init(device))
    }
}

impl From<&BiLstmConfig> for burn::nn::BiLstmConfig {
    fn from(config: &BiLstmConfig) -> Self {
        Self {
            d_input: config.d_input,
            d_hidden: config.d_hidden,
            bias: config.bias,
            initializer: config.initializer.clone(),
            batch_first: config.batch_first,
            clip: config.clip,
            input_forget: config.input_forget,
            gate_activation: config.gate_activation.clone(),
            cell_activation: config.cell_activation.clone(),
            hidden_activation: config.hidden_activation.clone(),
        }
    }
}

/// Burn's [`burn::nn::BiLstm`] (the same parameters, names and records; its two LSTMs read
/// through `Deref`), whose [`forward`](Self::forward) runs each direction's recurrence as one
/// op on flex, for LSTMs with PyTorch's gates (Burn's defaults).
#[derive(Clone, Debug)]
pub struct BiLstm {
    inner: burn::nn::BiLstm,
}

wrapped_module!(BiLstm, burn::nn::BiLstm);

impl BiLstm {
    /// Both directions' hidden states of every step side by side (`2 · d_hidden` features)
    /// and their last states stacked (forward, then reverse), from `state` (`[2, batch,
    /// d_hidden]`; zeros if none), as Burn's `BiLstm::forward`.
    pub fn forward(
        &self,
        batched_input: Tensor<3>,
        state: Option<LstmState<3>>,
    ) -> (Tensor<3>, LstmState<3>) {
        bi_lstm(&self.inner, batched_input, state)
    }
}
