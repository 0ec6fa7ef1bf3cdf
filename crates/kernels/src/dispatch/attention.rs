//! [`attention`]: Burn's `module::attention`, scaled dot-product attention, on flex by one
//! kernel each way that never holds the weights whole.

use burn::nn::Dropout;
use burn::tensor::ops::AttentionModuleOptions;
use burn::tensor::{Bool, Device, Tensor};

/// `softmax(query · keyᵀ · scale + masks) · value` of `[batch, heads, seq, d]` tensors, as
/// Burn's `burn::tensor::module::attention` (the same arguments; `mask` `true` where a score
/// is masked, to `-∞`; a query all masked gives zeros; `attn_bias` added after the masks,
/// `options.softcap` capping the scaled scores before them). On f32 flex tensors by burn-towers'
/// kernel, forward and backward, where `attn_bias` (if any) is a constant, in no autodiff graph
/// (ALiBi's slopes, a mask of `0` and `-∞`); elsewhere, and for a bias made of parameters,
/// Burn's.
///
/// # Panics
///
/// If `options.softcap` is not positive (as Burn's), or the shapes do not fit.
pub fn attention(
    query: Tensor<4>,
    key: Tensor<4>,
    value: Tensor<4>,
    mask: Option<Tensor<4, Bool>>,
    attn_bias: Option<Tensor<4>>,
    options: AttentionModuleOptions,
) -> Tensor<4> {
    if let Some(cap) = options.softcap {
        // Burn's check, which our kernel's path would not reach.
        assert!(cap > 0.0, "softcap must be positive, got {cap}");
    }
    #[cfg(feature = "flex")]
    if attn_bias.as_ref().is_none_or(|bias| !bias.is_tracked()) {
        let d = query.dims()[3];
        let rule = super::flex_route::ScoreRule {
            scale: options.scale.unwrap_or(1.0 / (d as f64).sqrt()) as f32,
            softcap: options.softcap.map(|cap| cap as f32),
            causal: options.is_causal,
            fill: f32::NEG_INFINITY,
        };
        let (inputs, bias) = ([&query, &key, &value], attn_bias.clone());
        if let Some(y) = super::flex_route::attention(inputs, mask.clone(), bias, rule, None) {
            return y;
        }
    }
    burn::tensor::module::attention(query, key, value, mask, attn_bias, options)
}

/// Multi-head attention's dropout of its weights, drawn once a call: on flex one draw that the
/// weights' dropout kernel and the attention kernel share (the context a layer returns is that
/// of the weights it returns, whichever computed it); elsewhere Burn's layer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WeightsDropout<'a> {
    layer: &'a Dropout,
    #[cfg(feature = "flex")]
    drawn: Option<super::flex_route::DrawnDropout>,
}

impl<'a> WeightsDropout<'a> {
    /// `layer`'s dropout of the weights of tensors on `device` (on flex, its draw from the
    /// device's generator, where it drops anything).
    pub(crate) fn draw(layer: &'a Dropout, device: &Device) -> Self {
        #[cfg(not(feature = "flex"))]
        let _ = device;
        Self {
            layer,
            #[cfg(feature = "flex")]
            drawn: super::flex_route::DrawnDropout::draw(layer, device),
        }
    }

    /// `weights` through the dropout.
    pub(crate) fn apply(&self, weights: Tensor<4>) -> Tensor<4> {
        #[cfg(feature = "flex")]
        if let Some(drawn) = self.drawn
            && let Some(dropped) = super::flex_route::dropped(drawn, &weights)
        {
            return dropped;
        }
        self.layer.forward(weights)
    }
}

/// Multi-head attention's context of its heads (`[batch, heads, seq, d_k]` each) without its
/// weights: the scores scaled by `1/√d_k`, set to `fill` (the layer's `min_float`) where `mask`
/// is `true`, the weights through `dropout`; by the flex kernel, `None` elsewhere (where the
/// layer computes its weights).
pub(crate) fn heads_context(
    heads: [&Tensor<4>; 3],
    mask: Option<Tensor<4, Bool>>,
    fill: f32,
    dropout: &WeightsDropout,
) -> Option<Tensor<4>> {
    #[cfg(feature = "flex")]
    {
        let rule = super::flex_route::ScoreRule {
            scale: 1.0 / (heads[0].dims()[3] as f32).sqrt(),
            softcap: None,
            causal: false,
            fill,
        };
        super::flex_route::attention(heads, mask, None, rule, dropout.drawn)
    }
    #[cfg(not(feature = "flex"))]
    {
        let _ = (heads, mask, fill, dropout);
        None
    }
}
