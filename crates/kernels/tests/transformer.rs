//! The drop-in transformer encoder and decoder against Burn's made of them (`From`): the same
//! outputs and gradients (inputs and parameters of each kind), pre-norm and post-norm, masked;
//! records saved from either loaded into the other, configs saved from ours loaded as Burn's,
//! ours displayed as Burn's.

use burn::module::Param;
use burn::nn::activation::ActivationConfig;
use burn::nn::attention::generate_autoregressive_mask;
use burn::tensor::{Bool, Device, Tensor, TensorData};
use towers_kernels::nn::transformer::{
    TransformerDecoderConfig, TransformerDecoderInput, TransformerEncoderConfig,
    TransformerEncoderInput,
};
use towers_testing::nets::{pattern, seeded};

use crate::drop_in::{assert_agree, assert_records_load_both_ways, device};

/// `[batch, seq]` with the last place of the last sequence and the first of the first `true`
/// (padding): under an autoregressive mask, the first query of the first sequence then sees no
/// key, and weighs them all evenly (all its scores Burn's `min_float`), its gradient none.
fn last_padded(batch: usize, seq: usize, device: &Device) -> Tensor<2, Bool> {
    let mask: Vec<bool> = (0..batch * seq)
        .map(|i| i == batch * seq - 1 || i == 0)
        .collect();
    Tensor::from_data(TensorData::new(mask, [batch, seq]), device)
}

/// Panics unless each pair, ours and Burn's, has the same gradient within 1e-5.
fn assert_same_gradients<const D: usize>(
    pairs: &[(&Param<Tensor<D>>, &Param<Tensor<D>>, &str)],
    [got, want]: [&burn::tensor::Gradients; 2],
    what: &str,
) {
    for (ours, burns, name) in pairs {
        let (ours, burns) = (ours.val().grad(got), burns.val().grad(want));
        assert_agree(
            ours.unwrap(),
            burns.unwrap(),
            1e-5,
            &format!("{what}: {name}"),
        );
    }
}

/// `y` (detached) and the gradients of `sum(y · weights)`.
fn weighted_backward(y: Tensor<3>, weights: &Tensor<3>) -> (Tensor<3>, burn::tensor::Gradients) {
    let grads = (y.clone() * weights.clone()).sum().backward();
    (y.detach(), grads)
}

/// Post-norm with GELU and pre-norm with ReLU (the norms' order differs between the two), and
/// with a leaky ReLU (an activation with a setting) and SwiGLU (one with parameters, across the
/// feed-forward network's 32 features), both on the drop-ins' kernels; two layers, padding and
/// autoregressive masks.
fn layer_settings() -> [(bool, ActivationConfig); 4] {
    let leaky = burn::nn::LeakyReluConfig::new().with_negative_slope(0.2);
    [
        (false, ActivationConfig::Gelu),
        (true, ActivationConfig::Relu),
        (false, ActivationConfig::LeakyRelu(leaky)),
        (
            true,
            ActivationConfig::SwiGlu(burn::nn::SwiGluConfig::new(32, 32)),
        ),
    ]
}

#[test]
fn transformer_encoder_gives_burns_outputs_and_gradients() {
    let device = device();
    let (batch, seq, d_model) = (2, 6, 16);
    for (norm_first, activation) in layer_settings() {
        let what = format!("encoder, norm first: {norm_first}, {activation:?}");
        let config = TransformerEncoderConfig::new(d_model, 32, 4, 2)
            .with_dropout(0.0)
            .with_norm_first(norm_first)
            .with_activation(activation);
        let ours = seeded(config.init(&device), 23);
        let burns: burn::nn::transformer::TransformerEncoder = ours.clone().into();
        let x = (pattern([batch, seq, d_model], 29, &device) * 5.0).require_grad();
        let input = TransformerEncoderInput::new(x.clone())
            .mask_pad(last_padded(batch, seq, &device))
            .mask_attn(generate_autoregressive_mask(batch, seq, &device));
        let weights = pattern([batch, seq, d_model], 31, &device) + 1.0;
        let run = |y| weighted_backward(y, &weights);
        let (got, got_grads) = run(ours.forward(input.clone()));
        let (want, want_grads) = run(burns.forward(input.into()));
        assert_agree(got, want, 1e-5, &format!("{what}: output"));
        let (dx, want_dx) = (x.grad(&got_grads), x.grad(&want_grads));
        let input_gradient = format!("{what}: input gradient");
        assert_agree(dx.unwrap(), want_dx.unwrap(), 1e-5, &input_gradient);
        let (first, last) = (
            (&ours.layers[0], &burns.layers[0]),
            (&ours.layers[1], &burns.layers[1]),
        );
        let grads = [&got_grads, &want_grads];
        let weights = [
            (
                &first.0.mha.value.weight,
                &first.1.mha.value.weight,
                "value weight",
            ),
            (
                &first.0.mha.query.weight,
                &first.1.mha.query.weight,
                "query weight",
            ),
            (&last.0.mha.key.weight, &last.1.mha.key.weight, "key weight"),
            (
                &last.0.pwff.linear_inner.weight,
                &last.1.pwff.linear_inner.weight,
                "inner weight",
            ),
            (
                &last.0.pwff.linear_outer.weight,
                &last.1.pwff.linear_outer.weight,
                "outer weight",
            ),
        ];
        assert_same_gradients(&weights, grads, &what);
        let scales = [
            (
                &first.0.norm_1.gamma,
                &first.1.norm_1.gamma,
                "first norm_1's scale",
            ),
            (
                &last.0.norm_2.gamma,
                &last.1.norm_2.gamma,
                "last norm_2's scale",
            ),
        ];
        assert_same_gradients(&scales, grads, &what);
    }
}

