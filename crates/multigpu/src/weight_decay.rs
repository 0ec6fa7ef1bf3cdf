//! [`DecayInUpdate`]: the gradient of an L2 penalty, added to the mean gradient just before
//! the update instead of being taken through backward.
//!
//! A penalty `decay · ΣW² / 2` taken through backward costs each decayed parameter a fill, a
//! product and an addition there: on a fused GPU, kernels of their own (Inception v3: ~300
//! launches, lavapipe, 2026-11-29). Its gradient, `decay · W`, added to the mean gradient right
//! before the update costs one fused element-wise kernel per parameter (its ops are queued
//! before the whole update, which fusion does not reorder), once per update rather than per
//! tower and micro-batch, and works with any optimizer. An optimizer that adds it in each
//! parameter's own step (towers-train's `Decayed`) costs nothing more, inside the update's
//! kernel.

use std::collections::{HashMap, HashSet};

use burn::module::{Module, ModuleVisitor, Param, ParamId};
use burn::optim::GradientsParams;
use burn::tensor::Tensor;

/// Which parameters take `decay · W` in their gradient at each update, and with which decay
/// ([`Towers::with_weight_decay`](crate::Towers::with_weight_decay)).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct DecayInUpdate {
    decays: HashMap<ParamId, f64>,
}

impl DecayInUpdate {
    /// The decays of `decays`, those of 0 left out.
    pub(crate) fn new(decays: impl IntoIterator<Item = (ParamId, f64)>) -> Self {
        let decays = (decays.into_iter())
            .filter(|(_, decay)| *decay != 0.0)
            .collect();
        Self { decays }
    }

    /// Whether no parameter is decayed.
    pub(crate) fn is_empty(&self) -> bool {
        self.decays.is_empty()
    }

    /// What ranks must agree on: `none`, or each decayed tensor's slot (its place among the
    /// model's trainable tensors, `slots` by id: parameter ids differ between processes) with
    /// its decay, in slot order.
    pub(crate) fn summary(&self, slots: &HashMap<ParamId, usize>) -> String {
        let mut decays: Vec<(usize, f64)> = (self.decays.iter())
            .filter_map(|(id, decay)| Some((*slots.get(id)?, *decay)))
            .collect();
        decays.sort_by_key(|(slot, _)| *slot);
        match decays.is_empty() {
            true => "none".into(),
            false => format!("(tensor, decay) {decays:?}"),
        }
    }

    /// A warning naming how many decayed parameters `model` does not hold: they would never
    /// be decayed, silently. The usual cause is ids of another instance of the model, as Burn
    /// gives parameters new ids when a model is made (and a loaded record brings its own). A
    /// frozen parameter is held, and left undecayed without a word, as PyTorch leaves one.
    pub(crate) fn strangers_warning<M: Module>(&self, model: &M) -> Option<String> {
        let mut held = HeldIds(HashSet::new());
        model.visit(&mut held);
        let strangers = self.decays.keys().filter(|id| !held.0.contains(id));
        match strangers.count() {
            0 => None,
            count => Some(format!(
                "warning: weight decay: {count} of the {} parameters given a decay are not the \
                 model's (ids of another instance of the model? take them from the model the \
                 towers were made with), and are not decayed",
                self.decays.len()
            )),
        }
    }

    /// `grads` with `decay · W` added to each decayed parameter's gradient, `W` read from
    /// `model` (the one about to be updated). A decayed parameter that trains but got no
    /// gradient (the loss does not use it) gets `decay · W` alone, as the penalty would give it.
    pub(crate) fn added<M: Module>(&self, model: &M, grads: GradientsParams) -> GradientsParams {
        if self.is_empty() {
            return grads;
        }
        let mut adding = Adding {
            decays: &self.decays,
            grads,
            added: HashSet::new(),
        };
        model.visit(&mut adding);
        adding.grads
    }
}

/// The ids of a model's float parameters.
struct HeldIds(HashSet<ParamId>);

impl ModuleVisitor for HeldIds {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        self.0.insert(param.id);
    }
}

struct Adding<'a> {
    decays: &'a HashMap<ParamId, f64>,
    grads: GradientsParams,
    /// The parameters decayed so far: a parameter the model holds twice (tied) is visited
    /// twice, and decayed once.
    added: HashSet<ParamId>,
}

impl ModuleVisitor for Adding<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let Some(&decay) = self.decays.get(&param.id) else {
            return;
        };
        if !self.added.insert(param.id) {
            return;
        }
        let weight = param.val();
        let grad = self.grads.remove::<D>(param.id);
        if grad.is_none() && !weight.is_require_grad() {
            return;
        }
        // The gradients live on the inner (non-autodiff) device, as the optimizers read them.
        let decayed = weight.inner().mul_scalar(decay);
        let grad = match grad {
            Some(grad) => {
                let dtype = grad.dtype();
                grad + decayed.cast(dtype)
            }
            None => decayed,
        };
        self.grads.register(param.id, grad);
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::Device;

    use super::*;

    #[derive(Module, Debug)]
    struct Tied {
        a: Param<Tensor<1>>,
        b: Param<Tensor<1>>,
    }

    #[test]
    fn a_parameter_held_twice_is_decayed_once() {
        let device = Device::flex().autodiff();
        let a = Param::from_tensor(Tensor::<1>::ones([4], &device));
        let id = a.id;
        let model = Tied { b: a.clone(), a };
        let grads = DecayInUpdate::new([(id, 0.5)]).added(&model, GradientsParams::new());
        let grad = grads.get::<1>(id).expect("decayed");
        assert_eq!(grad.into_data().try_to_vec::<f32>().unwrap(), vec![0.5; 4]);
    }

    #[test]
    fn decays_of_parameters_the_model_does_not_hold_are_named() {
        let device = Device::flex().autodiff();
        let a = Param::from_tensor(Tensor::<1>::ones([4], &device));
        let frozen = Param::from_tensor(Tensor::<1>::ones([4], &device)).set_require_grad(false);
        let (a_id, frozen_id, stranger) = (a.id, frozen.id, ParamId::new());
        let model = Tied { a, b: frozen };
        let held = DecayInUpdate::new([(a_id, 0.1), (frozen_id, 0.1)]);
        assert_eq!(held.strangers_warning(&model), None);
        let decays = DecayInUpdate::new([(a_id, 0.1), (stranger, 0.1), (ParamId::new(), 0.0)]);
        let warning = decays.strangers_warning(&model).expect("one stranger");
        assert!(warning.contains("1 of the 2 parameters"), "{warning}");
    }
}
