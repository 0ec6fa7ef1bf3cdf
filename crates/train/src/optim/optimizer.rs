//! Optimizers by name, as a config file gives them, built as Burn's [`ModuleOptimizer`].
//!
//! The model's loss holds its weight decay's value; its gradient is either in the loss's too
//! ([`init`](OptimizerConfig::init)) or added by the optimizer
//! ([`init_with_weight_decays`](OptimizerConfig::init_with_weight_decays), the trainer's).

use burn::module::ParamId;
use burn::optim::ModuleOptimizer;
use serde::{Deserialize, Serialize};

use super::adam::FusedAdam;
use super::decayed::with_weight_decays;
use super::rmsprop::TfRmsProp;
use super::sgd::FusedSgd;

/// Which optimizer updates the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum OptimizerConfig {
    /// Plain gradient descent (TF's `GradientDescentOptimizer`, the CIFAR-10 trainer's); on flex
    /// in one pass ([`FusedSgd`]).
    Sgd,
    /// Gradient descent with momentum, as TF's `MomentumOptimizer` and PyTorch's SGD:
    /// `v <- momentum * v + g; w <- w - lr * v` (Burn's momentum with dampening 0); on flex in
    /// one pass ([`FusedSgd`]).
    Momentum {
        /// Momentum factor.
        momentum: f64,
        /// Nesterov's variant.
        #[serde(default)]
        nesterov: bool,
    },
    /// TF's `RMSPropOptimizer` (see [`TfRmsProp`]); the Inception trainer's, with decay 0.9,
    /// momentum 0.9, epsilon 1.0.
    #[serde(rename = "rmsprop")]
    RmsProp {
        /// Decay of the mean square.
        decay: f64,
        /// Momentum.
        momentum: f64,
        /// Added under the square root.
        epsilon: f64,
    },
    /// Adam (Burn's), with bias correction; on flex in one pass ([`FusedAdam`]).
    Adam {
        /// Decay of the first moment.
        beta1: f64,
        /// Decay of the second moment.
        beta2: f64,
        /// Added to the root of the second moment.
        epsilon: f64,
    },
    /// TF 1.x's `AdamOptimizer` (TF-slim's `--optimizer=adam`): Adam with its epsilon added
    /// before the bias correction, as TF adds it ([`FusedAdam::tf`]); what continues a TF run
    /// of Adam.
    TfAdam {
        /// Decay of the first moment.
        beta1: f64,
        /// Decay of the second moment.
        beta2: f64,
        /// Added to the root of the uncorrected second moment.
        epsilon: f64,
    },
}

impl OptimizerConfig {
    /// The Inception trainer's RMSProp: decay 0.9, momentum 0.9, epsilon 1.0.
    pub fn inception_rmsprop() -> Self {
        Self::RmsProp {
            decay: 0.9,
            momentum: 0.9,
            epsilon: 1.0,
        }
    }

    /// Checks the settings: each finite, the decays and momenta in [0, 1) (at 1 Adam's bias
    /// correction divides by zero, and a momentum of 1 never forgets), the epsilons positive.
    /// The error names the setting.
    pub fn check(&self) -> Result<(), String> {
        let fraction = |name: &str, v: f64| match (0.0..1.0).contains(&v) && (v as f32) < 1.0 {
            true => Ok(()),
            false => Err(format!("optimizer.{name} must be in [0, 1), got {v}")),
        };
        let positive = |name: &str, v: f64| match v.is_finite() && v as f32 > 0.0 {
            true => Ok(()),
            false => Err(format!(
                "optimizer.{name} must be a positive number, got {v}"
            )),
        };
        match *self {
            Self::Sgd => Ok(()),
            Self::Momentum { momentum, .. } => fraction("momentum", momentum),
            Self::RmsProp {
                decay,
                momentum,
                epsilon,
            } => fraction("decay", decay)
                .and(fraction("momentum", momentum))
                .and(positive("epsilon", epsilon)),
            Self::Adam {
                beta1,
                beta2,
                epsilon,
            }
            | Self::TfAdam {
                beta1,
                beta2,
                epsilon,
            } => fraction("beta1", beta1)
                .and(fraction("beta2", beta2))
                .and(positive("epsilon", epsilon)),
        }
    }

    /// A fresh optimizer (no state).
    pub fn init(&self) -> ModuleOptimizer {
        self.init_with_weight_decays(&[])
    }