/// Targets of 5 attending to themselves (autoregressive, the last one padding) and to a memory
/// of 7 (its last place padding).
#[test]
fn transformer_decoder_gives_burns_outputs_and_gradients() {
    let device = device();
    let (batch, seq, memory_seq, d_model) = (2, 5, 7, 16);
    for (norm_first, activation) in layer_settings() {
        let what = format!("decoder, norm first: {norm_first}, {activation:?}");
        let config = TransformerDecoderConfig::new(d_model, 32, 4, 2)
            .with_dropout(0.0)
            .with_norm_first(norm_first)
            .with_activation(activation);
        let ours = seeded(config.init(&device), 37);
        let burns: burn::nn::transformer::TransformerDecoder = ours.clone().into();
        let target = (pattern([batch, seq, d_model], 41, &device) * 5.0).require_grad();
        let memory = (pattern([batch, memory_seq, d_model], 43, &device) * 5.0).require_grad();
        let input = TransformerDecoderInput::new(target.clone(), memory.clone())
            .target_mask_pad(last_padded(batch, seq, &device))
            .target_mask_attn(generate_autoregressive_mask(batch, seq, &device))
            .memory_mask_pad(last_padded(batch, memory_seq, &device));
        let weights = pattern([batch, seq, d_model], 47, &device) + 1.0;
        let run = |y| weighted_backward(y, &weights);
        let (got, got_grads) = run(ours.forward(input.clone()));
        let (want, want_grads) = run(burns.forward(input.into()));
        assert_agree(got, want, 1e-5, &format!("{what}: output"));
        for (tensor, name) in [(&target, "target"), (&memory, "memory")] {
            let (got, want) = (tensor.grad(&got_grads), tensor.grad(&want_grads));
            let name = format!("{what}: {name} gradient");
            assert_agree(got.unwrap(), want.unwrap(), 1e-5, &name);
        }
        let (first, last) = (
            (&ours.layers[0], &burns.layers[0]),
            (&ours.layers[1], &burns.layers[1]),
        );
        let grads = [&got_grads, &want_grads];
        let weights = [
            (
                &first.0.self_attn.query.weight,
                &first.1.self_attn.query.weight,
                "self query weight",
            ),
            (
                &first.0.cross_attn.key.weight,
                &first.1.cross_attn.key.weight,
                "cross key weight",
            ),
            (
                &last.0.pwff.linear_outer.weight,
                &last.1.pwff.linear_outer.weight,
                "outer weight",
            ),
        ];
        assert_same_gradients(&weights, grads, &what);
        let scales = [
            (
                &first.0.norm_1.gamma,
                &first.1.norm_1.gamma,
                "first norm_1's scale",
            ),
            (
                &first.0.norm_2.gamma,
                &first.1.norm_2.gamma,
                "first norm_2's scale",
            ),
            (
                &last.0.norm_3.gamma,
                &last.1.norm_3.gamma,
                "last norm_3's scale",
            ),
        ];
        assert_same_gradients(&scales, grads, &what);
    }
}

#[test]
fn transformer_records_and_configs_are_burns() {
    use burn::config::Config;
    let device = device();
    let dir = tempfile::tempdir().unwrap();
    let encoder = TransformerEncoderConfig::new(8, 16, 2, 2)
        .with_norm_first(true)
        .with_layer_norm_eps(1e-6);
    let burns_encoder = burn::nn::transformer::TransformerEncoderConfig::from(&encoder);
    assert_records_load_both_ways(
        seeded(encoder.init(&device), 6),
        seeded(burns_encoder.init(&device), 5),
        seeded(burns_encoder.init(&device), 7),
    );
    let decoder = TransformerDecoderConfig::new(8, 16, 2, 2).with_quiet_softmax(true);
    let burns_decoder = burn::nn::transformer::TransformerDecoderConfig::from(&decoder);
    assert_records_load_both_ways(
        seeded(decoder.init(&device), 6),
        seeded(burns_decoder.init(&device), 5),
        seeded(burns_decoder.init(&device), 7),
    );
    let file = dir.path().join("encoder.json");
    encoder.save(&file).unwrap();
    let loaded = burn::nn::transformer::TransformerEncoderConfig::load(&file).unwrap();
    assert_eq!(loaded.to_string(), burns_encoder.to_string());
    let file = dir.path().join("decoder.json");
    decoder.save(&file).unwrap();
    let loaded = burn::nn::transformer::TransformerDecoderConfig::load(&file).unwrap();
    assert_eq!(loaded.to_string(), burns_decoder.to_string());
}
