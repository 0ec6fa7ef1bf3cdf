//! [`activate`]: Burn's `Activation` enum (a layer chosen by config, as a transformer's
//! feed-forward network holds one) computed by the drop-ins where it names one of theirs.

use burn::nn::activation::Activation;
use burn::tensor::Tensor;

use crate::dispatch::{gelu, gelu_approximate, hard_swish, leaky_relu, prelu, sigmoid, tanh};
use crate::nn::activation::swiglu;

/// `activation` of every value of `x`: GELU (exact or approximated), hard swish, sigmoid, tanh,
/// leaky ReLU, PReLU and SwiGLU by this crate's kernels, every other activation by Burn's layer.
pub(crate) fn activate<const D: usize>(activation: &Activation, x: Tensor<D>) -> Tensor<D> {
    match activation {
        Activation::Gelu(layer) if layer.approximate => gelu_approximate(x),
        Activation::Gelu(_) => gelu(x),
        Activation::HardSwish(_) => hard_swish(x),
        Activation::Sigmoid(_) => sigmoid(x),
        Activation::Tanh(_) => tanh(x),
        Activation::LeakyRelu(layer) => leaky_relu(x, layer.negative_slope),
        Activation::SwiGlu(layer) => swiglu(layer, x),
        Activation::PRelu(layer) => prelu(layer, x),
        other => other.forward(x),
    }
}