    /// A fresh optimizer that adds `decay · W` to the gradient of each parameter of `decays` in
    /// its step ([`Decayed`](super::Decayed)): for a loss that holds those L2 penalties as
    /// values only. Build it for the model it updates, before loading a checkpoint's state.
    pub fn init_with_weight_decays(&self, decays: &[(ParamId, f64)]) -> ModuleOptimizer {
        match *self {
            Self::Sgd => with_weight_decays(FusedSgd::plain(), decays),
            Self::Momentum { momentum, nesterov } => {
                with_weight_decays(FusedSgd::with_momentum(momentum, 0.0, nesterov), decays)
            }
            Self::RmsProp {
                decay,
                momentum,
                epsilon,
            } => {
                let rmsprop = TfRmsProp {
                    decay,
                    momentum,
                    epsilon,
                };
                with_weight_decays(rmsprop, decays)
            }
            Self::Adam {
                beta1,
                beta2,
                epsilon,
            } => {
                let adam = FusedAdam::new(beta1 as f32, beta2 as f32, epsilon as f32);
                with_weight_decays(adam, decays)
            }
            Self::TfAdam {
                beta1,
                beta2,
                epsilon,
            } => {
                let adam = FusedAdam::tf(beta1 as f32, beta2 as f32, epsilon as f32);
                with_weight_decays(adam, decays)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::module::{Module, Param};
    use burn::optim::GradientsParams;
    use burn::tensor::{Device, Tensor, TensorData};

    #[derive(Module, Debug)]
    struct Scalar {
        w: Param<Tensor<1>>,
    }

    /// Minimizes `w^2 / 2` (gradient `w`) from `w = 1` for 3 steps at lr 0.1.
    fn run(config: &OptimizerConfig) -> Vec<f32> {
        let device = Device::flex().autodiff();
        let mut model = Scalar {
            w: Param::from_data(TensorData::new(vec![1.0f32], [1]), &device),
        };
        let mut optim = config.init();
        let mut trace = Vec::new();
        for _ in 0..3 {
            let loss = model.w.val().square().sum().div_scalar(2.0);
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = optim.step(0.1, model, grads);
            trace.push(model.w.val().into_scalar::<f32>());
        }
        trace
    }

    fn assert_trace(got: Vec<f32>, want: [f64; 3]) {
        for (g, w) in got.iter().zip(want) {
            assert!((*g as f64 - w).abs() < 1e-6, "{got:?} vs {want:?}");
        }
    }

    #[test]
    fn sgd_is_w_minus_lr_g() {
        // w <- 0.9 w
        assert_trace(run(&OptimizerConfig::Sgd), [0.9, 0.81, 0.729]);
    }

    #[test]
    fn momentum_has_no_dampening() {
        // v1 = 1, w1 = 0.9; v2 = 0.9 + 0.9 = 1.8, w2 = 0.72; v3 = 1.62 + 0.72 = 2.34, w3 = 0.486
        let config = OptimizerConfig::Momentum {
            momentum: 0.9,
            nesterov: false,
        };
        assert_trace(run(&config), [0.9, 0.72, 0.486]);
    }

    #[test]
    fn rmsprop_is_tf_rmsprop() {
        let mut want = [0.0; 3];
        let (mut w, mut ms, mut mom) = (1.0f64, 1.0f64, 0.0f64);
        for out in &mut want {
            ms = 0.9 * ms + 0.1 * w * w;
            mom = 0.9 * mom + 0.1 * w / (ms + 1.0).sqrt();
            w -= mom;
            *out = w;
        }
        assert_trace(run(&OptimizerConfig::inception_rmsprop()), want);
    }

    #[test]
    fn adam_first_step_moves_by_lr() {
        // Bias-corrected Adam's first step is lr * g / (|g| + eps) ~ lr.
        let config = OptimizerConfig::Adam {
            beta1: 0.9,
            beta2: 0.999,
            epsilon: 1e-8,
        };
        assert!((run(&config)[0] - 0.9).abs() < 1e-5);
    }

    /// TF 1.x's `AdamOptimizer`'s update, written out in f64: `lr_t = lr·sqrt(1-β2^t)/(1-β1^t)`,
    /// `w -= lr_t·m/(sqrt(v)+ε)`; at ε = 1 Burn's Adam takes other steps.
    #[test]
    fn tf_adam_is_tfs_adam_optimizer() {
        let (b1, b2, eps) = (0.9f64, 0.999f64, 1.0f64);
        let mut want = [0.0; 3];
        let (mut w, mut m, mut v) = (1.0f64, 0.0f64, 0.0f64);
        for (t, out) in (1..).zip(&mut want) {
            (m, v) = (b1 * m + (1.0 - b1) * w, b2 * v + (1.0 - b2) * w * w);
            let lr_t = 0.1 * (1.0 - b2.powi(t)).sqrt() / (1.0 - b1.powi(t));
            w -= lr_t * m / (v.sqrt() + eps);
            *out = w;
        }
        let tf = |beta1, beta2, epsilon| OptimizerConfig::TfAdam {
            beta1,
            beta2,
            epsilon,
        };
        assert_trace(run(&tf(b1, b2, eps)), want);
        let burns = run(&OptimizerConfig::Adam {
            beta1: b1,
            beta2: b2,
            epsilon: eps,
        });
        assert!(
            (burns[2] as f64 - want[2]).abs() > 1e-3,
            "{burns:?} vs {want:?}"
        );
    }

    #[test]
    fn reads_from_json() {
        let config: OptimizerConfig = serde_json::from_str(
            r#"{"kind": "rmsprop", "decay": 0.9, "momentum": 0.9, "epsilon": 1.0}"#,
        )
        .unwrap();
        assert_eq!(config, OptimizerConfig::inception_rmsprop());
        let config: OptimizerConfig = serde_json::from_str(r#"{"kind": "sgd"}"#).unwrap();
        assert_eq!(config, OptimizerConfig::Sgd);
        let json = r#"{"kind": "tf_adam", "beta1": 0.9, "beta2": 0.999, "epsilon": 1.0}"#;
        let config: OptimizerConfig = serde_json::from_str(json).unwrap();
        assert!(matches!(
            config,
            OptimizerConfig::TfAdam { epsilon: 1.0, .. }
        ));
    }
}
