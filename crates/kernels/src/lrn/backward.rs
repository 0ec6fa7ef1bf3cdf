//! [`LrnByBand`] under autodiff: the forward pass on the inner backend, recorded with its
//! gradient as two element-wise chains around one band product (Burn derives no backward pass
//! for an extension).

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend};

use super::extension::{LrnByBand, across_channels, forward};

impl<B: Backend, C: CheckpointStrategy> LrnByBand for Autodiff<B, C> {
    fn towers_lrn_by_band(
        x: FloatTensor<Self>,
        band: FloatTensor<Self>,
        bias: f64,
        beta: f64,
    ) -> FloatTensor<Self> {
        let band = band.into_primitive();
        match LrnBackward
            .prepare::<C>([x.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let x = x.into_primitive();
                let out = forward::<B>(x.clone(), band.clone(), bias, beta);
                let saved = Saved {
                    x,
                    band,
                    sums: out.sums,
                    factor: out.factor,
                    beta,
                };
                prep.finish(saved, out.output)
            }
            OpsKind::UnTracked(prep) => {
                prep.finish(forward::<B>(x.into_primitive(), band, bias, beta).output)
            }
        }
    }
}

/// What the backward pass reads: the input, the band, and the forward pass's window sums `s`
/// (with the bias) and factor `p = s^-beta`.
#[derive(Clone, Debug)]
struct Saved<B: Backend> {
    x: FloatTensor<B>,
    band: FloatTensor<B>,
    sums: FloatTensor<B>,
    factor: FloatTensor<B>,
    beta: f64,
}

#[derive(Debug)]
struct LrnBackward;

impl<B: Backend> Backward<B, 1> for LrnBackward {
    type State = Saved<B>;

    /// With `y = x · p`, `p = s^-beta` and `s = bias + band(x²)`:
    ///
    /// ```text
    /// t  = (dy · p) · x / s · (-2 beta)
    /// dx = x · band(t) + (dy · p)
    /// ```
    ///
    /// The first chain's ops each take the result of the one before it, so that fusion joins
    /// them into one kernel (see the module's doc), which writes `dy · p` beside `t` for the
    /// second to add.
    fn backward(self, ops: Ops<Saved<B>, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let dy = grads.consume::<B>(&ops.node);
        let Some(parent) = &ops.parents[0] else {
            return;
        };
        let Saved {
            x,
            band,
            sums,
            factor,
            beta,
        } = ops.state;
        let scaled = B::float_mul(dy, factor);
        let t = B::float_mul(scaled.clone(), x.clone());
        let t = B::float_div(t, sums);
        let t = B::float_mul_scalar(t, (-2.0 * beta).into());
        let dx = B::float_mul(x, across_channels::<B>(t, band));
        grads.register::<B>(parent.id, B::float_add(dx, scaled));
    }
}
