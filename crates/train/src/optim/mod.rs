//! How weights move: optimizers, learning-rate schedules and moving averages.
//!
//! - [`OptimizerConfig`] (`optimizer.rs`): SGD, momentum, TF's RMSProp, Adam, as Burn optimizers.
//! - [`Decayed`] (`decayed.rs`): L2 weight decay added to the gradient in each parameter's step.
//! - [`TfRmsProp`] (`rmsprop.rs`): RMSProp with TF's epsilon placement and state.
//! - [`FusedAdam`] (`adam.rs`): Burn's Adam, its update in one pass on flex.
//! - [`FusedSgd`] (`sgd.rs`): Burn's SGD, plain or with momentum, its update in one pass on flex.
//! - [`LrScheduleConfig`] (`schedule.rs`): exponential (staircase), polynomial, piecewise constant.
//! - [`MovingAverage`] (`ema.rs`): TF's exponential moving average of the weights.
//! - `tf_slots.rs`: TF 1.x optimizers' slots as our optimizers' state ([`TF_OPTIMIZERS`]).

mod adam;
mod decayed;
mod ema;
mod optimizer;
mod rmsprop;
#[cfg(test)]
mod same_as_burn;
mod schedule;
mod sgd;
mod tf_slots;

pub use adam::FusedAdam;
pub use decayed::{Decayed, with_weight_decays};
pub use ema::MovingAverage;
pub use optimizer::OptimizerConfig;
pub use rmsprop::{TfRmsProp, TfRmsPropState};
pub use schedule::{LrSchedule, LrScheduleConfig};
pub use sgd::{FusedSgd, FusedSgdState};
pub(crate) use tf_slots::TF_OPTIMIZERS;
