//! [`CrossEntropyLoss`] and [`CrossEntropyLossConfig`]: Burn's cross-entropy loss, computed by
//! [`crate::softmax_cross_entropy`] (its own backward pass) wherever Burn's options leave it
//! the plain or label-smoothed loss of logits.

use burn::config::Config;
use burn::tensor::{Device, Int, Tensor};

use crate::loss::softmax_cross_entropy;
use crate::nn::wrapped::wrapped_module;

/// [`burn::nn::loss::CrossEntropyLossConfig`], field for field, whose [`init`](Self::init)
/// makes this crate's [`CrossEntropyLoss`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct CrossEntropyLossConfig {
    /// Labels left out of the mean (Burn's padded cross-entropy).
    pub pad_tokens: Option<Vec<usize>>,
    /// A weight per class (Burn's weighted cross-entropy).
    pub weights: Option<Vec<f32>>,
    /// Label smoothing: one-hot targets become `y (1 - a) + a / classes`.
    pub smoothing: Option<f32>,
    /// Whether the inputs are logits (`false`: probabilities).
    #[config(default = true)]
    pub logits: bool,
}

impl CrossEntropyLossConfig {
    /// A new [`CrossEntropyLoss`], as Burn's `CrossEntropyLossConfig::init` makes it (and with
    /// its checks).
    pub fn init(&self, device: &Device) -> CrossEntropyLoss {
        CrossEntropyLoss::from(burn::nn::loss::CrossEntropyLossConfig::from(self).init(device))
    }
}

impl From<&CrossEntropyLossConfig> for burn::nn::loss::CrossEntropyLossConfig {
    fn from(config: &CrossEntropyLossConfig) -> Self {
        Self {
            pad_tokens: config.pad_tokens.clone(),
            weights: config.weights.clone(),
            smoothing: config.smoothing,
            logits: config.logits,
        }
    }
}

/// Burn's [`burn::nn::loss::CrossEntropyLoss`], whose [`forward`](Self::forward) takes
/// [`softmax_cross_entropy`] for logits without pad tokens or class weights, and Burn's own
/// loss otherwise.
#[derive(Clone, Debug)]
pub struct CrossEntropyLoss {
    inner: burn::nn::loss::CrossEntropyLoss,
}

wrapped_module!(CrossEntropyLoss, burn::nn::loss::CrossEntropyLoss);

impl CrossEntropyLoss {
    /// The mean loss of `logits` (`[batch, classes]`) against `targets` (`[batch]`), shape
    /// `[1]`, as Burn's `CrossEntropyLoss::forward`.
    pub fn forward(&self, logits: Tensor<2>, targets: Tensor<1, Int>) -> Tensor<1> {
        let loss = &self.inner;
        if loss.logits && loss.pad_tokens.is_none() && loss.weights.is_none() {
            return softmax_cross_entropy(logits, targets, loss.smoothing.unwrap_or(0.0));
        }
        loss.forward(logits, targets)
    }
}
