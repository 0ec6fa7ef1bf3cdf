//! The drop-in `nn::Gru` and `nn::BiGru` against Burn's layers: the same outputs, last states
//! and gradients (of the input, every weight and bias, the initial state) from the same
//! parameters, with and without biases or an initial state, both directions and layouts;
//! Burn's own where the kernel does not apply; records loaded both ways. The device and the
//! comparison are `drop_in.rs`'s, the runs `recurrent.rs`'s.

use burn::nn::activation::ActivationConfig;
use burn::tensor::Tensor;
use towers_kernels::nn::{BiGruConfig, GruConfig};
use towers_testing::nets::{pattern, seeded};

use crate::drop_in::{assert_records_load_both_ways, device};
use crate::recurrent::{assert_runs_agree, run, scaled};

/// A GRU's output and its last step's hidden state.
fn with_last(output: Tensor<3>) -> (Tensor<3>, Tensor<2>) {
    let steps = output.dims()[1];
    let last = output.clone().narrow(1, steps - 1, 1).squeeze_dim(1);
    (output, last)
}

/// With and without biases and an initial state, one step and a batch of one; inputs and
/// weights large enough that the gates saturate in places.
#[test]
fn gru_gives_burns_outputs_state_and_gradients() {
    let device = device();
    // (batch, steps, input, hidden, bias, initial state)
    let cases = [
        (3, 7, 5, 9, true, true),
        (3, 7, 5, 9, false, false),
        (4, 5, 6, 20, true, false),
        (1, 1, 3, 4, true, true),
    ];
    for (batch, steps, d_input, hidden, bias, with_state) in cases {
        let what = format!(
            "batch {batch}, {steps} steps, {d_input} -> {hidden}, bias: {bias}, initial state: \
             {with_state}"
        );
        let ours = scaled(
            seeded(GruConfig::new(d_input, hidden, bias).init(&device), 11),
            4.0,
        );
        let burns: burn::nn::Gru = ours.clone().into();
        let x = pattern([batch, steps, d_input], 13, &device) * 5.0;
        let state = with_state.then(|| pattern([batch, hidden], 17, &device) * 5.0);
        let got = run(&ours, &x, state.as_ref(), |x, s| {
            with_last(ours.forward(x, s))
        });
        let want = run(&burns, &x, state.as_ref(), |x, s| {
            with_last(burns.forward(x, s))
        });
        assert_runs_agree(got, want, &what);
    }
}

/// Both directions, batch-first and not, with and without an initial state.
#[test]
fn bi_gru_gives_burns_outputs_state_and_gradients() {
    let device = device();
    let (batch, steps, d_input, hidden) = (3, 6, 5, 7);
    for (batch_first, with_state) in [(true, true), (false, false)] {
        let what = format!("bidirectional, batch first: {batch_first}, state: {with_state}");
        let config = BiGruConfig::new(d_input, hidden, true).with_batch_first(batch_first);
        let ours = scaled(seeded(config.init(&device), 43), 4.0);
        let burns: burn::nn::BiGru = ours.clone().into();
        let dims = match batch_first {
            true => [batch, steps, d_input],
            false => [steps, batch, d_input],
        };
        let x = pattern(dims, 47, &device) * 5.0;
        let state = with_state.then(|| pattern([2, batch, hidden], 53, &device) * 5.0);
        let got = run(&ours, &x, state.as_ref(), |x, s| ours.forward(x, s));
        let want = run(&burns, &x, state.as_ref(), |x, s| burns.forward(x, s));
        assert_runs_agree(got, want, &what);
    }
}

/// Settings the kernel does not compute (the reset gate before the product, a clipped state,
/// other activations) give Burn's layer's results; records load both ways.
#[test]
fn gru_settings_the_kernel_lacks_are_burns_and_records_load_both_ways() {
    let device = device();
    let base = || GruConfig::new(4, 6, true);
    let configs = [
        ("reset before", base().with_reset_after(false)),
        ("clip", base().with_clip(Some(0.5))),
        (
            "ReLU",
            base().with_hidden_activation(ActivationConfig::Relu),
        ),
    ];
    for (what, config) in configs {
        let ours = scaled(seeded(config.init(&device), 23), 4.0);
        let burns: burn::nn::Gru = ours.clone().into();
        let x = pattern([2, 5, 4], 29, &device) * 5.0;
        let got = run(&ours, &x, None, |x, s| with_last(ours.forward(x, s)));
        let want = run(&burns, &x, None, |x, s| with_last(burns.forward(x, s)));
        assert_runs_agree(got, want, what);
    }
    let ours = seeded(GruConfig::new(3, 5, true).init(&device), 31);
    let burn_gru = || burn::nn::GruConfig::new(3, 5, true).init(&device);
    let [burns, burns_again] = [37, 41].map(|seed| seeded(burn_gru(), seed));
    assert_records_load_both_ways(ours, burns, burns_again);
    let ours = seeded(BiGruConfig::new(3, 4, false).init(&device), 43);
    let burn_bi = || burn::nn::BiGruConfig::new(3, 4, false).init(&device);
    let [burns, burns_again] = [47, 53].map(|seed| seeded(burn_bi(), seed));
    assert_records_load_both_ways(ours, burns, burns_again);
}
