//! [`lstm`]: Burn's `Lstm::forward` with its recurrence as one op on flex.

#[cfg(feature = "flex")]
use burn::nn::GateController;
#[cfg(feature = "flex")]
use burn::nn::activation::Activation;
use burn::nn::{Lstm, LstmState};
use burn::tensor::Tensor;

#[cfg(feature = "flex")]
use crate::dispatch::channel_bias::add_channel_bias;
#[cfg(feature = "flex")]
use crate::dispatch::flex_route;
#[cfg(feature = "flex")]
use crate::dispatch::layer_ops::product;

/// `lstm.forward(x, state)`. On f32 flex tensors, for an LSTM as PyTorch's (sigmoid gates, tanh
/// cell and output, a forget gate of its own, no clipping): the input's projection for every
/// step as one product (in this thread's [`Precision`](crate::Precision)), then the recurrence
/// forward and backward as one op, each step one product of the hidden state and one pass over
/// the gates (`crate::flex::lstm`), where Burn's composes each step of eight dense layers and a
/// dozen ops. Elsewhere Burn's.
pub fn lstm(lstm: &Lstm, x: Tensor<3>, state: Option<LstmState<2>>) -> (Tensor<3>, LstmState<2>) {
    #[cfg(feature = "flex")]
    if flex_route::on_flex(&x) && gates_as_pytorchs(lstm) {
        return by_recurrence(lstm, x, state);
    }
    lstm.forward(x, state)
}

#[cfg(feature = "flex")]
/// Whether `lstm` computes PyTorch's `nn.LSTM` step, which the recurrence kernel computes.
fn gates_as_pytorchs(lstm: &Lstm) -> bool {
    matches!(lstm.gate_activation, Activation::Sigmoid(_))
        && matches!(lstm.cell_activation, Activation::Tanh(_))
        && matches!(lstm.hidden_activation, Activation::Tanh(_))
        && lstm.forget_gate.is_some()
        && !lstm.input_forget
        && lstm.clip.is_none()
}

/// [`lstm`] by the recurrence kernel, its gates joined in PyTorch's order.
#[cfg(feature = "flex")]
fn by_recurrence(
    lstm: &Lstm,
    x: Tensor<3>,
    state: Option<LstmState<2>>,
) -> (Tensor<3>, LstmState<2>) {
    let x = if lstm.batch_first {
        x
    } else {
        x.swap_dims(0, 1)
    };
    let [batch, steps, _] = x.dims();
    let forget = lstm
        .forget_gate
        .as_ref()
        .expect("checked by gates_as_pytorchs");
    let gates = [&lstm.input_gate, forget, &lstm.cell_gate, &lstm.output_gate];
    let joined = |weight: fn(&GateController) -> Tensor<2>| {
        Tensor::cat(gates.iter().map(|gate| weight(gate)).collect(), 1)
    };
    let xw = product(x, joined(|gate| gate.input_transform.weight.val()));
    let xw = match joined_bias(gates) {
        Some(bias) => add_channel_bias(xw, bias, 2),
        None => xw,
    };
    let w_hh = joined(|gate| gate.hidden_transform.weight.val());
    let (c0, h0) = match state {
        Some(state) => state.unpack(),
        None => LstmState::initial([batch, lstm.d_hidden], &xw.device()).unpack(),
    };
    let out = flex_route::lstm_recurrence(xw, w_hh, [h0, c0], lstm.reverse);
    let last = if lstm.reverse { 0 } else { steps - 1 };
    let hidden = out.clone().narrow(1, last, 1).squeeze_dim(1);
    let cell = out.clone().narrow(1, steps, 1).squeeze_dim(1);
    let output = out.narrow(1, 0, steps);
    let output = if lstm.batch_first {
        output
    } else {
        output.swap_dims(0, 1)
    };
    (output, LstmState::new(cell, hidden))
}

/// Each gate's two biases summed, the gates' side by side (a gate without any: zeros); `None`
/// where no gate has one.
#[cfg(feature = "flex")]
fn joined_bias(gates: [&GateController; 4]) -> Option<Tensor<1>> {
    let biases = gates.map(|gate| {
        let [input, hidden] = [&gate.input_transform, &gate.hidden_transform];
        let [input, hidden] = [input, hidden].map(|layer| layer.bias.as_ref().map(|b| b.val()));
        match (input, hidden) {
            (Some(input), Some(hidden)) => Some(input + hidden),
            (one, other) => one.or(other),
        }
    });
    let like = biases.iter().flatten().next()?.clone();
    let biases = biases.map(|bias| bias.unwrap_or_else(|| like.zeros_like()));
    Some(Tensor::cat(biases.to_vec(), 0))
}
