//! Dynamic loss scaling, as `torch.amp.GradScaler` does it, for training in f16.
//!
//! In f16 (5 exponent bits) small gradients underflow to zero. Every tower's loss is multiplied
//! by a scale `S` before backward, so the gradients come out `S` times larger; the update
//! divides them by `S` again. When any gradient overflowed (an infinity or NaN anywhere), the
//! update is skipped and `S` halved; after [`LossScaling::growth_interval`] updates in a row
//! without one, `S` doubles. The check reads the reduced gradient, which is the same on every
//! tower and, once the ranks have exchanged, on every rank: all of them skip the same steps.

use burn::config::Config;
use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor};
use serde::{Deserialize, Serialize};

use crate::buckets;
use crate::reduce::Layout;

/// The least scale: f16's smallest value. Halved past it, `1 / scale` left f32 (after ~145
/// overflows in a row from 65,536) and the next update multiplied its gradients by infinity.
pub const LEAST_LOSS_SCALE: f64 = 5.960_464_477_539_063e-8; // 2^-24
/// The largest scale: f32's largest power of two, so that a scaled loss can be finite.
pub const LARGEST_LOSS_SCALE: f64 = 1.701_411_834_604_692_3e38; // 2^127

/// The settings of dynamic loss scaling (torch's defaults): [`LossScaling::new`] and `with_*`,
/// as Burn's configs. [`TowersConfig::validate`](crate::TowersConfig::validate) checks them.
#[derive(Config, Debug, PartialEq)]
#[non_exhaustive]
pub struct LossScaling {
    /// The first scale. 65,536 by default.
    #[config(default = 65536.0)]
    pub initial: f64,
    /// Updates in a row without an overflow after which the scale doubles. 2,000 by default.
    #[config(default = 2000)]
    pub growth_interval: u64,
}

impl Default for LossScaling {
    fn default() -> Self {
        Self::new()
    }
}

impl LossScaling {
    /// Checks the settings: the initial scale in [[`LEAST_LOSS_SCALE`],
    /// [`LARGEST_LOSS_SCALE`]], the growth interval at least one update.
    pub fn check(&self) -> Result<(), String> {
        if !(LEAST_LOSS_SCALE..=LARGEST_LOSS_SCALE).contains(&self.initial) {
            return Err(format!(
                "loss_scaling.initial must be from 2^-24 to 2^127, got {}",
                self.initial
            ));
        }
        if self.growth_interval == 0 {
            return Err("loss_scaling.growth_interval must be at least 1 update".into());
        }
        Ok(())
    }
}

/// Where dynamic loss scaling stands between updates: what a checkpoint keeps, so that a resumed
/// run scales its next loss exactly as the uninterrupted run would have.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LossScaleState {
    /// What the next step's losses are multiplied by.
    pub scale: f64,
    /// Updates since the last overflow or growth (the scale doubles when they reach
    /// [`LossScaling::growth_interval`]).
    pub good_updates: u64,
}

/// The scale between updates.
#[derive(Clone, Debug)]
pub(crate) struct LossScaler {
    settings: LossScaling,
    scale: f64,
    /// Updates since the last overflow or growth.
    good: u64,
}

impl LossScaler {
    pub(crate) fn new(settings: LossScaling) -> Self {
        Self {
            scale: settings.initial,
            settings,
            good: 0,
        }
    }

    /// What the losses are multiplied by now.
    pub(crate) fn scale(&self) -> f64 {
        self.scale
    }

    /// The scale and the count toward its growth.
    pub(crate) fn state(&self) -> LossScaleState {
        LossScaleState {
            scale: self.scale,
            good_updates: self.good,
        }
    }

    /// Continues from `state`, as a checkpoint kept it; a scale out of the range a scaler
    /// can reach (a damaged or edited checkpoint) is brought into it, NaN back to the initial.
    pub(crate) fn restore(&mut self, state: LossScaleState) {
        self.scale = match state.scale.is_nan() {
            true => self.settings.initial,
            false => state.scale.clamp(LEAST_LOSS_SCALE, LARGEST_LOSS_SCALE),
        };
        self.good = state.good_updates;
    }

    /// After an update's check: halve the scale if it overflowed, else count it and double
    /// the scale at the interval.
    pub(crate) fn record(&mut self, overflowed: bool) {
        if overflowed {
            self.scale = (self.scale / 2.0).max(LEAST_LOSS_SCALE);
            self.good = 0;
            return;
        }
        self.good += 1;
        if self.good >= self.settings.growth_interval {
            self.scale = (self.scale * 2.0).min(LARGEST_LOSS_SCALE);
            self.good = 0;
        }
    }
}

/// `grads` divided by `scale`, or `None` when any of their values is not finite. One
/// [`finite_probe`] per gradient and one read.
pub(crate) fn unscaled(
    layout: &Layout,
    grads: GradientsParams,
    scale: f64,
    device: &Device,
) -> Option<GradientsParams> {
    let (grads, copy) = layout.copy(grads);
    let probes: Vec<Tensor<1>> = (layout.flatten(copy, device).into_iter())
        .map(finite_probe)
        .collect();
    let finite = probes.is_empty() || {
        let sum = buckets::joined(probes).sum().into_scalar::<f32>();
        sum.is_finite()
    };
    finite.then(|| layout.scale(grads, 1.0 / scale))
}

/// `Σ 0·g` over the flattened gradient `g`, shape `[1]`: 0 when every value is finite, NaN
/// otherwise. Summed by [`towers_kernels::long_sum`]: on a device whose loops stop early
/// (lavapipe) one sum over a long vector leaves values out, and there a NaN at place 599,999 of
/// 600,000 summed to 0, and an overflow there reached the weights (bench/HISTORY.md,
/// "Reductions that drop values on wgpu").
fn finite_probe(g: Tensor<1>) -> Tensor<1> {
    towers_kernels::long_sum(g.mul_scalar(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_on_overflow_and_doubles_after_the_interval() {
        let mut scaler = LossScaler::new(LossScaling {
            initial: 1024.0,
            growth_interval: 3,
        });
        scaler.record(true);
        assert_eq!(scaler.scale(), 512.0);
        scaler.record(false);
        scaler.record(false);
        assert_eq!(scaler.scale(), 512.0);
        scaler.record(true);
        scaler.record(false);
        scaler.record(false);
        assert_eq!(scaler.scale(), 256.0);
        scaler.record(false);
        assert_eq!(scaler.scale(), 512.0);
    }

    #[test]
    fn the_scale_stays_where_its_inverse_is_finite_in_f32() {
        let mut scaler = LossScaler::new(LossScaling::new());
        for _ in 0..200 {
            scaler.record(true);
        }
        assert_eq!(scaler.scale(), LEAST_LOSS_SCALE);
        assert!((1.0 / scaler.scale() as f32).is_finite());
        for (kept, restored) in [(0.0, LEAST_LOSS_SCALE), (f64::INFINITY, LARGEST_LOSS_SCALE)] {
            scaler.restore(LossScaleState {
                scale: kept,
                good_updates: 0,
            });
            assert_eq!(scaler.scale(), restored);
        }
        scaler.restore(LossScaleState {
            scale: f64::NAN,
            good_updates: 0,
        });
        assert_eq!(scaler.scale(), 65536.0);
        assert!(LossScaling::new().with_initial(0.0).check().is_err());
        assert!(LossScaling::new().with_growth_interval(0).check().is_err());
        assert!(LossScaling::new().check().is_ok());
    }
}
