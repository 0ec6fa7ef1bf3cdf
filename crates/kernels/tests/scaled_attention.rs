//! `towers_kernels::attention` (Burn's `module::attention`, scaled dot-product attention) against
//! Burn's own composition of it (`attention_fallback`: a product, a cap, a mask fill, a bias, a
//! softmax and a product, each differentiated by Burn's autodiff) in f64: the output and the
//! gradients of the queries, keys and values (and of a bias that takes one) of `sum(output ·
//! weights)`, weights fixed and uneven. The device
//! and the comparison are `drop_in.rs`'s.

use burn::tensor::module::attention_fallback;
use burn::tensor::ops::AttentionModuleOptions;
use burn::tensor::{Bool, DType, Tensor, TensorData};
use towers_kernels::attention;
use towers_testing::nets::pattern;

use crate::drop_in::{assert_agree, device};

/// An attention's inputs and options: queries `[batch, heads, seq_q, d]`, keys `[batch, heads,
/// seq_k, d]`, values `[batch, heads, seq_k, d_v]`, a mask, an additive bias, the options.
struct Case {
    what: &'static str,
    q: Tensor<4>,
    k: Tensor<4>,
    v: Tensor<4>,
    mask: Option<Tensor<4, Bool>>,
    bias: Option<Tensor<4>>,
    options: AttentionModuleOptions,
}

/// `[batch, heads, seq_q, seq_k, d, d_v]` as queries, keys and values of fixed patterns, values
/// large enough (±2) that the weights are far from even.
fn inputs([b, h, seq_q, seq_k, d, d_v]: [usize; 6]) -> [Tensor<4>; 3] {
    let device = device();
    [
        pattern([b, h, seq_q, d], 1, &device) * 10.0,
        pattern([b, h, seq_k, d], 2, &device) * 10.0,
        pattern([b, h, seq_k, d_v], 3, &device) * 5.0,
    ]
}

/// A mask of `dims` from `masked(index)`.
fn mask(dims: [usize; 4], masked: impl Fn(usize) -> bool) -> Tensor<4, Bool> {
    let values: Vec<bool> = (0..dims.iter().product()).map(masked).collect();
    Tensor::from_data(TensorData::new(values, dims), &device())
}

fn options(scale: Option<f64>, is_causal: bool) -> AttentionModuleOptions {
    AttentionModuleOptions {
        scale,
        is_causal,
        ..Default::default()
    }
}

fn cases() -> Vec<Case> {
    let plain = |what, dims, mask, options| {
        let [q, k, v] = inputs(dims);
        Case {
            what,
            q,
            k,
            v,
            mask,
            bias: None,
            options,
        }
    };
    let [b, h, s] = [2, 3, 17];
    // Every seventh score masked, and all of query 3's keys of the second head of the first
    // item (its output zeros, as Burn's).
    let scattered = mask([b, h, s, s], |i| i % 7 == 2 || (i / s) == s + 3);
    let padding = mask([b, 1, 1, s], |i| i >= 2 * s - 4);
    let mut cases = vec![
        plain(
            "self-attention",
            [b, h, s, s, 8, 8],
            None,
            options(None, false),
        ),
        plain(
            "5 queries at the end of 37 keys, causal, values wider than keys",
            [1, 2, 5, 37, 8, 12],
            None,
            options(None, true),
        ),
        plain(
            "300 keys (queries in blocks, each with the keys it sees), causal, scale 0.3",
            [2, 2, 300, 300, 16, 16],
            None,
            options(Some(0.3), true),
        ),
        plain(
            "200 queries to 10 keys, causal: the first 190 see none (blocks of them skipped)",
            [1, 2, 200, 10, 8, 8],
            None,
            options(None, true),
        ),
        plain(
            "a mask of every score",
            [b, h, s, s, 8, 8],
            Some(scattered),
            options(None, false),
        ),
        plain(
            "a padding mask broadcast over heads and queries",
            [b, h, s, s, 8, 8],
            Some(padding),
            options(None, false),
        ),
    ];
    // Queries, keys and values read in place from `[batch, seq, heads, d]` (multi-head
    // attention's layout before its heads are swapped forward).
    let [q, k, v] = inputs([b, s, h, h, 8, 8]).map(|x| x.swap_dims(1, 2));
    cases.push(Case {
        what: "strided queries, keys and values",
        q,
        k,
        v,
        mask: None,
        bias: None,
        options: options(None, false),
    });
    cases.extend(capped_and_biased_cases([b, h, s]));
    cases
}

