//! The drop-in `nn::Lstm` and `nn::BiLstm` against Burn's layers: the same outputs, final state
//! and gradients (of the input, every weight and bias, the initial state) from the same
//! parameters, in each direction and layout, with and without biases or an initial state, in
//! bf16 products; Burn's own where the kernel does not apply; records and configs saved from
//! either loaded into the other. The device and the comparison are `drop_in.rs`'s, the runs
//! `recurrent.rs`'s.

use burn::nn::LstmState;
use burn::nn::activation::ActivationConfig;
use towers_kernels::nn::{BiLstmConfig, LstmConfig};
use towers_testing::nets::{pattern, seeded};

use crate::drop_in::{assert_agree, assert_records_load_both_ways, device};
use crate::recurrent::{assert_runs_agree, run, scaled};

/// Batch-first and not, forward and reversed, with and without biases and an initial state,
/// one step and a batch of one; inputs and weights large enough that the gates saturate in
/// places.
#[test]
fn lstm_gives_burns_outputs_state_and_gradients() {
    let device = device();
    // (batch, steps, input, hidden, batch first, reverse, bias, initial state)
    let cases = [
        (3, 7, 5, 9, true, false, true, true),
        (3, 7, 5, 9, false, true, false, false),
        (4, 5, 6, 20, true, true, true, true),
        (1, 1, 3, 4, false, false, true, true),
    ];
    for (batch, steps, d_input, hidden, batch_first, reverse, bias, with_state) in cases {
        let what = format!(
            "batch {batch}, {steps} steps, {d_input} -> {hidden}, batch first: {batch_first}, \
             reverse: {reverse}, bias: {bias}, initial state: {with_state}"
        );
        let config = LstmConfig::new(d_input, hidden, bias)
            .with_batch_first(batch_first)
            .with_reverse(reverse);
        let ours = scaled(seeded(config.init(&device), 11), 4.0);
        let burns: burn::nn::Lstm = ours.clone().into();
        let dims = match batch_first {
            true => [batch, steps, d_input],
            false => [steps, batch, d_input],
        };
        let x = pattern(dims, 13, &device) * 5.0;
        let state = with_state.then(|| {
            let cell = pattern([batch, hidden], 17, &device) * 5.0;
            LstmState::new(cell, pattern([batch, hidden], 19, &device) * 5.0)
        });
        let got = run(&ours, &x, state.as_ref(), |x, s| ours.forward(x, s));
        let want = run(&burns, &x, state.as_ref(), |x, s| burns.forward(x, s));
        assert_runs_agree(got, want, &what);
    }
}

/// Both directions of a bidirectional LSTM, batch-first and not, with and without an initial
/// state.
#[test]
fn bi_lstm_gives_burns_outputs_state_and_gradients() {
    let device = device();
    let (batch, steps, d_input, hidden) = (3, 6, 5, 7);
    for (batch_first, with_state) in [(true, true), (false, false)] {
        let what = format!("bidirectional, batch first: {batch_first}, state: {with_state}");
        let config = BiLstmConfig::new(d_input, hidden, true).with_batch_first(batch_first);
        let ours = scaled(seeded(config.init(&device), 43), 4.0);
        let burns: burn::nn::BiLstm = ours.clone().into();
        let dims = match batch_first {
            true => [batch, steps, d_input],
            false => [steps, batch, d_input],
        };
        let x = pattern(dims, 47, &device) * 5.0;
        let state = with_state.then(|| {
            let cell = pattern([2, batch, hidden], 53, &device) * 5.0;
            LstmState::new(cell, pattern([2, batch, hidden], 59, &device) * 5.0)
        });
        let got = run(&ours, &x, state.as_ref(), |x, s| ours.forward(x, s));
        let want = run(&burns, &x, state.as_ref(), |x, s| burns.forward(x, s));
        assert_runs_agree(got, want, &what);
    }
}

