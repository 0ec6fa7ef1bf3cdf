//! Burn's `burn::nn::activation`, with the layers whose functions the flex kernels compute in
//! one vectorized pass each way: [`Gelu`] (`gelu.rs`), [`LeakyRelu`] (`leaky_relu.rs`),
//! [`PRelu`] (`prelu.rs`), [`SwiGlu`] (`swiglu.rs`, on the drop-in dense layer and SiLU), and
//! [`SiLU`], [`Relu6`], [`HardSwish`], [`Mish`], [`Sigmoid`], [`Tanh`] (here: layers without
//! settings, one macro); `activate` for Burn's `Activation` enum (`burns_activation.rs`). Burn's
//! `HardSigmoid` is not among them: its default slope is Keras's 0.2, not the 1/6 the kernel
//! computes.

mod burns_activation;
mod gelu;
mod leaky_relu;
mod prelu;
mod swiglu;

use burn::tensor::Tensor;

use crate::dispatch::{hard_swish, mish, relu6, sigmoid, silu, tanh};
use crate::nn::wrapped::wrapped_module;

pub use burn::nn::activation::*;
pub(crate) use burns_activation::activate;
pub use gelu::Gelu;
pub use leaky_relu::{LeakyRelu, LeakyReluConfig};
pub use prelu::{PRelu, PReluConfig};
pub(crate) use swiglu::swiglu;
pub use swiglu::{SwiGlu, SwiGluConfig};

/// A drop-in for Burn's activation layer `$inner`, which has no settings, computed by
/// `$function`.
macro_rules! activation_without_settings {
    ($(#[$doc:meta])* $layer:ident, $inner:ty, $function:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default)]
        pub struct $layer {
            inner: $inner,
        }

        wrapped_module!($layer, $inner);

        impl $layer {
            /// The layer (it has no settings).
            pub fn new() -> Self {
                Self::default()
            }

            /// The activation of every value of `input`.
            pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
                $function(input)
            }
        }
    };
}

activation_without_settings!(
    /// Burn's [`burn::nn::activation::SiLU`], `x · sigmoid(x)`, by [`crate::silu`].
    SiLU,
    burn::nn::activation::SiLU,
    silu
);
activation_without_settings!(
    /// Burn's [`burn::nn::activation::Relu6`], `min(max(x, 0), 6)`, by [`crate::relu6`].
    Relu6,
    burn::nn::activation::Relu6,
    relu6
);
activation_without_settings!(
    /// Burn's [`burn::nn::activation::HardSwish`], `x · relu6(x + 3) / 6`, by [`crate::hard_swish`].
    HardSwish,
    burn::nn::activation::HardSwish,
    hard_swish
);
activation_without_settings!(
    /// Burn's [`burn::nn::Sigmoid`], `1 / (1 + e^-x)`, by [`crate::sigmoid`].
    Sigmoid,
    burn::nn::Sigmoid,
    sigmoid
);
activation_without_settings!(
    /// Burn's [`burn::nn::Tanh`], `tanh(x)`, by [`crate::tanh`].
    Tanh,
    burn::nn::Tanh,
    tanh
);
activation_without_settings!(
    /// Burn's [`burn::nn::activation::Mish`], `x · tanh(softplus(x))`, by [`crate::mish`].
    Mish,
    burn::nn::activation::Mish,
    mish
);
