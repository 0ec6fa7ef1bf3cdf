//! [`Dropout`] and [`DropoutConfig`]: Burn's dropout, computed by [`crate::dropout`].

use burn::config::Config;
use burn::tensor::Tensor;

use crate::dispatch::dropout;
use crate::nn::wrapped::wrapped_module;

/// [`burn::nn::DropoutConfig`], field for field (a config saved from either loads as the
/// other), whose [`init`](Self::init) makes this crate's [`Dropout`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct DropoutConfig {
    /// The probability that a value is zeroed during training.
    pub prob: f64,
}

impl DropoutConfig {
    /// A new [`Dropout`], as Burn's `DropoutConfig::init` makes it.
    ///
    /// # Panics
    ///
    /// If `prob` is not in `[0, 1)` (as Burn's).
    pub fn init(&self) -> Dropout {
        Dropout::from(burn::nn::DropoutConfig { prob: self.prob }.init())
    }
}

/// Burn's [`burn::nn::Dropout`] (the same probability, training flag and records), whose
/// [`forward`](Self::forward) runs in one pass each way on flex.
#[derive(Clone, Debug)]
pub struct Dropout {
    inner: burn::nn::Dropout,
}

wrapped_module!(Dropout, burn::nn::Dropout);

impl Dropout {
    /// In training, on an autodiff device, each value kept with probability `1 - prob` and
    /// scaled by `1 / (1 - prob)`; `input` as it is otherwise, as Burn's `Dropout::forward`.
    /// On flex the mask is not Burn's draw (see [`crate::dropout`]).
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        dropout(&self.inner, input)
    }
}
