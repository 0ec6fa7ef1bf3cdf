//! [`FlexKernels`] under autodiff: the forward pass on flex, recorded with a hand-written
//! backward pass (Burn derives none for an extension).

use std::fmt::Debug;
use std::sync::Arc;

use burn::backend::autodiff::NodeId;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Flex};
use burn_flex::FlexTensor;

use crate::extension::FlexKernels;
use crate::flex::activation::{Activation, relu6_backward, relu6_forward};
use crate::flex::attention::{self, RowScales, Scores};
use crate::flex::conv::bias_relu;
use crate::flex::conv::depth_windows::{self, DepthWindows};
use crate::flex::conv::depthwise::{self, DepthwiseGeometry};
use crate::flex::conv::passes::{
    ConvGeometry, forward, forward_bias_relu, input_grad, transposed, weight_grad,
};
use crate::flex::dropout::{self, DropoutMask};
use crate::flex::gemm::arithmetic::Arithmetic;
use crate::flex::gemm::matmul;
use crate::flex::interpolate;
use crate::flex::memory::{dims4, dims5};
use crate::flex::norm::batch_norm::{self, Statistics};
use crate::flex::norm::group_norm;
use crate::flex::norm::layer_norm::{self, RowNorm};
use crate::flex::norm::lrn::{LrnParams, LrnSaved, lrn_backward, lrn_forward};
use crate::flex::optimizer_update::Update;
use crate::flex::pool::avg_pool::{AvgPoolShape, avg_pool_backward, avg_pool_forward};
use crate::flex::pool::batch_norm_max_pool::{self, Maxima};
use crate::flex::pool::max_pool::{MaxPoolShape, max_pool_backward};
use crate::flex::pool::padded_max_pool::max_pool_forward_padded;
use crate::flex::pool::window_mean::{self, MeanWindows};
use crate::flex::prelu::{self, Channels};
use crate::flex::recurrent::gru::{self, GruSaved};
use crate::flex::recurrent::lstm::{self, LstmSaved};
use crate::flex::rotary;
use crate::flex::softmax;

impl<C: CheckpointStrategy> FlexKernels for Autodiff<Flex, C> {
    fn towers_max_pool2d(
        x: FloatTensor<Self>,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        ceil_mode: bool,
    ) -> FloatTensor<Self> {
        let shape = MaxPoolShape::new(kernel, stride, ceil_mode);
        let pool = |x| max_pool_forward_padded(x, shape, padding);
        match MaxPoolBackward
            .prepare::<C>([x.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let [_, _, h, w] = dims4(x.primitive());
                let (out, argmax) = pool(x.into_primitive());
                prep.finish((Arc::new(argmax), [h, w]), out)
            }
            OpsKind::UnTracked(prep) => prep.finish(pool(x.into_primitive()).0),
        }
    }

