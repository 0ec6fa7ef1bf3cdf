//! [`Linear`] and [`LinearConfig`]: Burn's dense layer, computed by [`crate::linear`].

use burn::config::Config;
use burn::nn::{Initializer, LinearLayout};
use burn::tensor::{Device, Tensor};

use crate::dispatch::linear;
use crate::nn::wrapped::wrapped_module;

/// [`burn::nn::LinearConfig`], field for field, whose [`init`](Self::init) makes this crate's
/// [`Linear`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct LinearConfig {
    /// The size of the input features.
    pub d_input: usize,
    /// The size of the output features.
    pub d_output: usize,
    /// If a bias should be applied during the linear transformation.
    #[config(default = true)]
    pub bias: bool,
    /// The function that initializes the parameters (Burn's default).
    #[config(default = "Initializer::KaimingUniform{gain:1.0/3.0f64.sqrt(),fan_out_only:false}")]
    pub initializer: Initializer,
    /// The layout in which the parameters are stored.
    #[config(default = "LinearLayout::Row")]
    pub layout: LinearLayout,
}

impl LinearConfig {
    /// A new [`Linear`], initialized as Burn's `LinearConfig::init` initializes it.
    pub fn init(&self, device: &Device) -> Linear {
        Linear::from(burn::nn::LinearConfig::from(self).init(device))
    }
}

impl From<&LinearConfig> for burn::nn::LinearConfig {
    fn from(config: &LinearConfig) -> Self {
        Self {
            d_input: config.d_input,
            d_output: config.d_output,
            bias: config.bias,
            initializer: config.initializer.clone(),
            layout: config.layout,
        }
    }
}

/// Burn's [`burn::nn::Linear`], whose [`forward`](Self::forward) computes its product in this
/// thread's [`Precision`](crate::Precision) (on burn-towers' bf16 kernels on flex).
#[derive(Clone, Debug)]
pub struct Linear {
    inner: burn::nn::Linear,
}

wrapped_module!(Linear, burn::nn::Linear);

impl Linear {
    /// `[..., d_input]` to `[..., d_output]`, as Burn's `Linear::forward`.
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        linear(&self.inner, input)
    }
}