/// In bf16 products (the thread's `Precision`), the input's projection takes them and the
/// recurrence stays in f32: within bf16's rounding of Burn's f32 layer, and not closer than
/// f32's own rounding.
#[test]
fn lstm_in_bf16_products_follows_burns_in_f32() {
    use towers_kernels::{Precision, with_precision};
    let device = device();
    let ours = scaled(seeded(LstmConfig::new(24, 16, true).init(&device), 71), 2.0);
    let burns: burn::nn::Lstm = ours.clone().into();
    let x = pattern([3, 6, 24], 73, &device) * 3.0;
    let got = with_precision(Precision::Bf16, || {
        run(&ours, &x, None, |x, s| ours.forward(x, s))
    });
    let want = run(&burns, &x, None, |x, s| burns.forward(x, s));
    let (got, want) = (got.values.into_iter(), want.values.into_iter());
    for ((got, want), name) in got.zip(want).zip(["output", "hidden", "cell"]) {
        // Rounded, so not f32's result to its rounding: the bf16 products were taken.
        let diff = towers_testing::compare::rel_diff(got.clone(), want.clone());
        assert!(
            diff > 1e-4,
            "bf16 products: {name} within {diff:e} of f32's"
        );
        assert_agree(got, want, 2e-2, &format!("bf16 products: {name}"));
    }
}

/// An initial state of another batch (here one row, which Burn's layer would broadcast) is
/// refused by name, not read past its end.
#[test]
#[should_panic(expected = "the LSTM's initial cell")]
fn an_initial_state_of_another_shape_is_refused() {
    let device = device();
    let lstm = LstmConfig::new(4, 6, true).init(&device);
    let state = LstmState::new(pattern([1, 6], 61, &device), pattern([1, 6], 67, &device));
    lstm.forward(pattern([3, 5, 4], 71, &device), Some(state));
}

/// Settings the kernel does not compute (a clipped cell, a coupled forget gate, other
/// activations) give Burn's layer's results as they are.
#[test]
fn lstm_settings_the_kernel_lacks_are_burns() {
    let device = device();
    let base = || LstmConfig::new(4, 6, true);
    let configs = [
        ("clip", base().with_clip(Some(0.5))),
        ("input forget", base().with_input_forget(true)),
        (
            "ReLU cell",
            base().with_cell_activation(ActivationConfig::Relu),
        ),
    ];
    for (what, config) in configs {
        let ours = scaled(seeded(config.init(&device), 23), 4.0);
        let burns: burn::nn::Lstm = ours.clone().into();
        let x = pattern([2, 5, 4], 29, &device) * 5.0;
        let got = run(&ours, &x, None, |x, s| ours.forward(x, s));
        let want = run(&burns, &x, None, |x, s| burns.forward(x, s));
        assert_runs_agree(got, want, what);
    }
}

#[test]
fn lstm_records_and_configs_load_both_ways() {
    let device = device();
    let config = LstmConfig::new(3, 5, true).with_reverse(true);
    let ours = seeded(config.init(&device), 31);
    let burns = seeded(burn::nn::LstmConfig::new(3, 5, true).init(&device), 37);
    let burns_again = seeded(burn::nn::LstmConfig::new(3, 5, true).init(&device), 41);
    assert_records_load_both_ways(ours, burns, burns_again);
    let bi = || burn::nn::BiLstmConfig::new(3, 4, false);
    let ours = seeded(BiLstmConfig::new(3, 4, false).init(&device), 43);
    let [burns, burns_again] = [47, 53].map(|seed| seeded(bi().init(&device), seed));
    assert_records_load_both_ways(ours, burns, burns_again);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.json");
    use burn::config::Config;
    config.save(&file).unwrap();
    let theirs = burn::nn::LstmConfig::load(&file).unwrap();
    assert!(theirs.reverse && theirs.bias && theirs.d_hidden == 5);
    theirs.with_clip(Some(2.0)).save(&file).unwrap();
    assert_eq!(LstmConfig::load(&file).unwrap().clip, Some(2.0));
}
