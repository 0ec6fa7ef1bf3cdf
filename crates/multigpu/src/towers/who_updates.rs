//! Who applies a step's update: the towers' optimizer, or the caller.

use burn::module::Module;
use burn::optim::{GradientsParams, ModuleOptimizer};

use super::Towers;

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

impl<M: Module> Towers<M> {
    /// The model, taken out of the towers' state, updated by `update` with `grads` once loss
    /// scaling is undone, the decay added and a copy kept where asked for; as it was when the
    /// update is skipped (`grads` not finite, or loss scaling's overflow), which it returns
    /// too. The caller puts the model back.
    pub(super) fn updated(
        &mut self,
        grads: Option<GradientsParams>,
        update: &mut Update<'_, M>,
    ) -> (M, bool) {
        let grads = self.unscaled(grads);
        let skipped = grads.is_none();
        let model = self.state.take_model();
        let grads = grads.map(|grads| self.decay.added(&model, grads));
        let grads = grads.map(|grads| self.tap.pass(&self.layout, grads));
        let model = match grads {
            Some(grads) => update.apply(self.state.optimizer_mut(), model, grads),
            None => model,
        };
        (model, skipped)
    }
}
