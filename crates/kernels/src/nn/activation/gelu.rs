//! [`Gelu`]: Burn's GELU layer, computed by [`crate::gelu`] or, approximated,
//! [`crate::gelu_approximate`].

use burn::tensor::Tensor;

use crate::dispatch::{gelu, gelu_approximate};
use crate::nn::wrapped::wrapped_module;

/// Burn's [`burn::nn::Gelu`] (its `approximate` setting read through `Deref`), whose
/// [`forward`](Self::forward) runs on burn-towers' flex kernels where they apply.
#[derive(Clone, Debug, Default)]
pub struct Gelu {
    inner: burn::nn::Gelu,
}

wrapped_module!(Gelu, burn::nn::Gelu);

impl Gelu {
    /// GELU, `x · Φ(x)`.
    pub fn new() -> Self {
        Self::default()
    }

    /// GELU's tanh approximation.
    pub fn new_approximate() -> Self {
        Self::from(burn::nn::Gelu::new_approximate())
    }

    /// The activation of every value of `input`, as Burn's `Gelu::forward`.
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        match self.inner.approximate {
            false => gelu(input),
            true => gelu_approximate(input),
        }
    }
}
