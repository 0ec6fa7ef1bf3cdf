//! [`PositionWiseFeedForward`] and its config: Burn's transformer feed-forward network (two
//! dense layers with an activation between), on [`crate::linear`] and the drop-in activations.

use burn::config::Config;
use burn::nn::Initializer;
use burn::nn::activation::ActivationConfig;
use burn::tensor::{Device, Tensor};

use crate::dispatch::{dropout, linear};
use crate::nn::activation::activate;
use crate::nn::wrapped::wrapped_module;

/// [`burn::nn::transformer::PositionWiseFeedForwardConfig`], field for field (a config saved
/// from either loads as the other), whose [`init`](Self::init) makes this crate's
/// [`PositionWiseFeedForward`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct PositionWiseFeedForwardConfig {
    /// The size of the input and output features.
    pub d_model: usize,
    /// The size of the hidden features.
    pub d_ff: usize,
    /// The dropout rate after the activation.
    #[config(default = 0.1)]
    pub dropout: f64,
    /// The function that initializes the parameters (Burn's default).
    #[config(default = "Initializer::KaimingUniform{gain:1.0/3.0f64.sqrt(),fan_out_only:false}")]
    pub initializer: Initializer,
    /// The activation between the two dense layers.
    #[config(default = "ActivationConfig::Gelu")]
    pub activation: ActivationConfig,
}

impl PositionWiseFeedForwardConfig {
    /// A new [`PositionWiseFeedForward`], initialized as Burn's
    /// `PositionWiseFeedForwardConfig::init` initializes it.
    pub fn init(&self, device: &Device) -> PositionWiseFeedForward {
        let config = burn::nn::transformer::PositionWiseFeedForwardConfig::from(self);
        PositionWiseFeedForward::from(config.init(device))
    }
}

impl From<&PositionWiseFeedForwardConfig> for burn::nn::transformer::PositionWiseFeedForwardConfig {
    fn from(config: &PositionWiseFeedForwardConfig) -> Self {
        Self {
            d_model: config.d_model,
            d_ff: config.d_ff,
            dropout: config.dropout,
            initializer: config.initializer.clone(),
            activation: config.activation.clone(),
        }
    }
}

/// Burn's [`burn::nn::transformer::PositionWiseFeedForward`] (the same parameters, names and
/// records), whose [`forward`](Self::forward) runs on burn-towers' kernels where they apply.
#[derive(Clone, Debug)]
pub struct PositionWiseFeedForward {
    inner: burn::nn::transformer::PositionWiseFeedForward,
}

wrapped_module!(
    PositionWiseFeedForward,
    burn::nn::transformer::PositionWiseFeedForward
);

impl PositionWiseFeedForward {
    /// `[..., d_model]` through the inner dense layer, the activation, dropout and the outer
    /// dense layer, as Burn's `PositionWiseFeedForward::forward`.
    ///
    /// # Panics
    ///
    /// If the last dimension of `input` is not `d_model` (as Burn's).
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        let [d_model, _] = self.inner.linear_inner.weight.dims();
        assert_eq!(
            input.dims()[D - 1],
            d_model,
            "position-wise feed-forward of d_model {d_model}: input {:?}",
            input.dims()
        );
        let x = linear(&self.inner.linear_inner, input);
        let x = dropout(&self.inner.dropout, activate(&self.inner.activation, x));
        linear(&self.inner.linear_outer, x)
    }
}
