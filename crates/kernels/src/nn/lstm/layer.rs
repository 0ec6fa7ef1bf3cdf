//! [`Lstm`] and [`LstmConfig`]: Burn's LSTM layer, computed by [`crate::lstm`].

use burn::config::Config;
use burn::nn::activation::ActivationConfig;
use burn::nn::{Initializer, LstmState};
use burn::tensor::{Device, Tensor};

use crate::dispatch::lstm;
use crate::nn::wrapped::wrapped_module;

/// [`burn::nn::LstmConfig`], field for field (a config saved from either loads as the other),
/// whose [`init`](Self::init) makes this crate's [`Lstm`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct LstmConfig {
    /// The size of the input features.
    pub d_input: usize,
    /// The size of the hidden state.
    pub d_hidden: usize,
    /// Whether the gates' dense layers have biases.
    pub bias: bool,
    /// How the weights are initialized.
    #[config(default = "Initializer::XavierNormal{gain:1.0}")]
    pub initializer: Initializer,
    /// Whether the input is `[batch, steps, features]` (else `[steps, batch, features]`).
    #[config(default = true)]
    pub batch_first: bool,
    /// Whether the steps run from the last to the first.
    #[config(default = false)]
    pub reverse: bool,
    /// The bound the cell is clipped to after each step, if any.
    pub clip: Option<f64>,
    /// Whether the forget gate is `1 - ` the input gate (and has no weights of its own).
    #[config(default = false)]
    pub input_forget: bool,
    /// The input, forget and output gates' activation.
    #[config(default = "ActivationConfig::Sigmoid")]
    pub gate_activation: ActivationConfig,
    /// The cell gate's activation.
    #[config(default = "ActivationConfig::Tanh")]
    pub cell_activation: ActivationConfig,
    /// The activation of the cell in the hidden state.
    #[config(default = "ActivationConfig::Tanh")]
    pub hidden_activation: ActivationConfig,
}

impl LstmConfig {
    /// A new [`Lstm`], initialized as Burn's `LstmConfig::init` initializes it.
    pub fn init(&self, device: &Device) -> Lstm {
        Lstm::from(burn::nn::LstmConfig::from(self).init(device))
    }
}

impl From<&LstmConfig> for burn::nn::LstmConfig {
    fn from(config: &LstmConfig) -> Self {
        Self {
            d_input: config.d_input,
            d_hidden: config.d_hidden,
            bias: config.bias,
            initializer: config.initializer.clone(),
            batch_first: config.batch_first,
            reverse: config.reverse,
            clip: config.clip,
            input_forget: config.input_forget,
            gate_activation: config.gate_activation.clone(),
            cell_activation: config.cell_activation.clone(),
            hidden_activation: config.hidden_activation.clone(),
        }
    }
}

/// Burn's [`burn::nn::Lstm`] (the same parameters, names and records; its gates and settings
/// read through `Deref`), whose [`forward`](Self::forward) runs its recurrence as one op on
/// flex, for an LSTM with PyTorch's gates (Burn's defaults).
#[derive(Clone, Debug)]
pub struct Lstm {
    inner: burn::nn::Lstm,
}

wrapped_module!(Lstm, burn::nn::Lstm);

impl Lstm {
    /// The hidden state of every step and the last state, from `state` (zeros if none), as
    /// Burn's `Lstm::forward`.
    pub fn forward(
        &self,
        batched_input: Tensor<3>,
        state: Option<LstmState<2>>,
    ) -> (Tensor<3>, LstmState<2>) {
        lstm(&self.inner, batched_input, state)
    }
}
