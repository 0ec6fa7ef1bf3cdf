//! [`fused_rmsprop`] and [`fused_adam`]: an optimizer's update of one parameter in one pass on
//! flex's threads where the tensors are f32 flex tensors; the optimizers take Burn's ops
//! elsewhere.

use burn::tensor::Tensor;

/// One RMSProp step's hyperparameters (TF 1.x's `RMSPropOptimizer`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RmsPropStep {
    /// The step's learning rate.
    pub lr: f64,
    /// Decay of the mean square.
    pub decay: f64,
    /// Momentum of the scaled update.
    pub momentum: f64,
    /// Added to the mean square under the square root.
    pub epsilon: f64,
}

/// One Adam step's hyperparameters, as Burn's `AdamConfig` holds them (f32), and the step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamStep {
    /// The step's learning rate.
    pub lr: f64,
    /// Decay of the first moment.
    pub beta_1: f32,
    /// Decay of the second moment.
    pub beta_2: f32,
    /// Added to the second moment's root.
    pub epsilon: f32,
    /// The step's number, from 1 (the bias corrections' exponent).
    pub time: usize,
}

/// `[weight, mean_square, momentum]` after one step on `grad`, computed as
///
/// ```text
/// ms  <- decay * ms + (1 - decay) * g^2
/// mom <- momentum * mom + lr * g / sqrt(ms + eps)
/// w   <- w - mom
/// ```
///
/// in one pass over the values on rayon's threads, the same f32 operations in the same order as
/// Burn's ops would take them (the same result, to the bit). `Err` hands the four tensors back
/// (boxed, four tensors being a large error) where this does not apply: not all f32 flex
/// tensors of one shape, not empty, without autodiff, or no `flex` feature.
pub fn fused_rmsprop<const D: usize>(
    tensors: [Tensor<D>; 4],
    step: RmsPropStep,
) -> Result<[Tensor<D>; 3], Box<[Tensor<D>; 4]>> {
    #[cfg(feature = "flex")]
    if on_flex(&tensors) {
        use crate::kernels::flex::{RmsProp, Update};
        let hyper = RmsProp {
            lr: step.lr as f32,
            decay: step.decay as f32,
            keep: (1.0 - step.decay) as f32,
            momentum: step.momentum as f32,
            epsilon: step.epsilon as f32,
        };
        return Ok(on_dispatch(tensors, Update::RmsProp(hyper)));
    }
    let _ = step;
    Err(Box::new(tensors))
}

/// `[weight, moment_1, moment_2]` after Adam's step number `step.time` on `grad`, as Burn's
/// `Adam` (no AMSGrad, no weight decay) computes it:
///
/// ```text
/// m1 <- β₁ m1 + (1 - β₁) g
/// m2 <- β₂ m2 + (1 - β₂) g²
/// w  <- w - lr · m1 · √(1 - β₂ᵗ) / (1 - β₁ᵗ) / (√m2 + ε √(1 - β₂ᵗ))
/// ```
///
/// in one pass on rayon's threads, to the bit; the moments of a first step are zeros. `Err` as
/// [`fused_rmsprop`]'s.
pub fn fused_adam<const D: usize>(
    tensors: [Tensor<D>; 4],
    step: AdamStep,
) -> Result<[Tensor<D>; 3], Box<[Tensor<D>; 4]>> {
    #[cfg(feature = "flex")]
    if on_flex(&tensors) {
        use crate::kernels::flex::{AdamFactors, Update};
        let (b1, b2, time) = (step.beta_1, step.beta_2, step.time as i32);
        let correction_2 = (1.0 - b2.powi(time)).sqrt();
        let factors = AdamFactors {
            beta_1: b1,
            keep_1: 1.0 - b1,
            beta_2: b2,
            keep_2: 1.0 - b2,
            combined: correction_2 / (1.0 - b1.powi(time)),
            epsilon: step.epsilon * correction_2,
            lr: step.lr as f32,
        };
        return Ok(on_dispatch(tensors, Update::Adam(factors)));
    }
    let _ = step;
    Err(Box::new(tensors))
}

/// `update` of `[weight, grad, slot_1, slot_2]` by the flex kernels: the weight and its slots.
#[cfg(feature = "flex")]
fn on_dispatch<const D: usize>(
    tensors: [Tensor<D>; 4],
    update: crate::kernels::flex::Update,
) -> [Tensor<D>; 3] {
    use crate::kernels::flex::FlexKernels;
    use burn::backend::Dispatch;
    let shape = tensors[0].shape();
    let [w, g, s1, s2] = tensors.map(Tensor::into_dispatch);
    let (w, s1, s2) = <Dispatch as FlexKernels>::towers_optimizer_update(w, g, s1, s2, update);
    [w, s1, s2].map(|t| Tensor::<D>::from_dispatch(t).reshape(shape.clone()))
}

/// Whether all of `tensors` are f32 flex tensors of one shape, not empty, without autodiff (an
/// optimizer steps on its parameters' inner tensors).
#[cfg(feature = "flex")]
fn on_flex<const D: usize>(tensors: &[Tensor<D>; 4]) -> bool {
    use crate::kernels::dispatch::flex_route;
    let shape = tensors[0].shape();
    tensors
        .iter()
        .all(|t| flex_route::on_flex(t) && !t.device().is_autodiff() && t.shape() == shape)
}
