//! [`LayerNorm`] and [`LayerNormConfig`]: Burn's layer normalization, computed by
//! [`crate::layer_norm`].
//!
//! Not a wrapper of Burn's layer as the other drop-ins are: Burn keeps a `LayerNorm`'s epsilon
//! private, so a wrapper could not read it. The same fields under the same names instead: a
//! record saved from either loads into the other, and [`From`] makes Burn's layer of this one
//! (not the reverse, for that epsilon).

use burn::config::Config;
use burn::module::{Content, DisplaySettings, Module, ModuleDisplay, Param};
use burn::nn::Initializer;
use burn::tensor::{Device, Tensor};

use crate::dispatch::layer_norm;

/// [`burn::nn::LayerNormConfig`], field for field (a config saved from either loads as the
/// other), whose [`init`](Self::init) makes this crate's [`LayerNorm`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct LayerNormConfig {
    /// The size of the last dimension, which each row is normalized over.
    pub d_model: usize,
    /// A value added to the variance for numerical stability.
    #[config(default = 1e-5)]
    pub epsilon: f64,
    /// Whether the layer has an offset (`beta`).
    #[config(default = true)]
    pub bias: bool,
}

impl LayerNormConfig {
    /// A new [`LayerNorm`], initialized as Burn's `LayerNormConfig::init` initializes it: scale
    /// ones, offset zeros.
    pub fn init(&self, device: &Device) -> LayerNorm {
        LayerNorm {
            gamma: Initializer::Ones.init([self.d_model], device),
            beta: self
                .bias
                .then(|| Initializer::Zeros.init([self.d_model], device)),
            epsilon: self.epsilon,
        }
    }
}

/// Burn's [`burn::nn::LayerNorm`]: the same parameters under the same names, whose
/// [`forward`](Self::forward) runs on burn-towers' flex kernels where they apply.
#[derive(Module, Debug)]
#[module(custom_display)]
pub struct LayerNorm {
    /// The scale, one per feature.
    pub gamma: Param<Tensor<1>>,
    /// The offset, one per feature, if the layer has one.
    pub beta: Option<Param<Tensor<1>>>,
    epsilon: f64,
}

impl LayerNorm {
    /// `input` normalized over its last dimension, as Burn's `LayerNorm::forward`.
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        let beta = self.beta.as_ref().map(|beta| beta.val());
        layer_norm(input, self.gamma.val(), beta, self.epsilon)
    }
}

impl From<LayerNorm> for burn::nn::LayerNorm {
    fn from(layer: LayerNorm) -> Self {
        let [d_model] = layer.gamma.dims();
        let config = burn::nn::LayerNormConfig::new(d_model)
            .with_epsilon(layer.epsilon)
            .with_bias(layer.beta.is_some());
        let mut burns = config.init(&layer.gamma.device());
        burns.gamma = layer.gamma;
        burns.beta = layer.beta;
        burns
    }
}

/// Displayed as Burn's layer is.
impl ModuleDisplay for LayerNorm {
    fn custom_settings(&self) -> Option<DisplaySettings> {
        DisplaySettings::new()
            .with_new_line_after_attribute(false)
            .optional()
    }

    fn custom_content(&self, content: Content) -> Option<Content> {
        let [d_model] = self.gamma.dims();
        content
            .add("d_model", &d_model)
            .add("epsilon", &self.epsilon)
            .add("bias", &self.beta.is_some())
            .optional()
    }
}