    fn towers_lrn(
        x: FloatTensor<Self>,
        radius: usize,
        bias: f32,
        alpha: f32,
        beta: f32,
    ) -> FloatTensor<Self> {
        let params = LrnParams::new(radius, bias, alpha, beta);
        match LrnBackward
            .prepare::<C>([x.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(mut prep) => {
                let x_state = prep.checkpoint(&x);
                let (y, saved) = lrn_forward(x.into_primitive(), params);
                prep.finish((x_state, saved, params), y)
            }
            OpsKind::UnTracked(prep) => prep.finish(lrn_forward(x.into_primitive(), params).0),
        }
    }

    fn towers_conv2d(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        stride: [usize; 2],
        padding: [usize; 2],
        bf16: bool,
    ) -> FloatTensor<Self> {
        let geometry = ConvGeometry { stride, padding };
        match ConvBackward
            .prepare::<C>([x.node(), weight.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(mut prep) => {
                let x_state = prep.checkpoint(&x);
                let weight_state = prep.checkpoint(&weight);
                let out = Flex::towers_conv2d(
                    x.into_primitive(),
                    weight.into_primitive(),
                    stride,
                    padding,
                    bf16,
                );
                let arithmetic = Arithmetic::new(bf16);
                prep.finish((x_state, weight_state, geometry, arithmetic), out)
            }
            OpsKind::UnTracked(prep) => prep.finish(Flex::towers_conv2d(
                x.into_primitive(),
                weight.into_primitive(),
                stride,
                padding,
                bf16,
            )),
        }
    }

    fn towers_conv_transpose2d(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        stride: [usize; 2],
        padding: [usize; 2],
        out: [usize; 2],
        bf16: bool,
    ) -> FloatTensor<Self> {
        let (geometry, arithmetic) = (ConvGeometry { stride, padding }, Arithmetic::new(bf16));
        match ConvTransposeBackward
            .prepare::<C>([x.node(), weight.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(mut prep) => {
                let x_state = prep.checkpoint(&x);
                let weight_state = prep.checkpoint(&weight);
                let (x, weight) = (x.into_primitive(), weight.into_primitive());
                let y = transposed(x, weight, geometry, out, arithmetic);
                prep.finish((x_state, weight_state, geometry, arithmetic), y)
            }
            OpsKind::UnTracked(prep) => {
                let (x, weight) = (x.into_primitive(), weight.into_primitive());
                prep.finish(transposed(x, weight, geometry, out, arithmetic))
            }
        }
    }

    fn towers_group_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        groups: usize,
        epsilon: f64,
    ) -> FloatTensor<Self> {
        let prep = GroupNormBackward
            .prepare::<C>([x.node(), gamma.node(), beta.node()])
            .compute_bound()
            .stateful();
        let [gamma, beta] = [gamma, beta].map(|t| t.into_primitive());
        let (y, moments) =
            group_norm::forward(x.primitive().clone(), [&gamma, &beta], groups, epsilon);
        match prep {
            OpsKind::Tracked(mut prep) => {
                let x_state = prep.checkpoint(&x);
                let state = (x_state, [gamma, beta], moments, (groups, epsilon));
                prep.finish(state, y)
            }
            OpsKind::UnTracked(prep) => prep.finish(y),
        }
    }

    fn towers_layer_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
        norm: RowNorm,
    ) -> FloatTensor<Self> {
        let prep = LayerNormBackward
            .prepare::<C>([x.node(), gamma.node(), beta.node()])
            .compute_bound()
            .stateful();
        let [gamma, beta] = [gamma, beta].map(|t| t.into_primitive());
        let (y, moments) =
            layer_norm::forward(x.primitive().clone(), [&gamma, &beta], epsilon, norm);
        match prep {
            OpsKind::Tracked(mut prep) => {
                let x_state = prep.checkpoint(&x);
                prep.finish((x_state, gamma, moments, norm), y)
            }
            OpsKind::UnTracked(prep) => prep.finish(y),
        }
    }

    fn towers_relu6(x: FloatTensor<Self>) -> FloatTensor<Self> {
        kept_output::<C>(x, relu6_forward, relu6_backward)
    }

    fn towers_activation(x: FloatTensor<Self>, activation: Activation) -> FloatTensor<Self> {
        match ActivationBackward
            .prepare::<C>([x.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let x = x.into_primitive();
                prep.finish((x.clone(), activation), activation.forward(x))
            }
            OpsKind::UnTracked(prep) => prep.finish(activation.forward(x.into_primitive())),
        }
    }

    fn towers_prelu(
        x: FloatTensor<Self>,
        alpha: FloatTensor<Self>,
        layout: Channels,
    ) -> FloatTensor<Self> {
        let prep = PreluBackward
            .prepare::<C>([x.node(), alpha.node()])
            .compute_bound()
            .stateful();
        let (x, alpha) = (x.into_primitive(), alpha.into_primitive());
        let y = prelu::forward(x.clone(), &alpha, layout);
        match prep {
            OpsKind::Tracked(prep) => prep.finish((x, alpha, layout), y),
            OpsKind::UnTracked(prep) => prep.finish(y),
        }
    }

    fn towers_softmax(x: FloatTensor<Self>, quiet: bool) -> FloatTensor<Self> {
        kept_output::<C>(x, |x| softmax::forward(x, quiet), softmax::backward)
    }

    fn towers_dropout(x: FloatTensor<Self>, prob: f64, seed: u64) -> FloatTensor<Self> {
        // Backward, the gradient through the same mask, drawn again from the seed.
        let mask = DropoutMask::new(prob, seed);
        with_state::<C, _>(
            x,
            mask,
            |x, &mask| dropout::forward(x, mask),
            |mask, grad| dropout::backward(grad, mask),
        )
    }

    fn towers_bilinear(
        x: FloatTensor<Self>,
        out: [usize; 2],
        align_corners: bool,
    ) -> FloatTensor<Self> {
        let state = (dims4(x.primitive()), align_corners);
        with_state::<C, _>(
            x,
            state,
            |x, _| interpolate::forward(x, out, align_corners),
            |(input, align_corners), grad| interpolate::backward(input, grad, align_corners),
        )
    }

    fn towers_lstm(
        xw: FloatTensor<Self>,
        w_hh: FloatTensor<Self>,
        h0: FloatTensor<Self>,
        c0: FloatTensor<Self>,
        reverse: bool,
    ) -> FloatTensor<Self> {
        let prep = LstmBackward
            .prepare::<C>([xw.node(), w_hh.node(), h0.node(), c0.node()])
            .compute_bound()
            .stateful();
        let [w_hh, h0, c0] = [w_hh, h0, c0].map(|t| t.into_primitive());
        let (out, saved) = lstm::forward(xw.into_primitive(), &w_hh, [&h0, &c0], reverse);
        match prep {
            OpsKind::Tracked(prep) => {
                let state = (Arc::new(saved), [w_hh, h0, c0, out.clone()], reverse);
                prep.finish(state, out)
            }
            OpsKind::UnTracked(prep) => prep.finish(out),
        }
    }

    fn towers_gru(
        xw: FloatTensor<Self>,
        w_hh: FloatTensor<Self>,
        b_hh: FloatTensor<Self>,
        h0: FloatTensor<Self>,
        reverse: bool,
    ) -> FloatTensor<Self> {
        let prep = GruBackward
            .prepare::<C>([xw.node(), w_hh.node(), b_hh.node(), h0.node()])
            .compute_bound()
            .stateful();
        let [w_hh, b_hh, h0] = [w_hh, b_hh, h0].map(|t| t.into_primitive());
        let (out, saved) = gru::forward(xw.into_primitive(), [&w_hh, &b_hh], &h0, reverse);
        match prep {
            OpsKind::Tracked(prep) => {
                let state = (Arc::new(saved), [w_hh, h0, out.clone()], reverse);
                prep.finish(state, out)
            }
            OpsKind::UnTracked(prep) => prep.finish(out),
        }
    }

    fn towers_depthwise_conv2d(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        stride: [usize; 2],
        padding: [usize; 2],
        out: [usize; 2],
    ) -> FloatTensor<Self> {
        let geometry = DepthwiseGeometry {
            stride,
            padding,
            out,
        };
        match DepthwiseBackward
            .prepare::<C>([x.node(), weight.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(mut prep) => {
                let x_state = prep.checkpoint(&x);
                let weight_state = prep.checkpoint(&weight);
                let y = depthwise::forward(x.into_primitive(), weight.into_primitive(), geometry);
                prep.finish((x_state, weight_state, geometry), y)
            }
            OpsKind::UnTracked(prep) => prep.finish(depthwise::forward(
                x.into_primitive(),
                weight.into_primitive(),
                geometry,
            )),
        }
    }

    fn towers_dense_product(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        arithmetic: Arithmetic,
    ) -> FloatTensor<Self> {
        match MatmulBackward
            .prepare::<C>([x.node(), w.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(mut prep) => {
                let x_state = prep.checkpoint(&x);
                let w_state = prep.checkpoint(&w);
                let out = matmul::forward(x.into_primitive(), w.into_primitive(), arithmetic);
                prep.finish((x_state, w_state, arithmetic), out)
            }
            OpsKind::UnTracked(prep) => {
                let out = matmul::forward(x.into_primitive(), w.into_primitive(), arithmetic);
                prep.finish(out)
            }
        }
    }

    fn towers_avg_pool2d(
        x: FloatTensor<Self>,
        kernel: [usize; 2],
        padding: [usize; 2],
        counts_padding: bool,
    ) -> FloatTensor<Self> {
        let shape = AvgPoolShape {
            kernel,
            padding,
            counts_padding,
        };
        let [_, _, h, w] = dims4(x.primitive());
        with_state::<C, _>(
            x,
            ([h, w], shape),
            |x, &(_, shape)| avg_pool_forward(x, shape),
            |(plane, shape), grad| avg_pool_backward(grad, plane, shape),
        )
    }

    fn towers_window_mean(x: FloatTensor<Self>, windows: MeanWindows) -> FloatTensor<Self> {
        let state = (dims4(x.primitive()), windows);
        with_state::<C, _>(
            x,
            state,
            |x, &(_, windows)| window_mean::forward(x, windows),
            |(input, windows), grad| window_mean::backward(input, grad, windows),
        )
    }

    fn towers_depth_windows(x: FloatTensor<Self>, windows: DepthWindows) -> FloatTensor<Self> {
        let state = (dims5(x.primitive()), windows);
        with_state::<C, _>(
            x,
            state,
            |x, &(_, windows)| depth_windows::gather(x, windows),
            |(input, windows), grad| depth_windows::scatter(grad, windows, input),
        )
    }

    fn towers_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        scores: Scores,
    ) -> FloatTensor<Self> {
        let prep = AttentionBackward
            .prepare::<C>([q.node(), k.node(), v.node()])
            .compute_bound()
            .stateful();
        let [q, k, v] = [q, k, v].map(|t| t.into_primitive());
        let (out, row_scales) = attention::forward(&q, &k, &v, &scores);
        match prep {
            OpsKind::Tracked(prep) => {
                prep.finish(([q, k, v], out.clone(), row_scales, scores), out)
            }
            OpsKind::UnTracked(prep) => prep.finish(out),
        }
    }

    fn towers_rotary(x: FloatTensor<Self>, freq: FloatTensor<Self>) -> FloatTensor<Self> {
        // The table is a constant to the gradient, as in Burn's layer: its node is not a parent.
        with_state::<C, _>(x, freq.into_primitive(), rotary::forward, |freq, grad| {
            rotary::backward(grad, &freq)
        })
    }

    fn towers_conv2d_bias_relu(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: FloatTensor<Self>,
        stride: [usize; 2],
        padding: [usize; 2],
        bf16: bool,
    ) -> FloatTensor<Self> {
        let (geometry, arithmetic) = (ConvGeometry { stride, padding }, Arithmetic::new(bf16));
        match ConvBiasReluBackward
            .prepare::<C>([x.node(), weight.node(), bias.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(mut prep) => {
                let x_state = prep.checkpoint(&x);
                let weight_state = prep.checkpoint(&weight);
                let (x, weight) = (x.into_primitive(), weight.into_primitive());
                let y = forward_bias_relu(x, weight, bias.into_primitive(), geometry, arithmetic);
                let state = (x_state, weight_state, y.clone(), geometry, arithmetic);
                prep.finish(state, y)
            }
            OpsKind::UnTracked(prep) => {
                let (x, weight) = (x.into_primitive(), weight.into_primitive());
                let y = forward_bias_relu(x, weight, bias.into_primitive(), geometry, arithmetic);
                prep.finish(y)
            }
        }
    }

    fn towers_batch_norm_relu(
        x: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
        rounded: bool,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let (y, moments) = fused_batch_norm::<C, _>(x, beta, epsilon, |x, beta| {
            let (y, moments) = batch_norm::forward_training(x, beta, epsilon, rounded);
            let normalized = Normalized::Plain(moments.clone(), Statistics::Batch);
            (y, normalized, moments)
        });
        (y, FloatTensor::<Self>::new(moments))
    }

    fn towers_batch_norm_relu_max_pool(
        x: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
        kernel: [usize; 2],
        stride: [usize; 2],
        ceil_mode: bool,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let shape = MaxPoolShape::new(kernel, stride, ceil_mode);
        let (y, moments) = fused_batch_norm::<C, _>(x, beta, epsilon, |x, beta| {
            let (y, moments, maxima) =
                batch_norm_max_pool::forward(x, (beta, None), epsilon, shape);
            let normalized = Normalized::Pooled(moments.clone(), Statistics::Batch, maxima);
            (y, normalized, moments)
        });
        (y, FloatTensor::<Self>::new(moments))
    }

    fn towers_batch_norm_relu_max_pool_given(
        x: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        moments: FloatTensor<Self>,
        epsilon: f64,
        kernel: [usize; 2],
        stride: [usize; 2],
        ceil_mode: bool,
    ) -> FloatTensor<Self> {
        let (shape, moments) = (
            MaxPoolShape::new(kernel, stride, ceil_mode),
            moments.into_primitive(),
        );
        let (y, ()) = fused_batch_norm::<C, _>(x, beta, epsilon, |x, beta| {
            let (y, moments, maxima) =
                batch_norm_max_pool::forward(x, (beta, Some(moments)), epsilon, shape);
            let normalized = Normalized::Pooled(moments, Statistics::Given, maxima);
            (y, normalized, ())
        });
        y
    }

    fn towers_batch_norm_relu_given(
        x: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        moments: FloatTensor<Self>,
        epsilon: f64,
        rounded: bool,
    ) -> FloatTensor<Self> {
        let moments = moments.into_primitive();
        let (y, ()) = fused_batch_norm::<C, _>(x, beta, epsilon, |x, beta| {
            let y = batch_norm::forward(x, beta.clone(), moments.clone(), epsilon, rounded);
            (y, Normalized::Plain(moments, Statistics::Given), ())
        });
        y
    }

    fn towers_batch_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let (y, moments) = affine_batch_norm::<C>(x, [gamma, beta], epsilon, None);
        (y, FloatTensor::<Self>::new(moments))
    }

    fn towers_batch_norm_given(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        moments: FloatTensor<Self>,
        epsilon: f64,
    ) -> FloatTensor<Self> {
        let moments = moments.into_primitive();
        affine_batch_norm::<C>(x, [gamma, beta], epsilon, Some(moments)).0
    }

    /// Not routed here: [`crate::fused_rmsprop`] and the other fused updates take tensors
    /// without autodiff only (an optimizer steps on its parameters' inner tensors).
    fn towers_optimizer_update(
        _: FloatTensor<Self>,
        _: FloatTensor<Self>,
        _: FloatTensor<Self>,
        _: FloatTensor<Self>,
        _: Update,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        unreachable!("an optimizer's update takes tensors without autodiff")
    }
}

/// A fused batch norm of `x` with offset `beta` and `epsilon`: `forward` returns the output,
/// what the backward pass needs, and anything else to hand back; recorded for
/// [`BatchNormReluBackward`] when `x` or `beta` is tracked.
fn fused_batch_norm<C: CheckpointStrategy, R>(
    x: FloatTensor<Autodiff<Flex, C>>,
    beta: FloatTensor<Autodiff<Flex, C>>,
    epsilon: f64,
    forward: impl FnOnce(FlexTensor, &FlexTensor) -> (FlexTensor, Normalized, R),
) -> (FloatTensor<Autodiff<Flex, C>>, R) {
    let prep = BatchNormReluBackward
        .prepare::<C>([x.node(), beta.node()])
        .compute_bound()
        .stateful();
    let beta = beta.into_primitive();
    let (y, normalized, rest) = forward(x.primitive().clone(), &beta);
    let y = match prep {
        OpsKind::Tracked(mut prep) => {
            let x_state = prep.checkpoint(&x);
            prep.finish((x_state, beta, normalized, epsilon), y)
        }
        OpsKind::UnTracked(prep) => prep.finish(y),
    };
    (y, rest)
}

/// The fused batch norm and ReLU's backward pass, and with a max pool after them. State: the
/// input, the offset `β`, what the forward pass normalized with (and pooled), and epsilon (the
/// ReLU's mask is recomputed from them).
#[derive(Debug)]
struct BatchNormReluBackward;

/// What a fused batch norm's forward pass left for its backward.
#[derive(Clone, Debug)]
enum Normalized {
    /// The moments, and where they came from.
    Plain(FlexTensor, Statistics),
    /// The moments and where they came from, then a max pool's maxima.
    Pooled(FlexTensor, Statistics, Maxima),
}

impl Backward<Flex, 2> for BatchNormReluBackward {
    type State = (NodeId, FlexTensor, Normalized, f64);

    fn backward(
        self,
        ops: Ops<Self::State, 2>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let [x_node, beta_node] = ops.parents;
        let grad = grads.consume::<Flex>(&ops.node);
        let (x_state, beta, normalized, epsilon) = ops.state;
        let x: FlexTensor = checkpointer.retrieve_node_output(x_state);
        let (x_grad, beta_grad) = match normalized {
            Normalized::Plain(moments, statistics) => {
                batch_norm::backward(x, &beta, (&moments, statistics), epsilon, grad)
            }
            Normalized::Pooled(moments, statistics, maxima) => {
                let saved = (&moments, statistics, &maxima);
                batch_norm_max_pool::backward(x, &beta, saved, epsilon, grad)
            }
        };
        if let Some(node) = x_node {
            grads.register::<Flex>(node.id, x_grad);
        }
        if let Some(node) = beta_node {
            grads.register::<Flex>(node.id, beta_grad);
        }
    }
}

/// Burn's batch norm (`γ`, `β`, no ReLU) of `x` with `epsilon`, on the batch's statistics or
/// on `given` moments: the output and the moments it normalized with, recorded for
/// [`BatchNormBackward`] when `x`, `γ` or `β` is tracked.
fn affine_batch_norm<C: CheckpointStrategy>(
    x: FloatTensor<Autodiff<Flex, C>>,
    [gamma, beta]: [FloatTensor<Autodiff<Flex, C>>; 2],
    epsilon: f64,
    given: Option<FlexTensor>,
) -> (FloatTensor<Autodiff<Flex, C>>, FlexTensor) {
    let prep = BatchNormBackward
        .prepare::<C>([x.node(), gamma.node(), beta.node()])
        .compute_bound()
        .stateful();
    let [gamma, beta] = [gamma, beta].map(|t| t.into_primitive());
    let (y, moments, statistics) = match given {
        None => {
            let (y, moments) = batch_norm::affine_forward_training(
                x.primitive().clone(),
                [&gamma, &beta],
                epsilon,
            );
            (y, moments, Statistics::Batch)
        }
        Some(moments) => {
            let y = batch_norm::affine_forward(
                x.primitive().clone(),
                [&gamma, &beta],
                &moments,
                epsilon,
            );
            (y, moments, Statistics::Given)
        }
    };
    let y = match prep {
        OpsKind::Tracked(mut prep) => {
            let x_state = prep.checkpoint(&x);
            let saved = (moments.clone(), statistics);
            prep.finish((x_state, [gamma, beta], saved, epsilon), y)
        }
        OpsKind::UnTracked(prep) => prep.finish(y),
    };
    (y, moments)
}

/// Burn's batch norm's backward pass: the gradients of the input, `γ` and `β`. State: the
/// input, `γ` and `β`, the moments the forward pass normalized with and where they came from,
/// and epsilon.
#[derive(Debug)]
struct BatchNormBackward;

impl Backward<Flex, 3> for BatchNormBackward {
    type State = (NodeId, [FlexTensor; 2], (FlexTensor, Statistics), f64);

    fn backward(
        self,
        ops: Ops<Self::State, 3>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let grad = grads.consume::<Flex>(&ops.node);
        let (x_state, [gamma, beta], (moments, statistics), epsilon) = ops.state;
        let x: FlexTensor = checkpointer.retrieve_node_output(x_state);
        let saved = (&moments, statistics);
        let gradients = batch_norm::affine_backward(x, [&gamma, &beta], saved, epsilon, grad);
        register_each(
            grads,
            ops.parents.map(|node| node.map(|node| node.id)),
            gradients,
        );
    }
}

/// Each of `gradients` registered for its parent, where the parent asks for one (`Some`).
fn register_each<const N: usize>(
    grads: &mut Gradients,
    parents: [Option<NodeId>; N],
    gradients: [FlexTensor; N],
) {
    for (parent, gradient) in parents.into_iter().zip(gradients) {
        if let Some(id) = parent {
            grads.register::<Flex>(id, gradient);
        }
    }
}

/// Layer (or RMS) norm's backward pass: state is the input, the scale, each row's mean and `r`,
/// and which norm.
#[derive(Debug)]
struct LayerNormBackward;

impl Backward<Flex, 3> for LayerNormBackward {
    type State = (NodeId, FlexTensor, FlexTensor, RowNorm);

    fn backward(
        self,
        ops: Ops<Self::State, 3>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let grad = grads.consume::<Flex>(&ops.node);
        let (x_state, gamma, moments, norm) = ops.state;
        let x: FlexTensor = checkpointer.retrieve_node_output(x_state);
        let gradients = layer_norm::backward(x, &gamma, &moments, grad, norm);
        register_each(
            grads,
            ops.parents.map(|node| node.map(|node| node.id)),
            gradients,
        );
    }
}

/// PReLU's backward pass: state is the input, the slopes and where each value's slope is.
#[derive(Debug)]
struct PreluBackward;

impl Backward<Flex, 2> for PreluBackward {
    type State = (FlexTensor, FlexTensor, Channels);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<Flex>(&ops.node);
        let (x, alpha, layout) = ops.state;
        let gradients = prelu::backward(x, &alpha, grad, layout);
        register_each(
            grads,
            ops.parents.map(|node| node.map(|node| node.id)),
            gradients,
        );
    }
}

/// Attention's backward pass: state is the queries, keys and values, the output, each query's
/// row scale and how the scores became weights.
#[derive(Debug)]
struct AttentionBackward;

impl Backward<Flex, 3> for AttentionBackward {
    type State = ([FlexTensor; 3], FlexTensor, RowScales, Scores);

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<Flex>(&ops.node);
        let ([q, k, v], out, row_scales, scores) = ops.state;
        let gradients = attention::backward([&q, &k, &v], &out, &row_scales, grad, &scores);
        register_each(
            grads,
            ops.parents.map(|node| node.map(|node| node.id)),
            gradients,
        );
    }
}

