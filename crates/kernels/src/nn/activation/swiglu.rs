//! [`SwiGlu`] and [`SwiGluConfig`]: Burn's swish-gated linear unit (LLaMA's feed-forward
//! network), `silu(x · W) ⊙ (x · V)`, on the drop-in dense layer and SiLU.

use burn::config::Config;
use burn::nn::{Initializer, LinearLayout};
use burn::tensor::{Device, Tensor};

use crate::dispatch::{linear, silu};
use crate::nn::wrapped::wrapped_module;

/// [`burn::nn::SwiGluConfig`], field for field, whose [`init`](Self::init) makes this crate's
/// [`SwiGlu`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct SwiGluConfig {
    /// The size of the input features.
    pub d_input: usize,
    /// The size of the output features.
    pub d_output: usize,
    /// Whether both dense layers have a bias.
    #[config(default = false)]
    pub bias: bool,
    /// The function that initializes the parameters (Burn's default).
    #[config(default = "Initializer::KaimingUniform{gain:1.0/3.0f64.sqrt(),fan_out_only:false}")]
    pub initializer: Initializer,
    /// The layout in which the parameters are stored.
    #[config(default = "LinearLayout::Row")]
    pub layout: LinearLayout,
}

impl SwiGluConfig {
    /// A new [`SwiGlu`], initialized as Burn's `SwiGluConfig::init` initializes it.
    pub fn init(&self, device: &Device) -> SwiGlu {
        SwiGlu::from(burn::nn::SwiGluConfig::from(self).init(device))
    }
}

impl From<&SwiGluConfig> for burn::nn::SwiGluConfig {
    fn from(config: &SwiGluConfig) -> Self {
        Self {
            d_input: config.d_input,
            d_output: config.d_output,
            bias: config.bias,
            initializer: config.initializer.clone(),
            layout: config.layout,
        }
    }
}

/// Burn's [`burn::nn::SwiGlu`] (the same parameters, names and records), whose
/// [`forward`](Self::forward) runs on the drop-in dense layer and SiLU.
#[derive(Clone, Debug)]
pub struct SwiGlu {
    inner: burn::nn::SwiGlu,
}

wrapped_module!(SwiGlu, burn::nn::SwiGlu);

impl SwiGlu {
    /// `silu(linear_inner(x)) ⊙ linear_outer(x)`, as Burn's `SwiGlu::forward`.
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        swiglu(&self.inner, input)
    }
}

/// Burn's `layer.forward(x)` by [`crate::linear`] (a 3D input's rows in one product on flex,
/// where Burn's makes one per batch) and [`crate::silu`].
pub(crate) fn swiglu<const D: usize>(layer: &burn::nn::SwiGlu, x: Tensor<D>) -> Tensor<D> {
    let gate = silu(linear(&layer.linear_inner, x.clone()));
    gate * linear(&layer.linear_outer, x)
}
