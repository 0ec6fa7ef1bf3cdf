//! Softmax and multi-head attention: `towers_kernels::softmax` and `quiet_softmax` against the
//! same functions in f64 (Burn's ops, autodiff), and the drop-in `nn::attention::
//! MultiHeadAttention` against Burn's layer: the same context, weights and gradients from the
//! same parameters, masked or not, records and configs saved from either loaded into the other.
//! The device and the comparison are `drop_in.rs`'s.

use burn::nn::attention::generate_autoregressive_mask;
use burn::tensor::{Bool, DType, Tensor, TensorData};
use towers_kernels::nn::attention::{MhaInput, MultiHeadAttentionConfig};
use towers_kernels::{quiet_softmax, softmax};
use towers_testing::nets::{pattern, seeded};

use crate::drop_in::{assert_agree, assert_records_load_both_ways, device};

/// `[3, 5, 37]` (rows longer than a vector, not a whole number of them), its rows offset by 40
/// (where a sum of unshifted exponentials would overflow) and one value of each row of the
/// second image masked to -10⁴ (Burn's attention mask), softmax along each dimension; Burn's
/// against the same reference. Where one value dominates a row, the gradient `y·(g - Σ g·y)`
/// cancels (`Σ g·y` near that value's `g`), and the exponentials' rounding shows at ~1e-5 of
/// the largest gradient, Burn's as ours.
#[test]
fn softmax_gives_f64_outputs_and_gradients() {
    let device = device();
    let dims = [3, 5, 37];
    let masked = Tensor::<3>::from_data(
        TensorData::new(
            (0..3 * 5 * 37)
                .map(|i| {
                    if i / 185 == 1 && i % 37 == 4 {
                        -1e4
                    } else {
                        0.0
                    }
                })
                .collect::<Vec<f32>>(),
            dims,
        ),
        &device,
    );
    let x = pattern(dims, 3, &device) * 20.0 + 40.0 + masked;
    let weights = pattern(dims, 5, &device) + 1.0;
    for (dim, quiet) in [(2, false), (1, false), (0, false), (2, true), (1, true)] {
        let what = format!("dim {dim}, quiet: {quiet}");
        let want = softmax_f64(x.clone(), dim, quiet, weights.clone());
        let with = |forward: &dyn Fn(Tensor<3>) -> Tensor<3>| {
            let x = x.clone().require_grad();
            let y = forward(x.clone());
            let dx = x.grad(&(y.clone() * weights.clone()).sum().backward());
            (y.detach(), dx.unwrap())
        };
        let (ours, burns) = match quiet {
            false => (
                with(&|x| softmax(x, dim as i32 - 3)),
                with(&|x| burn::tensor::activation::softmax(x, dim)),
            ),
            true => (
                with(&|x| quiet_softmax(x, dim)),
                with(&|x| burn::tensor::activation::quiet_softmax(x, dim)),
            ),
        };
        for (who, (y, dx)) in [("ours", ours), ("Burn's", burns)] {
            let what = format!("{what}, {who}");
            assert_agree(y, want[0].clone(), 1e-6, &format!("{what}: output"));
            assert_agree(
                dx,
                want[1].clone(),
                2e-5,
                &format!("{what}: input gradient"),
            );
        }
    }
}

/// A quiet softmax of rows of `-∞` is zeros (Burn's replaces their maximum by 0); a softmax of
/// them NaN (as Burn's and PyTorch's).
#[test]
fn softmax_of_rows_of_minus_infinity_is_burns() {
    let device = device();
    let x = Tensor::<2>::full([2, 20], f32::NEG_INFINITY, &device);
    let quiet: Vec<f32> = quiet_softmax(x.clone(), 1)
        .into_data()
        .iter::<f32>()
        .collect();
    assert!(quiet.iter().all(|&y| y == 0.0), "{quiet:?}");
    let plain: Vec<f32> = softmax(x, 1).into_data().iter::<f32>().collect();
    assert!(plain.iter().all(|y| y.is_nan()), "{plain:?}");
}

/// Softmax (or quiet softmax) of `x` along `dim` in f64 by Burn's ops, and the gradient of
/// `sum(y · weights)`, in f32.
fn softmax_f64<const D: usize>(
    x: Tensor<D>,
    dim: usize,
    quiet: bool,
    weights: Tensor<D>,
) -> [Tensor<D>; 2] {
    let x = x.cast(DType::F64).detach().require_grad();
    let max = x.clone().detach().max_dim(dim);
    let exps = (x.clone() - max.clone()).exp();
    let mut sums = exps.clone().sum_dim(dim);
    if quiet {
        sums = sums + max.neg().exp();
    }
    let y = exps / sums;
    let grads = (y.clone() * weights.cast(DType::F64)).sum().backward();
    let dx = x.grad(&grads).unwrap();
    [y, dx].map(|t| t.cast(DType::F32))
}