/// An LSTM recurrence's backward pass: state is what its forward pass saved, the hidden
/// weights, the initial hidden state and cell, the output, and the direction.
#[derive(Debug)]
struct LstmBackward;

impl Backward<Flex, 4> for LstmBackward {
    type State = (Arc<LstmSaved>, [FlexTensor; 4], bool);

    fn backward(self, ops: Ops<Self::State, 4>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<Flex>(&ops.node);
        let (saved, [w_hh, h0, c0, out], reverse) = ops.state;
        let gradients = lstm::backward(&saved, &w_hh, [&h0, &c0, &out], grad, reverse);
        register_each(
            grads,
            ops.parents.map(|node| node.map(|node| node.id)),
            gradients,
        );
    }
}

/// A GRU recurrence's backward pass: state is what its forward pass saved, the hidden weights,
/// the initial hidden state, the output, and the direction.
#[derive(Debug)]
struct GruBackward;

impl Backward<Flex, 4> for GruBackward {
    type State = (Arc<GruSaved>, [FlexTensor; 3], bool);

    fn backward(self, ops: Ops<Self::State, 4>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<Flex>(&ops.node);
        let (saved, [w_hh, h0, out], reverse) = ops.state;
        let gradients = gru::backward(&saved, &w_hh, [&h0, &out], grad, reverse);
        register_each(
            grads,
            ops.parents.map(|node| node.map(|node| node.id)),
            gradients,
        );
    }
}

