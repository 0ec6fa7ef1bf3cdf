//! Gradient accumulation as burn-train applies it: the micro-batches' gradients summed.

use std::collections::HashSet;

use burn::module::{Module, ModuleVisitor, Param, ParamId};
use burn::optim::GradientsParams;
use burn::tensor::Tensor;

/// The gradient burn-train's strategies apply at the end of an accumulation cycle of
/// `micro_batches` micro-batches (`SupervisedTraining::grads_accumulation`): their gradients
/// summed, which its docs describe as a larger batch with a learning rate that many times
/// larger. The towers give the cycle's mean (`grads`); with each device batch weighing the same
/// (`TowersStrategy`'s default), `micro_batches` times that mean is, on one device, burn-train's
/// sum exactly.
pub(crate) fn summed<M: Module>(
    grads: GradientsParams,
    model: &M,
    micro_batches: usize,
) -> GradientsParams {
    if micro_batches == 1 {
        return grads;
    }
    let mut scale = Scale {
        grads,
        factor: micro_batches as f64,
        scaled: HashSet::new(),
    };
    model.visit(&mut scale);
    scale.grads
}

/// Multiplies the gradient of every float parameter it visits by `factor`, once (a parameter
/// the model holds twice is visited twice).
struct Scale {
    grads: GradientsParams,
    factor: f64,
    scaled: HashSet<ParamId>,
}

impl ModuleVisitor for Scale {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if !self.scaled.insert(param.id) {
            return;
        }
        if let Some(grad) = self.grads.remove::<D>(param.id) {
            self.grads.register(param.id, grad.mul_scalar(self.factor));
        }
    }
}