/// Ours against Burn's, from the same seeded parameters: self-attention plain, with padding
/// and autoregressive masks and quiet softmax, and queries of 5 attending to 7 keys with a
/// padding mask; the context and the weights, and the gradients of `sum(context · w) +
/// sum(weights · v)` with respect to the inputs and to parameters of each projection.
#[test]
fn multi_head_attention_gives_burns_outputs_and_gradients() {
    let device = device();
    let (batch, seq_1, d_model) = (2, 5, 16);
    let pad = |seq_2: usize| {
        // The last two keys of the second sequence are padding.
        let mask: Vec<bool> = (0..batch * seq_2).map(|i| i >= 2 * seq_2 - 2).collect();
        Tensor::<2, Bool>::from_data(TensorData::new(mask, [batch, seq_2]), &device)
    };
    for (what, seq_2, masked, quiet) in [
        ("self-attention", seq_1, false, false),
        ("masked self-attention, quiet", seq_1, true, true),
        ("5 queries to 7 keys, padded", 7, true, false),
    ] {
        let config = MultiHeadAttentionConfig::new(d_model, 4)
            .with_dropout(0.0)
            .with_quiet_softmax(quiet)
            .with_key_bias(seq_2 == seq_1);
        let ours = seeded(config.init(&device), 7);
        let burns: burn::nn::attention::MultiHeadAttention = ours.clone().into();
        let query = pattern([batch, seq_1, d_model], 11, &device) * 5.0;
        let memory = pattern([batch, seq_2, d_model], 13, &device) * 5.0;
        let (query, memory) = (query.require_grad(), memory.require_grad());
        let mut ours_input = MhaInput::new(query.clone(), memory.clone(), memory.clone());
        if masked {
            ours_input = ours_input.mask_pad(pad(seq_2));
        }
        if masked && seq_2 == seq_1 {
            let mask = generate_autoregressive_mask(batch, seq_1, &device);
            ours_input = ours_input.mask_attn(mask);
        }
        let burns_input: burn::nn::attention::MhaInput = ours_input.clone().into();
        let context_weights = pattern([batch, seq_1, d_model], 17, &device) + 1.0;
        let score_weights = pattern([batch, 4, seq_1, seq_2], 19, &device) + 1.0;
        let gradients = |output: burn::nn::attention::MhaOutput| {
            let loss = (output.context.clone() * context_weights.clone()).sum()
                + (output.weights.clone() * score_weights.clone()).sum();
            let grads = loss.backward();
            (output, grads)
        };
        let (got, got_grads) = gradients(ours.forward(ours_input));
        let (want, want_grads) = gradients(burns.forward(burns_input));
        let what = |part: &str| format!("{what}: {part}");
        assert_agree(got.context, want.context, 1e-5, &what("context"));
        assert_agree(got.weights, want.weights, 1e-5, &what("weights"));
        for (input, name) in [(&query, "query input"), (&memory, "key and value input")] {
            let (got, want) = (input.grad(&got_grads), input.grad(&want_grads));
            assert_agree(got.unwrap(), want.unwrap(), 1e-5, &what(name));
        }
        let params = [
            (&ours.query.weight, &burns.query.weight, "query weight"),
            (&ours.key.weight, &burns.key.weight, "key weight"),
            (&ours.value.weight, &burns.value.weight, "value weight"),
            (&ours.output.weight, &burns.output.weight, "output weight"),
        ];
        for (got, want, name) in params {
            let got = got.val().grad(&got_grads).unwrap();
            let want = want.val().grad(&want_grads).unwrap();
            assert_agree(got, want, 1e-5, &what(name));
        }
        let bias = |mha: &burn::nn::attention::MultiHeadAttention, grads| {
            let bias = mha.query.bias.as_ref().unwrap().val();
            bias.grad(grads).unwrap()
        };
        let query_bias = (bias(&ours, &got_grads), bias(&burns, &want_grads));
        assert_agree(query_bias.0, query_bias.1, 1e-5, &what("query bias"));
    }
}