/// Group norm's backward pass: state is the input, the scale and offset, the groups' moments,
/// the number of groups and epsilon.
#[derive(Debug)]
struct GroupNormBackward;

impl Backward<Flex, 3> for GroupNormBackward {
    type State = (NodeId, [FlexTensor; 2], FlexTensor, (usize, f64));

    fn backward(
        self,
        ops: Ops<Self::State, 3>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let grad = grads.consume::<Flex>(&ops.node);
        let (x_state, [gamma, beta], moments, (groups, epsilon)) = ops.state;
        let x: FlexTensor = checkpointer.retrieve_node_output(x_state);
        let affine = [&gamma, &beta];
        let gradients = group_norm::backward(x, affine, &moments, groups, epsilon, grad);
        register_each(
            grads,
            ops.parents.map(|node| node.map(|node| node.id)),
            gradients,
        );
    }
}

/// The fused convolution, bias and ReLU's backward pass: the ReLU's mask and the bias's
/// gradient in one pass, then the convolution's. State: the input, the kernel, the output, the
/// geometry and the arithmetic.
#[derive(Debug)]
struct ConvBiasReluBackward;

impl Backward<Flex, 3> for ConvBiasReluBackward {
    type State = (NodeId, NodeId, FlexTensor, ConvGeometry, Arithmetic);

