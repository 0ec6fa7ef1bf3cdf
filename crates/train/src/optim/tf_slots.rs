//! TF 1.x optimizers' slots (`VAR/Momentum`, `VAR/RMSProp`, ...) as our optimizers' state: what
//! continuing a TF run imports besides its weights.

use burn::optim::{AdamState, AdaptiveMomentumState, RecordState, StateSink};
use burn::tensor::{Device, Tensor, TensorData};

use super::optimizer::OptimizerConfig;
use super::rmsprop::TfRmsPropState;
use super::sgd::FusedSgdState;

/// TF 1.x's optimizers by the name their slots take after the variable's (`VAR/NAME`, the
/// second slot of an optimizer `VAR/NAME_1`, ...): the optimizer's default `name`.
pub(crate) const TF_OPTIMIZERS: [(&str, &str); 7] = [
    ("Momentum", "MomentumOptimizer"),
    ("RMSProp", "RMSPropOptimizer"),
    ("Adam", "AdamOptimizer"),
    ("Adagrad", "AdagradOptimizer"),
    ("AdagradDA", "AdagradDAOptimizer"),
    ("Adadelta", "AdadeltaOptimizer"),
    ("Ftrl", "FtrlOptimizer"),
];

impl OptimizerConfig {
    /// The slots TF 1.x's counterpart of this optimizer keeps for each variable it trains, in
    /// the order it makes them: none for `GradientDescentOptimizer`, `MomentumOptimizer`'s
    /// accumulator, `RMSPropOptimizer`'s mean square (`RMSProp`, which starts at 1) and
    /// momentum (`RMSProp_1`), `AdamOptimizer`'s first and second moments (`Adam`, `Adam_1`; its
    /// step count is in `beta1_power` and `beta2_power`, no slots), for Burn's Adam as for
    /// TF's ([`OptimizerConfig::TfAdam`]), though only TF's goes on as a TF run went.
    pub fn tf_slots(&self) -> &'static [&'static str] {
        match self {
            Self::Sgd => &[],
            Self::Momentum { .. } => &["Momentum"],
            Self::RmsProp { .. } => &["RMSProp", "RMSProp_1"],
            Self::Adam { .. } | Self::TfAdam { .. } => &["Adam", "Adam_1"],
        }
    }

    /// Records one parameter's state made of its TF slots' `values` (in
    /// [`tf_slots`](Self::tf_slots)' order, each in the parameter's layout) after `steps` updates
    /// (Adam's bias corrections count them) under `prefix`, as
    /// Burn's `ModuleOptimizer::to_record` records the state of the parameter whose id is
    /// `prefix`: by the state's own [`RecordState`], so that loading it back reads its fields.
    /// A rank above 5 is an error.
    pub fn record_tf_slots(
        &self,
        values: Vec<TensorData>,
        steps: usize,
        prefix: &str,
        sink: &mut StateSink,
    ) -> Result<(), String> {
        let state = (values, steps, prefix);
        match state.0.first().map(TensorData::rank) {
            Some(1) => self.record_ranked::<1>(state, sink),
            Some(2) => self.record_ranked::<2>(state, sink),
            Some(3) => self.record_ranked::<3>(state, sink),
            Some(4) => self.record_ranked::<4>(state, sink),
            Some(5) => self.record_ranked::<5>(state, sink),
            Some(rank) => return Err(format!("a slot of rank {rank} (at most 5 are read)")),
            None => {}
        }
        Ok(())
    }

    fn record_ranked<const D: usize>(
        &self,
        (values, steps, prefix): (Vec<TensorData>, usize, &str),
        sink: &mut StateSink,
    ) {
        // The states hold tensors; these live on the host only until flattened back to data.
        let device = Device::default();
        let mut tensors = values
            .into_iter()
            .map(|data| Tensor::<D>::from_data(data, &device));
        let mut next = || tensors.next().expect("one value per slot");
        match self {
            // Burn's Adam continues no TF run (see `tf_slots`).
            Self::Sgd | Self::Adam { .. } => {}
            Self::Momentum { .. } => FusedSgdState {
                velocity: Some(next()),
            }
            .state_flatten(prefix, sink),
            Self::RmsProp { .. } => TfRmsPropState {
                mean_square: next(),
                momentum: next(),
            }
            .state_flatten(prefix, sink),
            Self::TfAdam { .. } => {
                let moments = AdaptiveMomentumState::new(steps, next(), next());
                AdamState::new(moments).state_flatten(prefix, sink)
            }
        }
    }
}