/// In training (an autodiff device), dropout falls on the weights after softmax, as in Burn's
/// layer: with every parameter 0 the scores are equal, the weights `1/4`, and dropout at 0.5
/// leaves each 0 or `1/2`, and some of each.
#[test]
fn multi_head_attention_drops_weights_after_softmax() {
    let device = device();
    device.seed(42);
    let mha = MultiHeadAttentionConfig::new(8, 2)
        .with_dropout(0.5)
        .with_initializer(burn::nn::Initializer::Zeros)
        .init(&device);
    let x = pattern([4, 4, 8], 3, &device);
    let weights: Vec<f32> = (mha.forward(MhaInput::self_attn(x)).weights)
        .into_data()
        .iter::<f32>()
        .collect();
    let dropped = weights.iter().filter(|&&w| w == 0.0).count();
    let kept = weights.iter().filter(|&&w| w == 0.5).count();
    assert_eq!(dropped + kept, weights.len(), "{weights:?}");
    assert!(dropped > 0 && kept > 0, "{dropped} dropped, {kept} kept");
}

/// In training, the context `forward` returns is that of the weights it returns, dropped ones
/// and all (on flex the attention kernel computes the context and the dropout kernel the
/// weights, by one draw): the context again from those weights, the layer's value heads and
/// its output projection.
#[test]
fn multi_head_attention_context_is_that_of_its_dropped_weights() {
    let device = device();
    let (batch, seq, d_model, heads) = (2, 6, 8, 2);
    let mha = seeded(
        MultiHeadAttentionConfig::new(d_model, heads)
            .with_dropout(0.5)
            .init(&device),
        3,
    );
    let x = pattern([batch, seq, d_model], 5, &device) * 3.0;
    let output = mha.forward(MhaInput::self_attn(x.clone()));
    let weights: Vec<f32> = output.weights.clone().into_data().iter::<f32>().collect();
    assert!(weights.contains(&0.0), "nothing dropped: {weights:?}");
    let values = mha.value.forward(x);
    let values = values
        .reshape([batch, seq, heads, d_model / heads])
        .swap_dims(1, 2);
    let context = output.weights.matmul(values).swap_dims(1, 2);
    let want = mha.output.forward(context.reshape([batch, seq, d_model]));
    assert_agree(output.context, want, 1e-5, "context of the weights");
}

/// Burn's record loads into ours and ours into Burn's; configs saved from either load as the
/// other; ours displays as Burn's.
#[test]
fn multi_head_attention_records_and_configs_are_burns() {
    use burn::config::Config;
    let device = device();
    let dir = tempfile::tempdir().unwrap();
    let config = MultiHeadAttentionConfig::new(12, 3).with_value_bias(false);
    let burns_config = burn::nn::attention::MultiHeadAttentionConfig::from(&config);
    assert_records_load_both_ways(
        seeded(config.init(&device), 6),
        seeded(burns_config.init(&device), 5),
        seeded(burns_config.init(&device), 7),
    );
    let file = dir.path().join("mha.json");
    config.save(&file).unwrap();
    let loaded = burn::nn::attention::MultiHeadAttentionConfig::load(&file).unwrap();
    assert_eq!(loaded.to_string(), burns_config.to_string());
    let plain = burn::nn::attention::MultiHeadAttentionConfig::new(12, 3);
    let from_ours = (&MultiHeadAttentionConfig::new(12, 3)).into();
    assert_eq!(
        plain.to_string(),
        burn::nn::attention::MultiHeadAttentionConfig::to_string(&from_ours)
    );
}

/// Heads that do not divide the model's width are refused when the layer is made (Burn's fails
/// at its first forward pass, reshaping), by the transformers' configs too.
#[test]
fn heads_that_do_not_divide_d_model_are_refused_at_init() {
    use towers_kernels::nn::transformer::{TransformerDecoderConfig, TransformerEncoderConfig};
    let device = device();
    let made = [
        std::panic::catch_unwind(|| drop(MultiHeadAttentionConfig::new(10, 4).init(&device))),
        std::panic::catch_unwind(|| drop(TransformerEncoderConfig::new(10, 8, 4, 1).init(&device))),
        std::panic::catch_unwind(|| drop(TransformerDecoderConfig::new(10, 8, 3, 1).init(&device))),
    ];
    for made in made {
        let message = made.expect_err("refused");
        let message = message.downcast_ref::<String>().expect("a message");
        assert!(
            message.contains("d_model 10 is not a multiple of n_heads"),
            "{message}"
        );
    }
}