    fn backward(
        self,
        ops: Ops<Self::State, 3>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let [x_node, weight_node, bias_node] = ops.parents;
        let grad = grads.consume::<Flex>(&ops.node);
        let (x_state, weight_state, y, geometry, arithmetic) = ops.state;
        let (grad, bias_grad) = bias_relu::backward(&y, grad);
        drop(y);
        if let Some(node) = bias_node {
            grads.register::<Flex>(node.id, bias_grad);
        }
        let x: FlexTensor = checkpointer.retrieve_node_output(x_state);
        let weight: FlexTensor = checkpointer.retrieve_node_output(weight_state);
        let [_, _, kh, kw] = dims4(&weight);
        if let Some(node) = x_node {
            let x_grad = input_grad(dims4(&x), weight, grad.clone(), geometry, arithmetic);
            grads.register::<Flex>(node.id, x_grad);
        }
        if let Some(node) = weight_node {
            let weight_grad = weight_grad(x, grad, [kh, kw], geometry, arithmetic);
            grads.register::<Flex>(node.id, weight_grad);
        }
    }
}

/// A dense layer's product's backward pass: state is its two operands and its arithmetic.
#[derive(Debug)]
struct MatmulBackward;

impl Backward<Flex, 2> for MatmulBackward {
    type State = (NodeId, NodeId, Arithmetic);

