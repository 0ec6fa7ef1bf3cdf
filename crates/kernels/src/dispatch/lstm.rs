//! [`lstm`] and [`bi_lstm`]: Burn's `Lstm::forward` and `BiLstm::forward` with each
//! direction's recurrence as one op on flex.

#[cfg(feature = "flex")]
use burn::nn::activation::Activation;
use burn::nn::{BiLstm, Lstm, LstmState};
use burn::tensor::Tensor;
#[cfg(feature = "flex")]
use burn::tensor::s;

#[cfg(feature = "flex")]
use crate::dispatch::flex_route;
#[cfg(feature = "flex")]
use crate::dispatch::gates::{
    batch_first, both_directions, hidden, input_projection, joined_weights,
};

/// `lstm.forward(x, state)`. On f32 flex tensors, for an LSTM as PyTorch's (sigmoid gates, tanh
/// cell and output, a forget gate of its own, no clipping): the input's projection for every
/// step as one product (in this thread's [`Precision`](crate::Precision)), then the recurrence
/// forward and backward as one op, each step one product of the hidden state and one pass over
/// the gates (`crate::flex::recurrent`), where Burn's composes each step of eight dense layers
/// and a dozen ops. Elsewhere Burn's.
pub fn lstm(lstm: &Lstm, x: Tensor<3>, state: Option<LstmState<2>>) -> (Tensor<3>, LstmState<2>) {
    #[cfg(feature = "flex")]
    if flex_route::on_flex(&x) && gates_as_pytorchs(lstm) {
        let x = batch_first(x, lstm.batch_first);
        let (output, state) = by_recurrence(lstm, x, state, lstm.reverse);
        return (batch_first(output, lstm.batch_first), state);
    }
    lstm.forward(x, state)
}

/// `lstm.forward(x, state)` for Burn's bidirectional LSTM, each direction as [`lstm`]'s: the
/// two outputs side by side, the two last states stacked (forward, then reverse).
pub fn bi_lstm(
    lstm: &BiLstm,
    x: Tensor<3>,
    state: Option<LstmState<3>>,
) -> (Tensor<3>, LstmState<3>) {
    #[cfg(feature = "flex")]
    if flex_route::on_flex(&x)
        && gates_as_pytorchs(&lstm.forward)
        && gates_as_pytorchs(&lstm.reverse)
    {
        let direction = |i: usize| state.clone().map(|state| state.slice(s![i]).squeeze_dim(0));
        // As Burn's: the forward layer in its own direction, the reverse one last to first.
        let (output, states) = both_directions(
            x,
            lstm.batch_first,
            |x| by_recurrence(&lstm.forward, x, direction(0), lstm.forward.reverse),
            |x| by_recurrence(&lstm.reverse, x, direction(1), true),
        );
        return (output, LstmState::stack(states.to_vec(), 0));
    }
    lstm.forward(x, state)
}

/// Whether `lstm` computes PyTorch's `nn.LSTM` step, which the recurrence kernel computes.
#[cfg(feature = "flex")]
fn gates_as_pytorchs(lstm: &Lstm) -> bool {
    matches!(lstm.gate_activation, Activation::Sigmoid(_))
        && matches!(lstm.cell_activation, Activation::Tanh(_))
        && matches!(lstm.hidden_activation, Activation::Tanh(_))
        && lstm.forget_gate.is_some()
        && !lstm.input_forget
        && lstm.clip.is_none()
}

/// [`lstm`] of a batch-first `x` by the recurrence kernel, its gates joined in PyTorch's order,
/// the steps last to first with `reverse`.
#[cfg(feature = "flex")]
fn by_recurrence(
    lstm: &Lstm,
    x: Tensor<3>,
    state: Option<LstmState<2>>,
    reverse: bool,
) -> (Tensor<3>, LstmState<2>) {
    let [batch, steps, _] = x.dims();
    let forget = lstm.forget_gate.as_ref();
    let forget = forget.expect("checked by gates_as_pytorchs");
    let gates = [&lstm.input_gate, forget, &lstm.cell_gate, &lstm.output_gate];
    let xw = input_projection(x, &gates, true);
    let w_hh = joined_weights(&gates, hidden);
    let (c0, h0) = match state {
        Some(state) => state.unpack(),
        None => LstmState::initial([batch, lstm.d_hidden], &xw.device()).unpack(),
    };
    for (what, initial) in [("cell", &c0), ("hidden state", &h0)] {
        assert_eq!(
            initial.dims(),
            [batch, lstm.d_hidden],
            "the LSTM's initial {what}: [batch, d_hidden] for this input and layer"
        );
    }
    let out = flex_route::lstm_recurrence(xw, w_hh, [h0, c0], reverse);
    let last = if reverse { 0 } else { steps - 1 };
    let hidden = out.clone().narrow(1, last, 1).squeeze_dim(1);
    let cell = out.clone().narrow(1, steps, 1).squeeze_dim(1);
    (out.narrow(1, 0, steps), LstmState::new(cell, hidden))
}
