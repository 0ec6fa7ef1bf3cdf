//! Learning-rate schedules: TF 1.x's `exponential_decay`, `polynomial_decay` and
//! `piecewise_constant`, as functions of the global step.
//!
//! The step is the number of updates applied before the one being computed, as TF's
//! `global_step` reads while the train op runs: the first update uses step 0.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// A schedule as written in a config file. Exponential decay is given in epochs, as the TF
/// trainers define it; [`LrScheduleConfig::resolve`] turns epochs into steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum LrScheduleConfig {
    /// One rate throughout.
    Constant {
        /// The rate.
        value: f64,
    },
    /// `initial * decay_rate ^ (step / decay_steps)`, the exponent floored when `staircase`.
    ExponentialDecay {
        /// Rate at step 0.
        initial: f64,
        /// Factor per decay period.
        decay_rate: f64,
        /// Length of a decay period in epochs.
        decay_epochs: f64,
        /// Decay in whole periods (TF's `staircase=True`) rather than continuously.
        staircase: bool,
    },
    /// `(initial - end) * (1 - min(step, decay_steps) / decay_steps) ^ power + end`.
    Polynomial {
        /// Rate at step 0.
        initial: f64,
        /// Rate from `decay_steps` on.
        #[serde(default)]
        end: f64,
        /// Exponent; 1 is a linear ramp down.
        power: f64,
        /// Steps to reach `end`; the run's `max_steps` when absent.
        #[serde(default)]
        decay_steps: Option<u64>,
    },
    /// `values[0]` up to and including step `boundaries[0]`, `values[1]` up to
    /// `boundaries[1]`, ..., the last value after the last boundary.
    PiecewiseConstant {
        /// Increasing step boundaries.
        boundaries: Vec<u64>,
        /// One more value than boundaries.
        values: Vec<f64>,
    },
}

/// A schedule ready to be evaluated at any step.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum LrSchedule {
    /// One rate throughout.
    Constant(f64),
    /// See [`LrScheduleConfig::ExponentialDecay`], with the period in steps.
    ExponentialDecay {
        /// Rate at step 0.
        initial: f64,
        /// Factor per period.
        decay_rate: f64,
        /// Steps per period.
        decay_steps: u64,
        /// Whole periods only.
        staircase: bool,
    },
    /// See [`LrScheduleConfig::Polynomial`].
    Polynomial {
        /// Rate at step 0.
        initial: f64,
        /// Rate from `decay_steps` on.
        end: f64,
        /// Exponent.
        power: f64,
        /// Steps to reach `end`.
        decay_steps: u64,
    },
    /// See [`LrScheduleConfig::PiecewiseConstant`].
    PiecewiseConstant {
        /// Increasing step boundaries.
        boundaries: Vec<u64>,
        /// One more value than boundaries.
        values: Vec<f64>,
    },
}

impl LrScheduleConfig {
    /// Checks the rates and their decay: every rate finite and 0 or more (a negative one
    /// climbs the loss), a decay rate positive (a negative one to a fractional power is NaN),
    /// a polynomial's power 0 or more (a negative one is infinite at its end). The error names
    /// the setting.
    pub fn check(&self) -> std::result::Result<(), String> {
        let bad = |name: &str, v: f64, what: &str| {
            Err(format!("learning_rate.{name} must be {what}, got {v}"))
        };
        let rate = |name: &str, v: f64| match v.is_finite() && v >= 0.0 {
            true => Ok(()),
            false => bad(name, v, "a finite rate, 0 or more"),
        };
        match self {
            Self::Constant { value } => rate("value", *value),
            Self::ExponentialDecay {
                initial,
                decay_rate,
                decay_epochs,
                ..
            } => {
                rate("initial", *initial)?;
                if !(decay_rate.is_finite() && *decay_rate > 0.0) {
                    return bad("decay_rate", *decay_rate, "a positive number");
                }
                match decay_epochs.is_finite() {
                    true => Ok(()),
                    false => bad("decay_epochs", *decay_epochs, "a finite number"),
                }
            }
            Self::Polynomial {
                initial,
                end,
                power,
                ..
            } => {
                rate("initial", *initial)?;
                rate("end", *end)?;
                match power.is_finite() && *power >= 0.0 {
                    true => Ok(()),
                    false => bad("power", *power, "a finite number, 0 or more"),
                }
            }
            Self::PiecewiseConstant { values, .. } => {
                values.iter().try_for_each(|v| rate("values", *v))
            }
        }
    }

