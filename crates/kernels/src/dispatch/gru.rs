//! [`gru`] and [`bi_gru`]: Burn's `Gru::forward` and `BiGru::forward` with each direction's
//! recurrence as one op on flex.

#[cfg(feature = "flex")]
use burn::nn::activation::Activation;
use burn::nn::{BiGru, Gru};
use burn::tensor::Tensor;

#[cfg(feature = "flex")]
use crate::dispatch::flex_route;
#[cfg(feature = "flex")]
use crate::dispatch::gates::{
    both_directions, hidden, input_projection, joined_biases, joined_weights,
};

/// `gru.forward(x, state)` (`x` batch-first, as Burn's `Gru` takes it). On f32 flex tensors,
/// for a GRU as PyTorch's (sigmoid gates, a tanh candidate, the reset gate applied after the
/// hidden state's product: Burn's `reset_after`, its default; no clipping): the input's
/// projection for every step as one product (in this thread's
/// [`Precision`](crate::Precision)), then the recurrence forward and backward as one op, each
/// step one product of the hidden state and one pass over the gates (`crate::flex::recurrent`),
/// where Burn's composes each step of six dense layers and a dozen ops. Elsewhere Burn's.
pub fn gru(gru: &Gru, x: Tensor<3>, state: Option<Tensor<2>>) -> Tensor<3> {
    #[cfg(feature = "flex")]
    if flex_route::on_flex(&x) && gates_as_pytorchs(gru) {
        return by_recurrence(gru, x, state, false).0;
    }
    gru.forward(x, state)
}

/// `gru.forward(x, state)` for Burn's bidirectional GRU, each direction as [`gru`]'s: the two
/// outputs side by side, the two last hidden states stacked (forward, then reverse).
pub fn bi_gru(gru: &BiGru, x: Tensor<3>, state: Option<Tensor<3>>) -> (Tensor<3>, Tensor<3>) {
    #[cfg(feature = "flex")]
    if flex_route::on_flex(&x) && gates_as_pytorchs(&gru.forward) && gates_as_pytorchs(&gru.reverse)
    {
        let direction = |i: usize| {
            state
                .clone()
                .map(|state| state.narrow(0, i, 1).squeeze_dim(0))
        };
        let (output, states) = both_directions(
            x,
            gru.batch_first,
            |x| by_recurrence(&gru.forward, x, direction(0), false),
            |x| by_recurrence(&gru.reverse, x, direction(1), true),
        );
        return (output, Tensor::stack(states.to_vec(), 0));
    }
    gru.forward(x, state)
}

/// Whether `gru` computes PyTorch's `nn.GRU` step, which the recurrence kernel computes.
#[cfg(feature = "flex")]
fn gates_as_pytorchs(gru: &Gru) -> bool {
    matches!(gru.gate_activation, Activation::Sigmoid(_))
        && matches!(gru.hidden_activation, Activation::Tanh(_))
        && gru.reset_after
        && gru.clip.is_none()
}

/// [`gru`] of a batch-first `x` by the recurrence kernel, the steps last to first with
/// `reverse`: every step's hidden state and the last.
#[cfg(feature = "flex")]
fn by_recurrence(
    gru: &Gru,
    x: Tensor<3>,
    state: Option<Tensor<2>>,
    reverse: bool,
) -> (Tensor<3>, Tensor<2>) {
    let [batch, steps, _] = x.dims();
    let gates = [&gru.update_gate, &gru.reset_gate, &gru.new_gate];
    let xw = input_projection(x, &gates, false);
    let w_hh = joined_weights(&gates, hidden);
    let b_hh = joined_biases(&gates, hidden)
        .unwrap_or_else(|| Tensor::zeros([3 * gru.d_hidden], &xw.device()));
    let h0 = state.unwrap_or_else(|| Tensor::zeros([batch, gru.d_hidden], &xw.device()));
    assert_eq!(
        h0.dims(),
        [batch, gru.d_hidden],
        "the GRU's initial hidden state: [batch, d_hidden] for this input and layer"
    );
    let out = flex_route::gru_recurrence(xw, w_hh, b_hh, h0, reverse);
    let last = if reverse { 0 } else { steps - 1 };
    let hidden = out.clone().narrow(1, last, 1).squeeze_dim(1);
    (out, hidden)
}
