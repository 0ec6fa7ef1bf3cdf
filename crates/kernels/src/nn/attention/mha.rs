//! [`MultiHeadAttention`], [`MultiHeadAttentionConfig`] and [`MhaInput`]: Burn's multi-head
//! attention, its projections computed by [`crate::linear`], its softmax by [`crate::softmax`]
//! (one pass forward and one backward on flex, where Burn's autodiff composes five ops each way)
//! and, on flex, its context by [`crate::attention`]'s kernel (whose backward pass never holds
//! the weights whole).

use burn::config::Config;
use burn::nn::Initializer;
use burn::nn::attention::MhaOutput;
use burn::tensor::{Bool, Device, Tensor};

use crate::dispatch::{WeightsDropout, heads_context, linear, quiet_softmax, softmax};
use crate::nn::wrapped::wrapped_module;

/// [`burn::nn::attention::MultiHeadAttentionConfig`], field for field (a config saved from
/// either loads as the other), whose [`init`](Self::init) makes this crate's
/// [`MultiHeadAttention`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct MultiHeadAttentionConfig {
    /// The size of each linear layer.
    pub d_model: usize,
    /// The number of heads.
    pub n_heads: usize,
    /// The dropout rate of the attention weights.
    #[config(default = 0.1)]
    pub dropout: f64,
    /// The value masked scores take (too low a value may give NaN).
    #[config(default = -1.0e4)]
    pub min_float: f64,
    /// Burn's "quiet softmax", `e^x / (1 + Σ e^x)`, rather than softmax.
    #[config(default = false)]
    pub quiet_softmax: bool,
    /// The function that initializes the parameters (Burn's default).
    #[config(default = "Initializer::KaimingUniform{gain:1.0/3.0f64.sqrt(),fan_out_only:false}")]
    pub initializer: Initializer,
    /// A bias in the key projection.
    #[config(default = true)]
    pub key_bias: bool,
    /// A bias in the value projection.
    #[config(default = true)]
    pub value_bias: bool,
    /// A bias in the query projection.
    #[config(default = true)]
    pub query_bias: bool,
    /// A bias in the output projection.
    #[config(default = true)]
    pub output_bias: bool,
}

impl MultiHeadAttentionConfig {
    /// A new [`MultiHeadAttention`], initialized as Burn's `MultiHeadAttentionConfig::init`
    /// initializes it.
    ///
    /// # Panics
    ///
    /// If `d_model` is not a multiple of `n_heads` (Burn's layer fails at its first forward
    /// pass instead, reshaping).
    pub fn init(&self, device: &Device) -> MultiHeadAttention {
        assert_heads_divide(self.d_model, self.n_heads);
        let config = burn::nn::attention::MultiHeadAttentionConfig::from(self);
        MultiHeadAttention::from(config.init(device))
    }
}

/// Panics, naming both, unless `n_heads` heads of equal width make up `d_model`.
pub(crate) fn assert_heads_divide(d_model: usize, n_heads: usize) {
    assert!(
        n_heads > 0 && d_model.is_multiple_of(n_heads),
        "multi-head attention: d_model {d_model} is not a multiple of n_heads {n_heads}"
    );
}

impl From<&MultiHeadAttentionConfig> for burn::nn::attention::MultiHeadAttentionConfig {
    fn from(config: &MultiHeadAttentionConfig) -> Self {
        Self {
            d_model: config.d_model,
            n_heads: config.n_heads,
            dropout: config.dropout,
            min_float: config.min_float,
            quiet_softmax: config.quiet_softmax,
            initializer: config.initializer.clone(),
            key_bias: config.key_bias,
            value_bias: config.value_bias,
            query_bias: config.query_bias,
            output_bias: config.output_bias,
        }
    }
}

/// Burn's [`burn::nn::attention::MultiHeadAttention`] (the same parameters, names and
/// records), whose [`forward`](Self::forward) computes Burn's outputs on burn-towers' kernels
/// where they apply. Burn's `forward_cache` (decoding with a cache) is reached through `Deref`,
/// on Burn's ops, with an [`MhaInput`] turned into Burn's by `into()`.
#[derive(Clone, Debug)]
pub struct MultiHeadAttention {
    inner: burn::nn::attention::MultiHeadAttention,
}

wrapped_module!(MultiHeadAttention, burn::nn::attention::MultiHeadAttention);

