//! [`RotaryEncoding`] and [`RotaryEncodingConfig`]: Burn's rotary position encoding (RoPE,
//! LLaMA's), computed by [`crate::rotary_encoding`].

use burn::config::Config;
use burn::tensor::{Device, Tensor};

use crate::dispatch::rotary_encoding;
use crate::nn::wrapped::wrapped_module;

/// [`burn::nn::RotaryEncodingConfig`], field for field, whose [`init`](Self::init) makes this
/// crate's [`RotaryEncoding`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct RotaryEncodingConfig {
    /// Maximum sequence length of input.
    pub max_sequence_length: usize,
    /// Size of the input embedding or hidden dimension.
    pub d_model: usize,
    /// Scaling factor for frequency computation.
    #[config(default = "10000.0")]
    pub theta: f32,
}

impl RotaryEncodingConfig {
    /// A new [`RotaryEncoding`], as Burn's `RotaryEncodingConfig::init` makes it.
    pub fn init(&self, device: &Device) -> RotaryEncoding {
        RotaryEncoding::from(burn::nn::RotaryEncodingConfig::from(self).init(device))
    }

    /// A new [`RotaryEncoding`] whose frequencies `scaling` rescales (RoPE's extensions), as
    /// Burn's `init_with_frequency_scaling`.
    pub fn init_with_frequency_scaling(
        &self,
        scaling: impl Fn(Tensor<1>) -> Tensor<1>,
        device: &Device,
    ) -> RotaryEncoding {
        let config = burn::nn::RotaryEncodingConfig::from(self);
        RotaryEncoding::from(config.init_with_frequency_scaling(scaling, device))
    }
}

impl From<&RotaryEncodingConfig> for burn::nn::RotaryEncodingConfig {
    fn from(config: &RotaryEncodingConfig) -> Self {
        Self {
            max_sequence_length: config.max_sequence_length,
            d_model: config.d_model,
            theta: config.theta,
        }
    }
}

/// Burn's [`burn::nn::RotaryEncoding`] (the same frequency table), whose
/// [`forward`](Self::forward) and [`apply`](Self::apply) run on burn-towers' flex kernel where
/// it applies.
#[derive(Clone, Debug)]
pub struct RotaryEncoding {
    inner: burn::nn::RotaryEncoding,
}

wrapped_module!(RotaryEncoding, burn::nn::RotaryEncoding);

impl RotaryEncoding {
    /// `[..., seq, d_model]` with positions `0..seq` encoded, as Burn's
    /// `RotaryEncoding::forward`.
    pub fn forward<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        rotary_encoding(&self.inner, x, 0)
    }

    /// `[..., seq, d_model]` with positions `start..start + seq` encoded, as Burn's
    /// `RotaryEncoding::apply`.
    pub fn apply<const D: usize>(&self, x: Tensor<D>, start: usize) -> Tensor<D> {
        rotary_encoding(&self.inner, x, start)
    }

    /// Moves the table's window of positions to start at `start`, as Burn's
    /// `RotaryEncoding::shift`.
    pub fn shift(&mut self, start: usize) {
        self.inner.shift(start)
    }
}
