//! [`FusedAdam`]: Burn's Adam, or TF 1.x's (its epsilon placed as TF places it), its update in
//! one pass on flex.

use burn::optim::{Adam, AdamConfig, AdamState, AdaptiveMomentumState, LearningRate, Optimizer};
use burn::tensor::{Device, Tensor};
use towers_kernels::{AdamStep, fused_adam};

/// Burn's `Adam` (bias-corrected, no AMSGrad, no weight decay), its update on f32 flex tensors
/// in one pass on all cores ([`towers_kernels::fused_adam`], the same values to the bit): flex
/// runs Burn's elementwise ops on one core, a dozen passes over every parameter (the Inception
/// demo on 2 cores: 0.20–0.21 s a step with them, 0.19 without). Other backends take Burn's
/// `Adam` itself.
/// Its state is Burn's [`AdamState`], so checkpoints of either load into the other.
///
/// [`FusedAdam::tf`] is TF 1.x's `AdamOptimizer` instead, which adds its epsilon before the bias
/// correction: `w -= lr·sqrt(1-β2^t)/(1-β1^t) · m / (sqrt(v) + ε)`. That is Burn's update with
/// the epsilon `ε / sqrt(1-β2^t)`, which it takes at each step; at TF-slim's `--opt_epsilon` of
/// 1.0 the two differ in every step.
#[derive(Clone)]
pub struct FusedAdam {
    burn: Adam,
    beta_1: f32,
    beta_2: f32,
    epsilon: f32,
    tf_epsilon: bool,
}

impl FusedAdam {
    /// Adam with these moments' decays and epsilon (Burn's `AdamConfig` takes them as f32).
    pub fn new(beta_1: f32, beta_2: f32, epsilon: f32) -> Self {
        let config = AdamConfig::new()
            .with_beta_1(beta_1)
            .with_beta_2(beta_2)
            .with_epsilon(epsilon);
        Self {
            burn: config.build(),
            beta_1,
            beta_2,
            epsilon,
            tf_epsilon: false,
        }
    }

    /// TF 1.x's `AdamOptimizer` with these settings (see [`FusedAdam`]).
    pub fn tf(beta_1: f32, beta_2: f32, epsilon: f32) -> Self {
        Self {
            tf_epsilon: true,
            ..Self::new(beta_1, beta_2, epsilon)
        }
    }

    /// The epsilon of Burn's update at step `time` (from 1).
    fn epsilon_at(&self, time: usize) -> f32 {
        match self.tf_epsilon {
            true => {
                let correction = 1.0 - (self.beta_2 as f64).powi(time as i32);
                (self.epsilon as f64 / correction.sqrt()) as f32
            }
            false => self.epsilon,
        }
    }

    /// Burn's `Adam` taking step `time`'s epsilon.
    fn burn_at(&self, time: usize) -> Adam {
        match self.tf_epsilon {
            true => AdamConfig::new()
                .with_beta_1(self.beta_1)
                .with_beta_2(self.beta_2)
                .with_epsilon(self.epsilon_at(time))
                .build(),
            false => self.burn.clone(),
        }
    }
}

impl Optimizer for FusedAdam {
    type State<const D: usize> = AdamState<D>;

    fn step<const D: usize>(
        &self,
        lr: LearningRate,
        tensor: Tensor<D>,
        grad: Tensor<D>,
        state: Option<Self::State<D>>,
    ) -> (Tensor<D>, Option<Self::State<D>>) {
        let (time, moment_1, moment_2) = match state {
            None => (
                1,
                Tensor::zeros(grad.shape(), &grad.device()),
                Tensor::zeros(grad.shape(), &grad.device()),
            ),
            Some(AdamState {
                momentum:
                    AdaptiveMomentumState {
                        time,
                        moment_1,
                        moment_2,
                        max_moment_2: None,
                    },
            }) => (time + 1, moment_1, moment_2),
            Some(amsgrad) => {
                let time = amsgrad.momentum.time + 1;
                return self.burn_at(time).step(lr, tensor, grad, Some(amsgrad));
            }
        };
        let step = AdamStep {
            lr,
            beta_1: self.beta_1,
            beta_2: self.beta_2,
            epsilon: self.epsilon_at(time),
            time,
        };
        match fused_adam([tensor, grad, moment_1, moment_2], step) {
            Ok([tensor, moment_1, moment_2]) => {
                let momentum = AdaptiveMomentumState::new(time, moment_1, moment_2);
                (tensor, Some(AdamState::new(momentum)))
            }
            Err(tensors) => {
                let [tensor, grad, moment_1, moment_2] = *tensors;
                let state = (time > 1).then(|| {
                    AdamState::new(AdaptiveMomentumState::new(time - 1, moment_1, moment_2))
                });
                self.burn_at(time).step(lr, tensor, grad, state)
            }
        }
    }

    fn to_device<const D: usize>(state: Self::State<D>, device: &Device) -> Self::State<D> {
        Adam::to_device(state, device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optim::same_as_burn;
    use burn::optim::ModuleOptimizer;

    #[test]
    fn equals_burns_adam_and_shares_its_state() {
        same_as_burn::steps_and_state(
            || AdamConfig::new().with_epsilon(1e-8).init(),
            || ModuleOptimizer::from(FusedAdam::new(0.9, 0.999, 1e-8)),
        );
    }

    #[test]
    fn elsewhere_steps_as_burns_adam() {
        let burn = AdamConfig::new().with_epsilon(1e-8).build();
        same_as_burn::elsewhere(&FusedAdam::new(0.9, 0.999, 1e-8), &burn);
    }
}