impl MultiHeadAttention {
    /// The attention of the queries `[batch, seq_1, d_model]` to the keys and values `[batch,
    /// seq_2, d_model]`, as Burn's `MultiHeadAttention::forward`: the context `[batch, seq_1,
    /// d_model]` and the weights `[batch, heads, seq_1, seq_2]` (after dropout, in training).
    ///
    /// On flex (but for a quiet softmax) the context is [`Self::context`]'s, by the attention
    /// kernel, with the weights' dropout mask: a loss of the context alone runs that kernel's
    /// backward pass and none of the weights'. The weights' queries are scaled by `1/√d_k`
    /// before their product with the keys rather than the scores after it (the same scores to
    /// rounding, from a tensor `seq_2 / d_k` times smaller).
    ///
    /// # Panics
    ///
    /// If the last dimension of the query, key or value is not `d_model`, the key's or value's
    /// batch differs from the query's, or the value's sequence from the key's (as Burn's).
    pub fn forward(&self, input: MhaInput) -> MhaOutput {
        let heads = self.heads_of(&input);
        let dropout = WeightsDropout::draw(&self.inner.dropout, &heads[0].device());
        let weights = dropout.apply(self.weights(&heads, input.masks.clone()));
        let context = match self.fused_context(&heads, input.masks, &dropout) {
            Some(context) => context,
            None => weights.clone().matmul(heads[2].clone()),
        };
        let context = self.merged(context);
        MhaOutput { weights, context }
    }

    /// The context alone, as `forward(input).context`, without the weights: on flex (but for a
    /// quiet softmax) by one attention kernel each way that never holds them whole
    /// ([`crate::attention`]'s), elsewhere through the weights as [`Self::forward`]. What the
    /// transformer layers, which drop the weights, call.
    ///
    /// # Panics
    ///
    /// As [`Self::forward`].
    pub fn context(&self, input: MhaInput) -> Tensor<3> {
        let heads = self.heads_of(&input);
        let dropout = WeightsDropout::draw(&self.inner.dropout, &heads[0].device());
        let context = match self.fused_context(&heads, input.masks.clone(), &dropout) {
            Some(context) => context,
            None => {
                let weights = dropout.apply(self.weights(&heads, input.masks));
                weights.matmul(heads[2].clone())
            }
        };
        self.merged(context)
    }

    /// The queries', keys' and values' heads `[batch, heads, seq, d_k]` of `input`, its shapes
    /// checked.
    fn heads_of(&self, input: &MhaInput) -> [Tensor<4>; 3] {
        let mha = &self.inner;
        let [batch, _, d_model] = input.query.dims();
        let [key_batch, seq_2, key_d] = input.key.dims();
        assert!(
            d_model == mha.d_model && key_d == mha.d_model && key_batch == batch,
            "multi-head attention of d_model {}: query {:?}, key {:?}",
            mha.d_model,
            input.query.dims(),
            input.key.dims()
        );
        assert_eq!(
            input.value.dims(),
            [batch, seq_2, mha.d_model],
            "multi-head attention: the value's shape against the key's {:?}",
            input.key.dims()
        );
        [
            (&input.query, &mha.query),
            (&input.key, &mha.key),
            (&input.value, &mha.value),
        ]
        .map(|(x, projection)| self.heads(x.clone(), projection))
    }

    /// The weights `[batch, heads, seq_1, seq_2]` of the queries' and keys' `heads`, before
    /// dropout.
    fn weights(&self, [query, key, _]: &[Tensor<4>; 3], masks: AttentionMasks) -> Tensor<4> {
        let scale = 1.0 / (self.inner.d_k as f32).sqrt();
        let scores = query
            .clone()
            .mul_scalar(scale)
            .matmul(key.clone().transpose());
        let scores = self.masked(scores, masks);
        match self.inner.quiet_softmax {
            true => quiet_softmax(scores, 3),
            false => softmax(scores, 3),
        }
    }

    /// The context of `heads` by the attention kernel, where it computes it (on flex, for a
    /// softmax); `None` elsewhere.
    fn fused_context(
        &self,
        heads: &[Tensor<4>; 3],
        masks: AttentionMasks,
        dropout: &WeightsDropout,
    ) -> Option<Tensor<4>> {
        if self.inner.quiet_softmax {
            return None;
        }
        let mask = masks.joined(heads[0].dims()[2]);
        heads_context(heads.each_ref(), mask, self.inner.min_float as f32, dropout)
    }

    /// The heads' context `[batch, heads, seq_1, d_k]` side by side, through the output
    /// projection: `[batch, seq_1, d_model]`.
    fn merged(&self, context: Tensor<4>) -> Tensor<3> {
        let [batch, _, seq_1, _] = context.dims();
        let context = context.swap_dims(1, 2);
        let context = context.reshape([batch, seq_1, self.inner.d_model]);
        linear(&self.inner.output, context)
    }

