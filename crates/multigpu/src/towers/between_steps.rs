//! What [`Towers`](super::Towers) keeps between steps: models and optimizers, the
//! micro-batches of an accumulation cycle, and the gradient copy asked for.

use burn::optim::{GradientsParams, ModuleOptimizer};

use crate::reduce::Layout;

/// A copy of one update's gradient, when asked for.
#[derive(Default)]
pub(super) struct GradientTap {
    /// Whether the next update keeps a copy.
    pub(super) wanted: bool,
    pub(super) kept: Option<GradientsParams>,
}

impl GradientTap {
    /// `grads`, after keeping a copy (sharing the tensors) when one is wanted.
    pub(super) fn pass(&mut self, layout: &Layout, grads: GradientsParams) -> GradientsParams {
        if !std::mem::take(&mut self.wanted) {
            return grads;
        }
        let (grads, copy) = layout.copy(grads);
        self.kept = Some(copy);
        grads
    }
}

/// The models and optimizers between steps. The `Option`s are empty only while an optimizer
/// step, which takes the model by value, runs.
pub(super) enum State<M> {
    /// One tower on the model's device.
    Single {
        model: Option<M>,
        optim: ModuleOptimizer,
    },
    /// The model and its optimizer on the parameter device; replicas forked from it after each
    /// update.
    ParameterDevice {
        master: Option<M>,
        optim: ModuleOptimizer,
        replicas: Vec<M>,
    },
    /// A replica and an optimizer per tower; the model is replica 0.
    AllReduce {
        replicas: Vec<M>,
        optims: Vec<ModuleOptimizer>,
    },
}

impl<M> State<M> {
    /// The model, taken out for its update (the caller puts it back).
    ///
    /// # Panics
    ///
    /// Under the all-reduce, where each tower updates its own replica.
    pub(super) fn take_model(&mut self) -> M {
        match self {
            State::Single { model, .. } => model.take().expect(PRESENT),
            State::ParameterDevice { master, .. } => master.take().expect(PRESENT),
            State::AllReduce { .. } => unreachable!("under the all-reduce the towers update"),
        }
    }

    /// The optimizer that updates the model.
    ///
    /// # Panics
    ///
    /// Under the all-reduce, where each tower has its own.
    pub(super) fn optimizer_mut(&mut self) -> &mut ModuleOptimizer {
        match self {
            State::Single { optim, .. } | State::ParameterDevice { optim, .. } => optim,
            State::AllReduce { .. } => unreachable!("under the all-reduce the towers update"),
        }
    }
}

/// The micro-batches run since the last update.
pub(super) struct Cycle<M> {
    /// Micro-batches run so far in this cycle.
    pub(super) micro: usize,
    /// The micro-batches' summed weight (see [`TowerBatch::weights`](crate::TowerBatch)).
    pub(super) weight: f64,
    /// The same per tower: the weights of the towers' parts, summed (towers only).
    pub(super) part_weights: Vec<f64>,
    /// Summed gradients per tower, on the tower's device (scaled by slice size).
    pub(super) grads: Vec<GradientsParams>,
    /// The replicas running this cycle (towers only).
    pub(super) work: Vec<M>,
    /// Whether the next micro-batch ends the cycle, however few it then holds
    /// ([`Towers::end_cycle_early`](super::Towers::end_cycle_early)).
    pub(super) ends_early: bool,
}

impl<M> Default for Cycle<M> {
    fn default() -> Self {
        Self {
            micro: 0,
            weight: 0.0,
            part_weights: Vec::new(),
            grads: Vec::new(),
            work: Vec::new(),
            ends_early: false,
        }
    }
}

pub(super) const PRESENT: &str = "the model is only taken out during an optimizer step";