    fn backward(
        self,
        ops: Ops<Self::State, 2>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let [x_node, w_node] = ops.parents;
        let grad = grads.consume::<Flex>(&ops.node);
        let (x_state, w_state, arithmetic) = ops.state;
        let x: FlexTensor = checkpointer.retrieve_node_output(x_state);
        let w: FlexTensor = checkpointer.retrieve_node_output(w_state);
        if let Some(node) = x_node {
            let dx = matmul::x_grad(w, grad.clone(), arithmetic);
            grads.register::<Flex>(node.id, dx);
        }
        if let Some(node) = w_node {
            grads.register::<Flex>(node.id, matmul::w_grad(x, grad, arithmetic));
        }
    }
}

/// Max pooling's backward pass: state is each output's argmax and the input plane's size.
#[derive(Debug)]
struct MaxPoolBackward;

impl Backward<Flex, 1> for MaxPoolBackward {
    type State = (Arc<Vec<u32>>, [usize; 2]);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [parent] = ops.parents;
        let grad = grads.consume::<Flex>(&ops.node);
        if let Some(node) = parent {
            let (argmax, plane) = ops.state;
            grads.register::<Flex>(node.id, max_pool_backward(grad, &argmax, plane));
        }
    }
}

/// Local response normalization's backward pass: state is the input, the forward's sums and
/// powers, and the parameters.
#[derive(Debug)]
struct LrnBackward;

