//! [`ConvByProduct`] under autodiff: Burn's convolution forward on the inner backend, recorded
//! with a backward pass of its own: a weight gradient of one product, and an input gradient
//! that is a forward convolution.

use burn::backend::Autodiff;
use burn::backend::autodiff::NodeId;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, TensorMetadata};
use burn::tensor::Shape;

use super::ConvShape;
use super::extension::ConvByProduct;
use super::spread::ConvSpread;
use super::windows::{ConvWindows, Windows, rows_by_views};
use crate::cubecl_device::channel_columns;

impl<B: ConvWindows + ConvSpread, C: CheckpointStrategy> ConvByProduct for Autodiff<B, C> {
    fn towers_conv2d_by_product(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        stride: [usize; 2],
        padding: [usize; 4],
    ) -> FloatTensor<Self> {
        let shape = ConvShape::from_flat(stride, padding);
        match ConvByProductBackward
            .prepare::<C>([x.node(), weight.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(mut prep) => {
                let x_state = prep.checkpoint(&x);
                let weight_state = prep.checkpoint(&weight);
                let (x, weight) = (x.into_primitive(), weight.into_primitive());
                let out = B::conv2d(x, weight, None, shape.options());
                prep.finish((x_state, weight_state, shape), out)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::conv2d(
                x.into_primitive(),
                weight.into_primitive(),
                None,
                shape.options(),
            )),
        }
    }
}

#[derive(Debug)]
struct ConvByProductBackward;

impl<B: ConvWindows + ConvSpread> Backward<B, 2> for ConvByProductBackward {
    /// The input's and the kernel's nodes, and the convolution's shape.
    type State = (NodeId, NodeId, ConvShape);

    fn backward(
        self,
        ops: Ops<Self::State, 2>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let [x_node, weight_node] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        let (x_state, weight_state, shape) = ops.state;
        let x: FloatTensor<B> = checkpointer.retrieve_node_output(x_state);
        let weight: FloatTensor<B> = checkpointer.retrieve_node_output(weight_state);
        if let Some(node) = x_node {
            let x_grad = input_gradient::<B>(x.clone(), weight.clone(), grad.clone(), shape);
            grads.register::<B>(node.id, x_grad);
        }
        if let Some(node) = weight_node {
            let kernel: [usize; 4] = weight.shape().dims();
            grads.register::<B>(node.id, weight_gradient::<B>(x, grad, kernel, shape));
        }
    }
}

/// `∂L/∂x` from `grad = ∂L/∂y`: the forward convolution, at stride 1, of `grad` spread out by
/// the stride (`s - 1` zeros after each value: where no window started) by the kernel turned
/// around (input and output channels swapped, taps reversed), padded by the kernel less one
/// less the forward's padding before and as much as gives the input's size after. Under SAME at
/// stride 1 with as many channels out as in, that is the forward's very shape, tuned already.
/// A 1x1 kernel at stride 1 without padding: one product ([`pointwise_input_gradient`]). Where
/// the forward padded a side by as much as the kernel, Burn's `conv2d_x_backward` (a transposed
/// convolution).
fn input_gradient<B: ConvSpread>(
    x: FloatTensor<B>,
    weight: FloatTensor<B>,
    grad: FloatTensor<B>,
    shape: ConvShape,
) -> FloatTensor<B> {
    let [_, _, h, w] = x.shape().dims();
    let [_, _, kh, kw] = weight.shape().dims();
    let ((top, bottom), (left, right)) = shape.padding;
    if top.max(bottom) >= kh || left.max(right) >= kw {
        return B::conv2d_x_backward(x, weight, grad, shape.options());
    }
    if [kh, kw] == [1, 1] && shape.stride == [1, 1] && shape.flat_padding() == [0; 4] {
        return pointwise_input_gradient::<B>(weight, grad);
    }
    let [_, _, oh, ow] = grad.shape().dims();
    let [sh, sw] = shape.stride;
    let spread = match [sh, sw] {
        [1, 1] => grad,
        stride => B::towers_conv_spread(grad, stride),
    };
    // Turned as `[c, kh, kw, out]` (the flip's copy laid out so), then viewed as `[c, out, kh,
    // kw]`: its channels lie last, where Burn's GPU convolutions read them, so the convolution
    // copies it no further.
    let turned = B::float_flip(B::float_permute(weight, &[1, 2, 3, 0]), &[1, 2]);
    let turned = B::float_permute(turned, &[0, 3, 1, 2]);
    // The spread gradient's last value sits at `s·(o - 1)`; what follows up to the input's
    // last place (plus the forward's padding before) is zeros, padded on.
    let around = ConvShape {
        stride: [1, 1],
        padding: (
            (kh - 1 - top, h + top - sh * (oh - 1) - 1),
            (kw - 1 - left, w + left - sw * (ow - 1) - 1),
        ),
    };
    B::conv2d(spread, turned, None, around.options())
}

/// `∂L/∂x` of a 1x1 convolution at stride 1 without padding: the output gradient's rows
/// `[n·h·w, out]` times the kernel `[out, c]`, laid back as `[n, c, h, w]` (channels last in
/// memory): one product, where the turned kernel took a copy of the weight first (Inception
/// v3's backward pass on lavapipe 40 launches fewer, ResNet-50's 33). The rows are a view where
/// `grad` lies channels last, as the batch norm's and ReLU's gradients before it leave it.
fn pointwise_input_gradient<B: Backend>(
    weight: FloatTensor<B>,
    grad: FloatTensor<B>,
) -> FloatTensor<B> {
    let [n, out, h, w] = grad.shape().dims();
    let c = weight.shape()[1];
    let kernel = B::float_reshape(weight, Shape::new([out, c]));
    let product = B::float_matmul(channel_columns::<B>(grad), kernel);
    let product = B::float_reshape(product, Shape::new([n, h, w, c]));
    B::float_permute(product, &[0, 3, 1, 2])
}

/// `∂L/∂weight` `[out, c, kh, kw]` from the input `x` `[n, c, h, w]` and `grad = ∂L/∂y`
/// `[n, out, oh, ow]`: `grad` as `[out, n·oh·ow]` times the input's windows as rows
/// `[n·oh·ow, c·kh·kw]` (each output place's window of the zero-padded input: `windows/`, one
/// kernel on Burn's CubeCL devices): one product, tuned once for the convolution.
///
/// `grad` enters the product as the transpose of its rows `[n·oh·ow, out]`, a view where it
/// lies channels last, as Burn's GPU convolutions write their outputs and element-wise ops
/// keep them (a copy otherwise, as `[out, n·oh·ow]` always was): ResNet-50's backward pass on
/// lavapipe launched 56 copies fewer (689 to 633 kernels), CIFAR-10's one.
fn weight_gradient<B: ConvWindows>(
    x: FloatTensor<B>,
    grad: FloatTensor<B>,
    kernel: [usize; 4],
    shape: ConvShape,
) -> FloatTensor<B> {
    let [out, c, kh, kw] = kernel;
    let [_, _, oh, ow] = grad.shape().dims();
    let windows = Windows {
        kernel: [kh, kw],
        shape,
        places: [oh, ow],
    };
    // A 1x1 window without padding is a view of an input laid channels last (at stride 1):
    // Burn's ops copy only where it is not; the kernel always writes the rows.
    let rows = match windows.is_pointwise() {
        true => rows_by_views::<B>(x, windows),
        false => B::towers_conv_windows(x, windows),
    };
    let product = B::float_matmul(B::float_transpose(channel_columns::<B>(grad)), rows);
    B::float_reshape(product, Shape::new([out, c, kh, kw]))
}
