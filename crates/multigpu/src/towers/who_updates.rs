//! Who applies a step's update: the towers' optimizer, or the caller.

use burn::module::Module;
use burn::optim::{GradientsParams, ModuleOptimizer};

/// How the update that ends a cycle is applied to the model.
pub(super) enum Update<'u, M> {
    /// The towers' optimizer, at this learning rate ([`Towers::step`](super::Towers::step)).
    Optimizer(f64),
    /// The caller's function of the model and the mean gradient
    /// ([`Towers::step_with_update`](super::Towers::step_with_update)): e.g. a burn-train
    /// `Learner`, which owns its optimizer and learning-rate schedule.
    Caller(&'u mut dyn FnMut(M, GradientsParams) -> M),
}

impl<M: Module> Update<'_, M> {
    /// `model` updated with `grads`.
    pub(super) fn apply(
        &mut self,
        optim: &mut ModuleOptimizer,
        model: M,
        grads: GradientsParams,
    ) -> M {
        match self {
            Update::Optimizer(lr) => optim.step(*lr, model, grads),
            Update::Caller(update) => update(model, grads),
        }
    }

    /// The learning rate of the towers' optimizer; `None` when the caller updates.
    pub(super) fn learning_rate(&self) -> Option<f64> {
        match self {
            Update::Optimizer(lr) => Some(*lr),
            Update::Caller(_) => None,
        }
    }
}