impl Backward<Flex, 1> for LrnBackward {
    type State = (NodeId, LrnSaved, LrnParams);

    fn backward(
        self,
        ops: Ops<Self::State, 1>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let [parent] = ops.parents;
        let grad = grads.consume::<Flex>(&ops.node);
        let (x_state, saved, params) = ops.state;
        let x: FlexTensor = checkpointer.retrieve_node_output(x_state);
        if let Some(node) = parent {
            grads.register::<Flex>(node.id, lrn_backward(x, grad, &saved, params));
        }
    }
}

/// Convolution's backward pass: state is the input, the kernel, the geometry and the
/// arithmetic of the products.
#[derive(Debug)]
struct ConvBackward;

impl Backward<Flex, 2> for ConvBackward {
    type State = (NodeId, NodeId, ConvGeometry, Arithmetic);

    fn backward(
        self,
        ops: Ops<Self::State, 2>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let [x_node, weight_node] = ops.parents;
        let grad = grads.consume::<Flex>(&ops.node);
        let (x_state, weight_state, geometry, arithmetic) = ops.state;
        let x: FlexTensor = checkpointer.retrieve_node_output(x_state);
        let weight: FlexTensor = checkpointer.retrieve_node_output(weight_state);
        let [_, _, kh, kw] = dims4(&weight);
        if let Some(node) = x_node {
            let x_grad = input_grad(dims4(&x), weight, grad.clone(), geometry, arithmetic);
            grads.register::<Flex>(node.id, x_grad);
        }
        if let Some(node) = weight_node {
            let weight_grad = weight_grad(x, grad, [kh, kw], geometry, arithmetic);
            grads.register::<Flex>(node.id, weight_grad);
        }
    }
}

/// A transposed convolution's backward pass: state is the input, the kernel, the geometry and
/// the arithmetic. The transposed convolution is the convolution's input gradient, so its own
/// gradients are the convolution's forward pass (for its input) and weight gradient with the
/// roles swapped: the output gradient is the image, the input the output gradient.
#[derive(Debug)]
struct ConvTransposeBackward;

impl Backward<Flex, 2> for ConvTransposeBackward {
    type State = (NodeId, NodeId, ConvGeometry, Arithmetic);