    /// `x` `[batch, seq, d_model]` through `projection`, as `[batch, heads, seq, d_k]`.
    fn heads(&self, x: Tensor<3>, projection: &burn::nn::Linear) -> Tensor<4> {
        let [batch, seq, _] = x.dims();
        linear(projection, x)
            .reshape([batch, seq, self.inner.n_heads, self.inner.d_k])
            .swap_dims(1, 2)
    }

    /// `scores` with `min_float` where either mask is `true` (the padding mask over every query,
    /// the attention mask over every head).
    fn masked(&self, scores: Tensor<4>, masks: AttentionMasks) -> Tensor<4> {
        match masks.joined(scores.dims()[2]) {
            Some(mask) => scores.mask_fill(mask, self.inner.min_float),
            None => scores,
        }
    }
}

/// [`burn::nn::attention::MhaInput`] (whose fields Burn keeps to itself): the queries, keys and
/// values, and the masks, made and given as Burn's are.
#[derive(Debug, Clone)]
pub struct MhaInput {
    /// `[batch, seq_1, d_model]`.
    query: Tensor<3>,
    /// `[batch, seq_2, d_model]`.
    key: Tensor<3>,
    /// `[batch, seq_2, d_model]`.
    value: Tensor<3>,
    masks: AttentionMasks,
}

/// The masks of an attention's scores, `true` where a score is masked.
#[derive(Debug, Clone, Default)]
pub(crate) struct AttentionMasks {
    /// `[batch, seq_2]`, `true` where a key is padding (for every query).
    pub pad: Option<Tensor<2, Bool>>,
    /// `[batch, seq_1, seq_2]`, `true` where a query may not attend to a key.
    pub attn: Option<Tensor<3, Bool>>,
}

impl AttentionMasks {
    /// Both masks as one of the scores `[batch, 1, seq_1, seq_2]` (the same for every head),
    /// `true` where either is; the padding mask alone as `[batch, 1, 1, seq_2]`.
    fn joined(self, seq_1: usize) -> Option<Tensor<4, Bool>> {
        let pad = self.pad.map(|mask| {
            let [batch, seq_2] = mask.dims();
            mask.reshape([batch, 1, 1, seq_2])
        });
        let attn = self.attn.map(|mask| {
            let [batch, seq_1, seq_2] = mask.dims();
            mask.reshape([batch, 1, seq_1, seq_2])
        });
        match (pad, attn) {
            (Some(pad), Some(attn)) => {
                let [batch, _, _, seq_2] = pad.dims();
                Some(pad.expand([batch, 1, seq_1, seq_2]).bool_or(attn))
            }
            (pad, attn) => pad.or(attn),
        }
    }

    /// `input` (one of Burn's inputs, whose masks only its setters reach) with those of these
    /// masks that are there, set by `set_pad` and `set_attn`.
    pub(crate) fn set_on<T>(
        self,
        input: T,
        set_pad: fn(T, Tensor<2, Bool>) -> T,
        set_attn: fn(T, Tensor<3, Bool>) -> T,
    ) -> T {
        let input = match self.pad {
            Some(mask) => set_pad(input, mask),
            None => input,
        };
        match self.attn {
            Some(mask) => set_attn(input, mask),
            None => input,
        }
    }
}

impl MhaInput {
    /// Self-attention: `tensor` `[batch, seq, d_model]` as the queries, keys and values.
    pub fn self_attn(tensor: Tensor<3>) -> Self {
        Self::new(tensor.clone(), tensor.clone(), tensor)
    }

    /// The queries `[batch, seq_1, d_model]` attending to keys and values `[batch, seq_2,
    /// d_model]`.
    pub fn new(query: Tensor<3>, key: Tensor<3>, value: Tensor<3>) -> Self {
        Self {
            query,
            key,
            value,
            masks: AttentionMasks::default(),
        }
    }

    /// With the padding mask `[batch, seq_2]` (`true`: a padding key, attended to by none).
    pub fn mask_pad(mut self, mask_pad: Tensor<2, Bool>) -> Self {
        self.masks.pad = Some(mask_pad);
        self
    }

    /// With the attention mask `[batch, seq_1, seq_2]` (`true`: a key its query may not
    /// attend to).
    pub fn mask_attn(mut self, mask_attn: Tensor<3, Bool>) -> Self {
        self.masks.attn = Some(mask_attn);
        self
    }

    /// With `masks` (a transformer layer's input's) instead of its own.
    pub(crate) fn with_masks(mut self, masks: AttentionMasks) -> Self {
        self.masks = masks;
        self
    }
}

impl From<MhaInput> for burn::nn::attention::MhaInput {
    fn from(input: MhaInput) -> Self {
        let burns = Self::new(input.query, input.key, input.value);
        input.masks.set_on(burns, Self::mask_pad, Self::mask_attn)
    }
}