    /// The schedule for a run of `max_steps` updates of `examples_per_step` examples each over
    /// an epoch of `examples_per_epoch`. A decay period of `e` epochs is TF's
    /// `int(examples_per_epoch / examples_per_step * e)` steps.
    pub fn resolve(
        &self,
        examples_per_epoch: u64,
        examples_per_step: u64,
        max_steps: u64,
    ) -> Result<LrSchedule> {
        self.check().map_err(Error::Config)?;
        let bad = |m: String| Err(Error::Config(format!("learning_rate: {m}")));
        Ok(match self.clone() {
            Self::Constant { value } => LrSchedule::Constant(value),
            Self::ExponentialDecay {
                initial,
                decay_rate,
                decay_epochs,
                staircase,
            } => {
                if examples_per_step == 0 || decay_epochs <= 0.0 {
                    return bad(format!(
                        "decay_epochs ({decay_epochs}) and the batch size must be positive"
                    ));
                }
                let steps_per_epoch = examples_per_epoch as f64 / examples_per_step as f64;
                let decay_steps = (steps_per_epoch * decay_epochs) as u64;
                if decay_steps == 0 {
                    return bad(format!(
                        "{decay_epochs} epochs of {examples_per_epoch} examples is less than one \
                         step of {examples_per_step}"
                    ));
                }
                LrSchedule::ExponentialDecay {
                    initial,
                    decay_rate,
                    decay_steps,
                    staircase,
                }
            }
            Self::Polynomial {
                initial,
                end,
                power,
                decay_steps,
            } => {
                let decay_steps = decay_steps.unwrap_or(max_steps);
                if decay_steps == 0 {
                    return bad("polynomial decay over 0 steps".into());
                }
                LrSchedule::Polynomial {
                    initial,
                    end,
                    power,
                    decay_steps,
                }
            }
            Self::PiecewiseConstant { boundaries, values } => {
                if values.len() != boundaries.len() + 1 {
                    return bad(format!(
                        "{} boundaries need {} values, got {}",
                        boundaries.len(),
                        boundaries.len() + 1,
                        values.len()
                    ));
                }
                if boundaries.windows(2).any(|w| w[0] >= w[1]) {
                    return bad(format!("boundaries {boundaries:?} must increase"));
                }
                LrSchedule::PiecewiseConstant { boundaries, values }
            }
        })
    }
}