    fn backward(
        self,
        ops: Ops<Self::State, 2>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let [x_node, weight_node] = ops.parents;
        let grad = grads.consume::<Flex>(&ops.node);
        let (x_state, weight_state, geometry, arithmetic) = ops.state;
        let x: FlexTensor = checkpointer.retrieve_node_output(x_state);
        let weight: FlexTensor = checkpointer.retrieve_node_output(weight_state);
        let [_, _, kh, kw] = dims4(&weight);
        if let Some(node) = x_node {
            let x_grad = forward(grad.clone(), weight, geometry, arithmetic);
            grads.register::<Flex>(node.id, x_grad);
        }
        if let Some(node) = weight_node {
            let weight_grad = weight_grad(grad, x, [kh, kw], geometry, arithmetic);
            grads.register::<Flex>(node.id, weight_grad);
        }
    }
}

/// A depthwise convolution's backward pass: state is the input, the kernel and the geometry.
#[derive(Debug)]
struct DepthwiseBackward;

impl Backward<Flex, 2> for DepthwiseBackward {
    type State = (NodeId, NodeId, DepthwiseGeometry);

    fn backward(
        self,
        ops: Ops<Self::State, 2>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let [x_node, weight_node] = ops.parents;
        let grad = grads.consume::<Flex>(&ops.node);
        let (x_state, weight_state, geometry) = ops.state;
        let x: FlexTensor = checkpointer.retrieve_node_output(x_state);
        let weight: FlexTensor = checkpointer.retrieve_node_output(weight_state);
        let ([_, _, h, w], [_, _, kh, kw]) = (dims4(&x), dims4(&weight));
        if let Some(node) = x_node {
            let x_grad = depthwise::input_grad(grad.clone(), weight, [h, w], geometry);
            grads.register::<Flex>(node.id, x_grad);
        }
        if let Some(node) = weight_node {
            let weight_grad = depthwise::weight_grad(x, grad, [kh, kw], geometry);
            grads.register::<Flex>(node.id, weight_grad);
        }
    }
}

/// An [`Activation`]'s backward pass: state is the input and the activation.
#[derive(Debug)]
struct ActivationBackward;

impl Backward<Flex, 1> for ActivationBackward {
    type State = (FlexTensor, Activation);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [parent] = ops.parents;
        let grad = grads.consume::<Flex>(&ops.node);
        let (x, activation) = ops.state;
        if let Some(node) = parent {
            grads.register::<Flex>(node.id, activation.backward(x, grad));
        }
    }
}

/// `forward(x)`, recorded where `x` is tracked with its output as the state of `backward`
/// (whose input gradient needs only the output and the output's gradient: ReLU6's, the
/// gradient inside `(0, 6)` where the input was; softmax's, `y·(g - Σ g·y)`).
fn kept_output<C: CheckpointStrategy>(
    x: FloatTensor<Autodiff<Flex, C>>,
    forward: impl FnOnce(FlexTensor) -> FlexTensor,
    backward: fn(FlexTensor, FlexTensor) -> FlexTensor,
) -> FloatTensor<Autodiff<Flex, C>> {
    let prep = StateBackward(backward)
        .prepare::<C>([x.node()])
        .compute_bound()
        .stateful();
    let y = forward(x.into_primitive());
    match prep {
        OpsKind::Tracked(prep) => prep.finish(y.clone(), y),
        OpsKind::UnTracked(prep) => prep.finish(y),
    }
}

/// `forward(x, &state)`, recorded where `x` is tracked with `state` (the shapes, windows or
/// tables both passes read) kept for `backward`.
fn with_state<C: CheckpointStrategy, S: Clone + Send + Debug + 'static>(
    x: FloatTensor<Autodiff<Flex, C>>,
    state: S,
    forward: impl FnOnce(FlexTensor, &S) -> FlexTensor,
    backward: fn(S, FlexTensor) -> FlexTensor,
) -> FloatTensor<Autodiff<Flex, C>> {
    let prep = StateBackward(backward)
        .prepare::<C>([x.node()])
        .compute_bound()
        .stateful();
    let y = forward(x.into_primitive(), &state);
    match prep {
        OpsKind::Tracked(prep) => prep.finish(state, y),
        OpsKind::UnTracked(prep) => prep.finish(y),
    }
}

/// The backward pass of a one-input op whose input gradient is the function held, of the
/// op's state and the output's gradient ([`kept_output`]'s and [`with_state`]'s ops).
#[derive(Debug)]
struct StateBackward<S>(fn(S, FlexTensor) -> FlexTensor);

impl<S: Clone + Send + Debug + 'static> Backward<Flex, 1> for StateBackward<S> {
    type State = S;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [parent] = ops.parents;
        let grad = grads.consume::<Flex>(&ops.node);
        if let Some(node) = parent {
            grads.register::<Flex>(node.id, (self.0)(ops.state, grad));
        }
    }
}
