//! [`FusedAdam`]: Burn's Adam, its update in one pass on flex.

use burn::optim::{Adam, AdamConfig, AdamState, AdaptiveMomentumState, LearningRate, Optimizer};
use burn::tensor::{Device, Tensor};
use towers_models::{AdamStep, fused_adam};

/// Burn's `Adam` (bias-corrected, no AMSGrad, no weight decay), its update on f32 flex tensors
/// in one pass on all cores ([`towers_models::fused_adam`], the same values to the bit): flex
/// runs Burn's elementwise ops on one core, a dozen passes over every parameter (the Inception
/// demo on 2 cores: 0.20–0.21 s a step with them, 0.19 without). Other backends take Burn's
/// `Adam` itself.
/// Its state is Burn's [`AdamState`], so checkpoints of either load into the other.
#[derive(Clone)]
pub struct FusedAdam {
    burn: Adam,
    beta_1: f32,
    beta_2: f32,
    epsilon: f32,
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
            Some(amsgrad) => return self.burn.step(lr, tensor, grad, Some(amsgrad)),
        };
        let step = AdamStep {
            lr,
            beta_1: self.beta_1,
            beta_2: self.beta_2,
            epsilon: self.epsilon,
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
                self.burn.step(lr, tensor, grad, state)
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
    use burn::nn::{Linear, LinearConfig};
    use burn::optim::{GradientsParams, ModuleOptimizer};
    use burn::tensor::TensorData;

    fn weights(model: &Linear) -> Vec<u32> {
        let w: Vec<f32> = model.weight.val().into_data().try_to_vec().unwrap();
        w.iter().map(|v| v.to_bits()).collect()
    }

    /// One step on a fixed input whose gradient depends on `scale`.
    fn step(model: Linear, optim: &mut ModuleOptimizer, scale: f32) -> Linear {
        let device = model.weight.val().device();
        let x = Tensor::<2>::from_data(
            TensorData::new(
                (0..96).map(|i| (i % 7) as f32 * scale - 1.0).collect(),
                [4, 24],
            ),
            &device,
        );
        let loss = model.forward(x).powi_scalar(2).mean();
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        optim.step(1e-3, model, grads)
    }

    /// Three steps on flex equal Burn's `Adam`'s to the bit, and each optimizer carries on from
    /// the other's saved state as from its own.
    #[test]
    fn equals_burns_adam_and_shares_its_state() {
        let device = Device::flex().autodiff();
        let burn = || AdamConfig::new().with_epsilon(1e-8).init();
        let fused = || ModuleOptimizer::from(FusedAdam::new(0.9, 0.999, 1e-8));
        let model = LinearConfig::new(24, 40).init(&device);
        let (mut a, mut b) = (model.clone(), model);
        let (mut optim_a, mut optim_b) = (burn(), fused());
        for scale in [1.0, -0.5, 0.25] {
            a = step(a, &mut optim_a, scale);
            b = step(b, &mut optim_b, scale);
            assert_eq!(weights(&a), weights(&b), "scale {scale}");
        }
        let mut fused_from_burn = fused().load_record(optim_a.to_record());
        let mut burn_from_fused = burn().load_record(optim_b.to_record());
        let next = step(a.clone(), &mut optim_a, 0.5);
        assert_eq!(weights(&step(a, &mut fused_from_burn, 0.5)), weights(&next));
        assert_eq!(weights(&step(b, &mut burn_from_fused, 0.5)), weights(&next));
    }

    /// Where the update does not fuse (here tensors with autodiff, as another backend's are
    /// not flex), Burn's `Adam` steps from the same state: the same values, step after step.
    #[test]
    fn elsewhere_steps_as_burns_adam() {
        let device = Device::flex().autodiff();
        let (fused, burn) = (
            FusedAdam::new(0.9, 0.999, 1e-8),
            AdamConfig::new().with_epsilon(1e-8).build(),
        );
        let t = |v: [f32; 3]| Tensor::<1>::from_data(TensorData::new(v.to_vec(), [3]), &device);
        let bits = |t: &Tensor<1>| -> Vec<u32> {
            let v: Vec<f32> = t.to_data().try_to_vec().unwrap();
            v.iter().map(|v| v.to_bits()).collect()
        };
        let (mut a, mut b) = (t([0.5, -1.0, 2.0]), t([0.5, -1.0, 2.0]));
        let (mut state_a, mut state_b) = (None, None);
        for k in 0..3 {
            let grad = t([k as f32 - 1.0, 0.3, -0.7]);
            (a, state_a) = fused.step(1e-3, a, grad.clone(), state_a);
            (b, state_b) = burn.step(1e-3, b, grad, state_b);
            assert_eq!(bits(&a), bits(&b), "step {k}");
        }
    }
}
