//! [`FusedSgd`]: Burn's SGD, plain or with momentum, its update in one pass on flex.

use burn::optim::{LearningRate, Optimizer, RecordState, StateSink, StateSource, join_path};
use burn::tensor::{Device, Tensor};
use towers_models::{MomentumStep, SgdStep, fused_sgd};

/// Burn's `Sgd` without weight decay (the model's loss holds it), plain or with Burn's momentum,
/// its update on f32 flex tensors in one pass on all cores ([`towers_models::fused_sgd`], the
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
    use burn::nn::{Linear, LinearConfig};
    use burn::optim::momentum::MomentumConfig;
    use burn::optim::{GradientsParams, ModuleOptimizer, SgdConfig};
    use burn::tensor::TensorData;

    fn bits(t: Tensor<2>) -> Vec<u32> {
        let values: Vec<f32> = t.into_data().try_to_vec().unwrap();
        values.iter().map(|v| v.to_bits()).collect()
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
        optim.step(0.05, model, grads)
    }

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

    /// Three steps on flex equal Burn's `Sgd`'s to the bit, and each optimizer carries on from
    /// the other's saved state as from its own.
    #[test]
    fn equals_burns_sgd_and_shares_its_state() {
        let device = Device::flex().autodiff();
        for (config, fused) in pairs() {
            let burn = || config.init();
            let ours = || ModuleOptimizer::from(fused);
            let model = LinearConfig::new(24, 40).init(&device);
            let (mut a, mut b) = (model.clone(), model);
            let (mut optim_a, mut optim_b) = (burn(), ours());
            for scale in [1.0, -0.5, 0.25] {
                a = step(a, &mut optim_a, scale);
                b = step(b, &mut optim_b, scale);
                assert_eq!(bits(a.weight.val()), bits(b.weight.val()), "{fused:?}");
            }
            let mut ours_from_burn = ours().load_record(optim_a.to_record());
            let mut burn_from_ours = burn().load_record(optim_b.to_record());
            let next = bits(step(a.clone(), &mut optim_a, 0.5).weight.val());
            let from_burn = step(a, &mut ours_from_burn, 0.5);
            let from_ours = step(b, &mut burn_from_ours, 0.5);
            assert_eq!(bits(from_burn.weight.val()), next, "{fused:?}");
            assert_eq!(bits(from_ours.weight.val()), next, "{fused:?}");
        }
    }

    /// Where the update does not fuse (here tensors with autodiff, as another backend's are
    /// not flex), Burn's ops step as Burn's `Sgd` does: the same values, step after step.
    #[test]
    fn elsewhere_steps_as_burns_sgd() {
        let device = Device::flex().autodiff();
        let t = |v: [f32; 3]| Tensor::<2>::from_data(TensorData::new(v.to_vec(), [1, 3]), &device);
        for (config, fused) in pairs() {
            let burn = config.build();
            let (mut a, mut b) = (t([0.5, -1.0, 2.0]), t([0.5, -1.0, 2.0]));
            let (mut state_a, mut state_b) = (None, None);
            for k in 0..3 {
                let grad = t([k as f32 - 1.0, 0.3, -0.7]);
                (a, state_a) = fused.step(0.05, a, grad.clone(), state_a);
                (b, state_b) = burn.step(0.05, b, grad, state_b);
                assert_eq!(bits(a.clone()), bits(b.clone()), "{fused:?}, step {k}");
            }
        }
    }
}