impl LrSchedule {
    /// The learning rate of the update made when `step` updates have been applied.
    pub fn at(&self, step: u64) -> f64 {
        match self {
            Self::Constant(value) => *value,
            Self::ExponentialDecay {
                initial,
                decay_rate,
                decay_steps,
                staircase,
            } => {
                let periods = if *staircase {
                    (step / decay_steps) as f64
                } else {
                    step as f64 / *decay_steps as f64
                };
                initial * decay_rate.powf(periods)
            }
            Self::Polynomial {
                initial,
                end,
                power,
                decay_steps,
            } => {
                let done = step.min(*decay_steps) as f64 / *decay_steps as f64;
                (initial - end) * (1.0 - done).powf(*power) + end
            }
            Self::PiecewiseConstant { boundaries, values } => {
                // TF: values[i] while step <= boundaries[i].
                let i = boundaries.partition_point(|&b| b < step);
                values[i]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * b.abs().max(1e-12)
    }

    #[test]
    fn cifar10_default_decays_tenfold_every_350_epochs() {
        // TF: int(50000 / 128 * 350) = int(136718.75) = 136718 steps per period.
        let config = LrScheduleConfig::ExponentialDecay {
            initial: 0.1,
            decay_rate: 0.1,
            decay_epochs: 350.0,
            staircase: true,
        };
        let s = config.resolve(50_000, 128, 1_000_000).unwrap();
        assert_eq!(
            s,
            LrSchedule::ExponentialDecay {
                initial: 0.1,
                decay_rate: 0.1,
                decay_steps: 136_718,
                staircase: true
            }
        );
        for (step, want) in [
            (0, 0.1),
            (136_717, 0.1),
            (136_718, 0.01),
            (273_435, 0.01),
            (273_436, 0.001),
            (999_999, 1e-8),
        ] {
            assert!(
                close(s.at(step), want),
                "step {step}: {} vs {want}",
                s.at(step)
            );
        }
    }

    #[test]
    fn inception_default_decays_by_0_16_every_30_epochs() {
        // TF: int(1281167 / 32 * 30) = int(1201094.06) = 1201094.
        let config = LrScheduleConfig::ExponentialDecay {
            initial: 0.1,
            decay_rate: 0.16,
            decay_epochs: 30.0,
            staircase: true,
        };
        let s = config.resolve(1_281_167, 32, 10_000_000).unwrap();
        assert!(close(s.at(1_201_093), 0.1));
        assert!(close(s.at(1_201_094), 0.016));
        assert!(close(s.at(2 * 1_201_094 + 5), 0.00256));
    }

    #[test]
    fn continuous_exponential_decay() {
        let s = LrSchedule::ExponentialDecay {
            initial: 0.5,
            decay_rate: 0.25,
            decay_steps: 100,
            staircase: false,
        };
        // 0.5 * 0.25^(50/100) = 0.5 * 0.5; 0.5 * 0.25^1.5 = 0.0625.
        assert!(close(s.at(50), 0.25));
        assert!(close(s.at(150), 0.0625));
    }

    #[test]
    fn polynomial_decay() {
        let config = LrScheduleConfig::Polynomial {
            initial: 0.1,
            end: 0.0,
            power: 2.0,
            decay_steps: None,
        };
        let s = config.resolve(1, 1, 1000).unwrap();
        // 0.1 * (1 - 250/1000)^2 = 0.1 * 0.5625
        assert!(close(s.at(250), 0.05625));
        assert!(close(s.at(0), 0.1));
        assert_eq!(s.at(1000), 0.0);
        assert_eq!(s.at(5000), 0.0);
        let linear = LrSchedule::Polynomial {
            initial: 1.0,
            end: 0.2,
            power: 1.0,
            decay_steps: 10,
        };
        // (1 - 0.2) * (1 - 0.3) + 0.2 = 0.76
        assert!(close(linear.at(3), 0.76));
        assert!(close(linear.at(12), 0.2));
    }

    #[test]
    fn piecewise_constant_includes_each_boundary_in_the_earlier_piece() {
        let config = LrScheduleConfig::PiecewiseConstant {
            boundaries: vec![100, 200],
            values: vec![1.0, 0.5, 0.1],
        };
        let s = config.resolve(1, 1, 1).unwrap();
        let at: Vec<f64> = [0, 100, 101, 200, 201, 10_000]
            .iter()
            .map(|&t| s.at(t))
            .collect();
        assert_eq!(at, [1.0, 1.0, 0.5, 0.5, 0.1, 0.1]);
    }

    #[test]
    fn bad_schedules_are_errors() {
        let pieces = |b: Vec<u64>, v: Vec<f64>| {
            LrScheduleConfig::PiecewiseConstant {
                boundaries: b,
                values: v,
            }
            .resolve(1, 1, 1)
        };
        assert!(pieces(vec![10], vec![1.0]).is_err());
        assert!(pieces(vec![10, 10], vec![1.0, 0.5, 0.1]).is_err());
        let tiny = LrScheduleConfig::ExponentialDecay {
            initial: 0.1,
            decay_rate: 0.1,
            decay_epochs: 0.5,
            staircase: true,
        };
        assert!(
            tiny.resolve(100, 128, 10).is_err(),
            "a period under one step"
        );
    }
}
