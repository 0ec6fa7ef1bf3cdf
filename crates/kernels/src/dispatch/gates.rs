//! What the recurrent layers' routes to the flex kernels share (`lstm.rs`, `gru.rs`): their
//! gates' dense layers joined side by side, in the order the recurrence kernels take, the
//! kernels' batch-first layout, and the two directions of a bidirectional layer.

use burn::nn::{GateController, Linear};
use burn::tensor::Tensor;

use crate::dispatch::channel_bias::add_channel_bias;
use crate::dispatch::layer_ops::product;

/// A gate's dense layer of the input.
pub(super) fn input(gate: &GateController) -> &Linear {
    &gate.input_transform
}

/// A gate's dense layer of the hidden state.
pub(super) fn hidden(gate: &GateController) -> &Linear {
    &gate.hidden_transform
}

/// The `side` layers' weights of `gates` side by side: `[d, gates · hidden]`.
pub(super) fn joined_weights(
    gates: &[&GateController],
    side: fn(&GateController) -> &Linear,
) -> Tensor<2> {
    Tensor::cat(
        gates.iter().map(|gate| side(gate).weight.val()).collect(),
        1,
    )
}

/// The `side` layers' biases of `gates` side by side (zeros for a layer without one); `None`
/// where none has one.
pub(super) fn joined_biases(
    gates: &[&GateController],
    side: fn(&GateController) -> &Linear,
) -> Option<Tensor<1>> {
    let biases: Vec<_> = gates
        .iter()
        .map(|gate| side(gate).bias.as_ref().map(|b| b.val()))
        .collect();
    let like = biases.iter().flatten().next()?.clone();
    let biases = biases
        .into_iter()
        .map(|b| b.unwrap_or_else(|| like.zeros_like()));
    Some(Tensor::cat(biases.collect(), 0))
}

/// The input's projection for every step, `x · w_ih + b_ih`, `[batch, steps, gates · hidden]`
/// (one product, in this thread's [`Precision`](crate::Precision)), and the hidden layers'
/// biases too where `with_hidden_biases` (an LSTM's, which add where the input's do).
pub(super) fn input_projection(
    x: Tensor<3>,
    gates: &[&GateController],
    with_hidden_biases: bool,
) -> Tensor<3> {
    let mut xw = product(x, joined_weights(gates, input));
    let sides: &[fn(&GateController) -> &Linear] = match with_hidden_biases {
        true => &[input, hidden],
        false => &[input],
    };
    for &side in sides {
        if let Some(bias) = joined_biases(gates, side) {
            xw = add_channel_bias(xw, bias, 2);
        }
    }
    xw
}

/// `x` with its first two dimensions swapped unless `batch_first` (both ways: `[steps, batch,
/// …]` to `[batch, steps, …]` and back).
pub(super) fn batch_first(x: Tensor<3>, batch_first: bool) -> Tensor<3> {
    if batch_first { x } else { x.swap_dims(0, 1) }
}

/// A bidirectional layer over `x` (`[steps, batch, …]` unless `is_batch_first`): `forward` and
/// `reverse` each given `x` batch-first, their outputs side by side in `x`'s layout, and their
/// last states (forward, then reverse).
pub(super) fn both_directions<S>(
    x: Tensor<3>,
    is_batch_first: bool,
    forward: impl FnOnce(Tensor<3>) -> (Tensor<3>, S),
    reverse: impl FnOnce(Tensor<3>) -> (Tensor<3>, S),
) -> (Tensor<3>, [S; 2]) {
    let x = batch_first(x, is_batch_first);
    let (forward, forward_state) = forward(x.clone());
    let (reverse, reverse_state) = reverse(x);
    let output = Tensor::cat(vec![forward, reverse], 2);
    (
        batch_first(output, is_batch_first),
        [forward_state, reverse_state],
    )
}
