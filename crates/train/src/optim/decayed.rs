//! [`Decayed`]: an optimizer whose step adds L2 weight decay to the gradient it is given, and
//! [`with_weight_decays`], which builds a model's optimizer with it for the decayed parameters.

use std::collections::BTreeMap;

use burn::module::{ParamGroup, ParamId};
use burn::optim::{LearningRate, ModuleOptimizer, Optimizer};
use burn::tensor::{Device, Tensor};

/// `inner`, its gradient `g + decay · W`: the gradient of an L2 penalty `decay · ΣW² / 2` that
/// the loss holds only as a value (see `ImageClassifier::loss_decay_in_update`).
///
/// The addition is made in the parameter's own step, just before `inner`'s update: on a fused
/// GPU it joins the update's element-wise kernel, where the penalty taken through backward costs
/// a fill, a product and an addition of their own, and an addition made before the whole update
/// (`Towers::with_weight_decay`) a kernel of its own. Its state is `inner`'s, so checkpoints of
/// either load into the other.
#[derive(Debug, Clone)]
pub struct Decayed<O> {
    inner: O,
    decay: f64,
}

impl<O> Decayed<O> {
    /// `inner` with weight decay `decay`.
    pub fn new(inner: O, decay: f64) -> Self {
        Self { inner, decay }
    }
}

impl<O: Optimizer> Optimizer for Decayed<O> {
    type State<const D: usize> = O::State<D>;

    fn step<const D: usize>(
        &self,
        lr: LearningRate,
        tensor: Tensor<D>,
        grad: Tensor<D>,
        state: Option<Self::State<D>>,
    ) -> (Tensor<D>, Option<Self::State<D>>) {
        let grad = grad + tensor.clone().mul_scalar(self.decay);
        self.inner.step(lr, tensor, grad, state)
    }

    fn to_device<const D: usize>(state: Self::State<D>, device: &Device) -> Self::State<D> {
        O::to_device(state, device)
    }
}

/// `optim` for every parameter, [`Decayed`] for those of `decays` (one group per decay
/// value; a decay of 0 leaves its parameter to `optim` alone).
///
/// Build it for the model it will update, before loading a checkpoint's state into it: adding a
/// group to a `ModuleOptimizer` drops its groups' states.
pub fn with_weight_decays<O: Optimizer>(optim: O, decays: &[(ParamId, f64)]) -> ModuleOptimizer {
    // Grouped by the decay's bits: f64 is not `Ord`.
    let mut groups = BTreeMap::<u64, Vec<ParamId>>::new();
    for &(id, decay) in decays.iter().filter(|(_, decay)| *decay != 0.0) {
        groups.entry(decay.to_bits()).or_default().push(id);
    }
    let mut all = ModuleOptimizer::from(optim.clone());
    for (decay, ids) in groups {
        let decayed = Decayed::new(optim.clone(), f64::from_bits(decay));
        all = all.with_group(ParamGroup::from_ids(ids), decayed, None);
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optim::FusedSgd;
    use burn::module::{Module, Param};
    use burn::optim::GradientsParams;
    use burn::tensor::TensorData;

    #[derive(Module, Debug)]
    struct Three {
        a: Param<Tensor<1>>,
        b: Param<Tensor<1>>,
        c: Param<Tensor<1>>,
    }

    /// Minimizes `Σw` (gradient 1 everywhere) from `w = 1`, 2 steps at lr 0.1, `a` decayed by
    /// 0.5, `b` by 0.25, `c` not: `w <- w - lr (1 + decay w)`, against the formula.
    #[test]
    fn each_decayed_parameter_steps_with_its_decay_added_to_its_gradient() {
        let device = Device::flex().autodiff();
        let one = || Param::from_data(TensorData::new(vec![1.0f32], [1]), &device);
        let mut model = Three {
            a: one(),
            b: one(),
            c: one(),
        };
        let decays = [(model.a.id, 0.5), (model.b.id, 0.25), (model.c.id, 0.0)];
        let mut optim = with_weight_decays(FusedSgd::plain(), &decays);
        for _ in 0..2 {
            let loss = model.a.val() + model.b.val() + model.c.val();
            let grads = GradientsParams::from_grads(loss.sum().backward(), &model);
            model = optim.step(0.1, model, grads);
        }
        let formula = |decay: f64| {
            let step = |w: f64| w - 0.1 * (1.0 + decay * w);
            step(step(1.0))
        };
        let got = [&model.a, &model.b, &model.c].map(|w| w.val().into_scalar::<f32>() as f64);
        let want = [formula(0.5), formula(0.25), formula(0.0)];
        for (got, want) in got.iter().zip(want) {
            assert!((got - want).abs() < 1e-6, "{got:?} vs {want:?}");
        }
    }
}
