//! TF 1.x's `RMSPropOptimizer`: [`TfRmsProp`] and its state.

use burn::optim::{LearningRate, Optimizer, RecordState, StateSink, StateSource};
use burn::tensor::{Device, Tensor};
use towers_kernels::{RmsPropStep, fused_rmsprop};

/// TF 1.x's `RMSPropOptimizer`, which the Inception trainer uses with decay 0.9, momentum 0.9
/// and epsilon 1.0.
///
/// Burn's `RmsProp` differs in three ways that matter at epsilon 1.0: it starts the mean square
/// at 0 (TF: 1), adds epsilon after the square root (TF: inside it), and applies the learning
/// rate after the momentum (TF: inside it). So this is a Burn [`Optimizer`] of its own:
///
/// ```text
/// ms  <- decay * ms + (1 - decay) * g^2             ms starts at 1
/// mom <- momentum * mom + lr * g / sqrt(ms + eps)   mom starts at 0
/// w   <- w - mom
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TfRmsProp {
    /// Decay of the mean square (TF `decay`, Burn's `alpha`).
    pub decay: f64,
    /// Momentum of the scaled update.
    pub momentum: f64,
    /// Added to the mean square under the square root.
    pub epsilon: f64,
}

/// Per-parameter state of [`TfRmsProp`]: TF's `rms` and `momentum` slots.
#[derive(Debug, Clone)]
pub struct TfRmsPropState<const D: usize> {
    /// Running mean of the squared gradient.
    pub mean_square: Tensor<D>,
    /// Accumulated update, learning rate included.
    pub momentum: Tensor<D>,
}

impl Optimizer for TfRmsProp {
    type State<const D: usize> = TfRmsPropState<D>;

    fn step<const D: usize>(
        &self,
        lr: LearningRate,
        tensor: Tensor<D>,
        grad: Tensor<D>,
        state: Option<Self::State<D>>,
    ) -> (Tensor<D>, Option<Self::State<D>>) {
        let device = grad.device();
        let (mean_square, momentum) = match state {
            Some(s) => (s.mean_square, s.momentum),
            None => (
                Tensor::ones(grad.shape(), &device),
                Tensor::zeros(grad.shape(), &device),
            ),
        };
        let step = RmsPropStep {
            lr,
            decay: self.decay,
            momentum: self.momentum,
            epsilon: self.epsilon,
        };
        // On flex in one pass on all cores; Burn's ops took eleven on one.
        let [tensor, grad, mean_square, momentum] =
            match fused_rmsprop([tensor, grad, mean_square, momentum], step) {
                Ok([tensor, mean_square, momentum]) => {
                    let state = TfRmsPropState {
                        mean_square,
                        momentum,
                    };
                    return (tensor, Some(state));
                }
                Err(tensors) => *tensors,
            };
        let mean_square = mean_square
            .mul_scalar(self.decay)
            .add(grad.clone().square().mul_scalar(1.0 - self.decay));
        let scaled = grad.div(mean_square.clone().add_scalar(self.epsilon).sqrt());
        let momentum = momentum
            .mul_scalar(self.momentum)
            .add(scaled.mul_scalar(lr));
        let tensor = tensor - momentum.clone();
        (
            tensor,
            Some(TfRmsPropState {
                mean_square,
                momentum,
            }),
        )
    }

    fn to_device<const D: usize>(state: Self::State<D>, device: &Device) -> Self::State<D> {
        TfRmsPropState {
            mean_square: state.mean_square.to_device(device),
            momentum: state.momentum.to_device(device),
        }
    }
}

impl<const D: usize> RecordState for TfRmsPropState<D> {
    fn state_flatten(&self, prefix: &str, out: &mut StateSink) {
        out.push_tensor(prefix, "mean_square", self.mean_square.to_data());
        out.push_tensor(prefix, "momentum", self.momentum.to_data());
    }

    fn state_unflatten(prefix: &str, src: &mut StateSource, device: &Device) -> Option<Self> {
        let mean_square = src.take_tensor(prefix, "mean_square")?;
        let momentum = src.take_tensor(prefix, "momentum")?;
        Some(Self {
            mean_square: Tensor::from_data(mean_square, device),
            momentum: Tensor::from_data(momentum, device),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::TensorData;

    fn t(v: &[f32]) -> Tensor<1> {
        Tensor::from_data(TensorData::new(v.to_vec(), [v.len()]), &Device::flex())
    }

    fn values(t: Tensor<1>) -> Vec<f32> {
        t.into_data().try_to_vec().unwrap()
    }

    /// Two steps against TF's update written out in f64.
    #[test]
    fn matches_tf_update_rule() {
        let opt = TfRmsProp {
            decay: 0.9,
            momentum: 0.9,
            epsilon: 1.0,
        };
        let (w0, g1, g2) = ([1.0f64, -2.0], [0.5f64, 3.0], [-1.0f64, 0.25]);
        let (lr1, lr2) = (0.1, 0.05);
        let (w, s) = opt.step(lr1, t(&[1.0, -2.0]), t(&[0.5, 3.0]), None);
        let (w, _) = opt.step(lr2, w, t(&[-1.0, 0.25]), s);
        let got = values(w);
        for i in 0..2 {
            let ms1 = 0.9 * 1.0 + 0.1 * g1[i] * g1[i];
            let mom1 = lr1 * g1[i] / (ms1 + 1.0f64).sqrt();
            let ms2 = 0.9 * ms1 + 0.1 * g2[i] * g2[i];
            let mom2 = 0.9 * mom1 + lr2 * g2[i] / (ms2 + 1.0f64).sqrt();
            let want = w0[i] - mom1 - mom2;
            assert!(
                (got[i] as f64 - want).abs() < 1e-6,
                "{i}: {} vs {want}",
                got[i]
            );
        }
    }

    #[test]
    fn state_survives_flatten_and_unflatten() {
        let state = TfRmsPropState {
            mean_square: t(&[1.5, 2.5]),
            momentum: t(&[-0.25, 0.125]),
        };
        let mut sink = StateSink::default();
        state.state_flatten("7", &mut sink);
        let mut src = StateSource::default();
        for (name, data) in sink.tensors {
            src.insert_tensor(name, data);
        }
        let back = TfRmsPropState::<1>::state_unflatten("7", &mut src, &Device::flex()).unwrap();
        assert_eq!(values(back.mean_square), [1.5, 2.5]);
        assert_eq!(values(back.momentum), [-0.25, 0.125]);
    }
}