/// Burn's softcap and additive biases: ALiBi's (a slope per head times each key's distance back,
/// broadcast over the batch), one of every score with `-∞` where it masks, and the cap with
/// a causal mask and a padding mask.
fn capped_and_biased_cases([b, h, s]: [usize; 3]) -> Vec<Case> {
    let device = device();
    let distances: Vec<f32> = (0..h * s * s)
        .map(|i| {
            let (head, query, key) = (i / (s * s), i / s % s, i % s);
            -(query as f32 - key as f32).abs() / (1 << (head + 1)) as f32
        })
        .collect();
    let alibi = Tensor::<4>::from_data(TensorData::new(distances, [1, h, s, s]), &device);
    let float_mask = (pattern([b, h, s, s], 4, &device) * 3.0)
        .mask_fill(mask([b, h, s, s], |i| i % 5 == 1), f32::NEG_INFINITY);
    let capped = |cap, is_causal| AttentionModuleOptions {
        softcap: Some(cap),
        is_causal,
        ..Default::default()
    };
    let case = |what, mask, bias, options| {
        let [q, k, v] = inputs([b, h, s, s, 8, 8]);
        Case {
            what,
            q,
            k,
            v,
            mask,
            bias,
            options,
        }
    };
    vec![
        case("ALiBi's bias", None, Some(alibi), options(None, false)),
        case(
            "a bias of every score, -∞ where it masks",
            None,
            Some(float_mask),
            options(None, false),
        ),
        case("softcap 5, causal", None, None, capped(5.0, true)),
        case(
            "softcap 2 and a padding mask",
            Some(mask([b, 1, 1, s], |i| i >= 2 * s - 4)),
            None,
            capped(2.0, false),
        ),
    ]
}

/// The output of `forward` and the gradients of its three inputs.
fn output_and_grads(
    [q, k, v]: [Tensor<4>; 3],
    forward: impl Fn([Tensor<4>; 3]) -> Tensor<4>,
) -> [Tensor<4>; 4] {
    let [q, k, v] = [q, k, v].map(|x| x.detach().require_grad());
    let y = forward([q.clone(), k.clone(), v.clone()]);
    let weights = pattern(y.dims(), 99, &device()).cast(y.dtype()) + 1.0;
    let grads = (y.clone() * weights).sum().backward();
    let grad = |x: &Tensor<4>| x.grad(&grads).expect("a gradient").cast(DType::F32);
    [y.detach().cast(DType::F32), grad(&q), grad(&k), grad(&v)]
}

#[test]
fn attention_gives_f64_outputs_and_gradients() {
    for case in cases() {
        let Case {
            what,
            q,
            k,
            v,
            mask,
            bias,
            options,
        } = case;
        let ours = output_and_grads([q.clone(), k.clone(), v.clone()], |[q, k, v]| {
            attention(q, k, v, mask.clone(), bias.clone(), options)
        });
        let wide = [q, k, v].map(|x| x.cast(DType::F64));
        let wide_bias = bias.map(|bias| bias.cast(DType::F64));
        let want = output_and_grads(wide, |[q, k, v]| {
            attention_fallback(q, k, v, mask.clone(), wide_bias.clone(), options)
        });
        let names = [
            "output",
            "queries' gradient",
            "keys' gradient",
            "values' gradient",
        ];
        for ((ours, want), name) in ours.into_iter().zip(want).zip(names) {
            assert_agree(ours, want, 5e-6, &format!("{what}: {name}"));
        }
    }
}

/// A bias made of parameters (T5's learned relative positions: not the parameter itself, a
/// tensor made of it) takes Burn's composition, which gives its gradient (our kernel computes
/// none): the parameter's gradient as the f64 reference's.
#[test]
fn a_bias_that_takes_a_gradient_gets_burns() {
    let [q, k, v] = inputs([2, 3, 9, 9, 8, 8]);
    let bias = pattern([1, 3, 9, 9], 6, &device());
    let bias_gradient = |[q, k, v]: [Tensor<4>; 3], parameter: Tensor<4>, ours: bool| {
        let parameter = parameter.detach().require_grad();
        let bias = parameter.clone() * 2.0;
        let options = options(None, false);
        let y = match ours {
            true => attention(q, k, v, None, Some(bias.clone()), options),
            false => attention_fallback(q, k, v, None, Some(bias.clone()), options),
        };
        let weights = pattern(y.dims(), 99, &device()).cast(y.dtype()) + 1.0;
        let grads = (y * weights).sum().backward();
        let grad = parameter
            .grad(&grads)
            .expect("the bias's parameter's gradient");
        grad.cast(DType::F32)
    };
    let ours = bias_gradient([q.clone(), k.clone(), v.clone()], bias.clone(), true);
    let wide = [q, k, v].map(|x| x.cast(DType::F64));
    let want = bias_gradient(wide, bias.cast(DType::F64), false);
    assert_agree(ours, want, 5e-6, "the bias's parameter's gradient");
}
