//! [`FusedSgd`]: Burn's SGD, plain or with momentum, its update in one pass on flex.

use burn::optim::{LearningRate, Optimizer, RecordState, StateSink, StateSource, join_path};
use burn::tensor::{Device, Tensor};
use towers_kernels::{MomentumStep, SgdStep, fused_sgd};

/// Burn's `Sgd` without weight decay (the model's loss holds it), plain or with Burn's momentum,
/// its update on f32 flex tensors in one pass on all cores ([`towers_kernels::fused_sgd`], the
/// same values to the bit): flex runs Burn's elementwise ops on the calling thread below 256 K
/// values, most of a net's parameters, two to four passes each while the other cores wait.
/// Other backends take the same update in Burn's ops.
///
/// ```text
/// SGD:      w <- w - lr · g
/// momentum: v <- (1 - dampening) g + momentum · v   (v <- g on the first step)
///           w <- w - lr · v                         (Nesterov: w - lr · (momentum · v + g))
/// ```
///
/// Its state is recorded as Burn's `SgdState` is, so checkpoints of either load into the other.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FusedSgd {
    momentum: Option<MomentumStep>,
}

/// Per-parameter state of [`FusedSgd`]: the velocity, with momentum.
#[derive(Debug, Clone)]
pub struct FusedSgdState<const D: usize> {
    /// The running velocity (Burn's `MomentumState`), absent without momentum.
    pub velocity: Option<Tensor<D>>,
}

impl FusedSgd {
    /// Plain gradient descent.
    pub fn plain() -> Self {
        Self { momentum: None }
    }

    /// With Burn's momentum (`MomentumConfig`'s fields).
    pub fn with_momentum(momentum: f64, dampening: f64, nesterov: bool) -> Self {
        let momentum = MomentumStep {
            momentum,
            dampening,
            nesterov,
        };
        Self {
            momentum: Some(momentum),
        }
    }
}

impl Optimizer for FusedSgd {
    type State<const D: usize> = FusedSgdState<D>;

    fn step<const D: usize>(
        &self,
        lr: LearningRate,
        tensor: Tensor<D>,
        grad: Tensor<D>,
        state: Option<Self::State<D>>,
    ) -> (Tensor<D>, Option<Self::State<D>>) {
        let velocity = state.and_then(|s| s.velocity);
        let step = SgdStep {
            lr,
            momentum: self.momentum,
        };
        let (tensor, velocity) = match fused_sgd(tensor, grad, velocity, step) {
            Ok(updated) => updated,
            Err(tensors) => {
                let (tensor, grad, velocity) = *tensors;
                self.by_ops(lr, tensor, grad, velocity)
            }
        };
        (tensor, Some(FusedSgdState { velocity }))
    }

    fn to_device<const D: usize>(state: Self::State<D>, device: &Device) -> Self::State<D> {
        FusedSgdState {
            velocity: state.velocity.map(|v| v.to_device(device)),
        }
    }
}

impl FusedSgd {
    /// The update in Burn's ops, as Burn's `Sgd` and `Momentum` write it.
    fn by_ops<const D: usize>(
        &self,
        lr: LearningRate,
        tensor: Tensor<D>,
        grad: Tensor<D>,
        velocity: Option<Tensor<D>>,
    ) -> (Tensor<D>, Option<Tensor<D>>) {
        let Some(m) = self.momentum else {
            return (tensor - grad.mul_scalar(lr), velocity);
        };
        let velocity = match velocity {
            Some(v) => grad
                .clone()
                .mul_scalar(1.0 - m.dampening)
                .add(v.mul_scalar(m.momentum as f32)),
            None => grad.clone(),
        };
        let step = match m.nesterov {
            true => velocity.clone().mul_scalar(m.momentum as f32).add(grad),
            false => velocity.clone(),
        };
        (tensor - step.mul_scalar(lr), Some(velocity))
    }
}

/// The velocity under `momentum.velocity`, where Burn's `SgdState` records its
/// `MomentumState`'s.
impl<const D: usize> RecordState for FusedSgdState<D> {
    fn state_flatten(&self, prefix: &str, out: &mut StateSink) {
        if let Some(velocity) = &self.velocity {
            out.push_tensor(
                &join_path(prefix, "momentum"),
                "velocity",
                velocity.to_data(),
            );
        }
    }

    fn state_unflatten(prefix: &str, src: &mut StateSource, device: &Device) -> Option<Self> {
        let velocity = src.take_tensor(&join_path(prefix, "momentum"), "velocity");
        Some(Self {
            velocity: velocity.map(|data| Tensor::from_data(data, device)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optim::same_as_burn;
    use burn::optim::momentum::MomentumConfig;
    use burn::optim::{ModuleOptimizer, SgdConfig};

    /// Burn's `SgdConfig` and ours for the same update: plain, momentum with dampening, and
    /// Nesterov's.
    fn pairs() -> [(SgdConfig, FusedSgd); 3] {
        let momentum = |dampening, nesterov| {
            MomentumConfig::new()
                .with_momentum(0.9)
                .with_dampening(dampening)
                .with_nesterov(nesterov)
        };
        [
            (SgdConfig::new(), FusedSgd::plain()),
            (
                SgdConfig::new().with_momentum(Some(momentum(0.1, false))),
                FusedSgd::with_momentum(0.9, 0.1, false),
            ),
            (
                SgdConfig::new().with_momentum(Some(momentum(0.0, true))),
                FusedSgd::with_momentum(0.9, 0.0, true),
            ),
        ]
    }

    #[test]
    fn equals_burns_sgd_and_shares_its_state() {
        for (config, fused) in pairs() {
            same_as_burn::steps_and_state(|| config.init(), || ModuleOptimizer::from(fused));
        }
    }

    #[test]
    fn elsewhere_steps_as_burns_sgd() {
        for (config, fused) in pairs() {
            same_as_burn::elsewhere(&fused, &config.build());
        }
    }
}
