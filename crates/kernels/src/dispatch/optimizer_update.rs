//! [`fused_rmsprop`], [`fused_adam`] and [`fused_sgd`]: an optimizer's update of one parameter
//! in one pass on flex's threads where the tensors are f32 flex tensors; the optimizers take
//! Burn's ops elsewhere.

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

/// One SGD step's hyperparameters, as Burn's `SgdConfig` (no weight decay) holds them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SgdStep {
    /// The step's learning rate.
    pub lr: f64,
    /// Burn's momentum, if any.
    pub momentum: Option<MomentumStep>,
}

/// Burn's `MomentumConfig`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MomentumStep {
    /// Momentum factor.
    pub momentum: f64,
    /// Dampening of the gradient's share of the velocity.
    pub dampening: f64,
    /// Nesterov's variant.
    pub nesterov: bool,
}

/// What [`fused_sgd`] hands back where it does not apply: the weight, the gradient and the
/// velocity, as given.
pub type SgdTensors<const D: usize> = Box<(Tensor<D>, Tensor<D>, Option<Tensor<D>>)>;

/// `(weight, velocity)` after one step on `grad`, as Burn's `Sgd` without weight decay computes
/// it:
///
/// ```text
/// SGD:      w <- w - lr · g
/// momentum: v <- (1 - dampening) g + momentum · v   (v <- g on the first step: no velocity)
///           w <- w - lr · v                         (Nesterov: w - lr · (momentum · v + g))
/// ```
///
/// in one pass on rayon's threads, to the bit; the velocity is `None` without momentum. `Err`
/// hands the tensors back where this does not apply (as [`fused_rmsprop`]'s), or where a
/// velocity is given without momentum.
pub fn fused_sgd<const D: usize>(
    weight: Tensor<D>,
    grad: Tensor<D>,
    velocity: Option<Tensor<D>>,
    step: SgdStep,
) -> Result<(Tensor<D>, Option<Tensor<D>>), SgdTensors<D>> {
    #[cfg(feature = "flex")]
    if on_flex(
        &[&weight, &grad]
            .into_iter()
            .chain(&velocity)
            .collect::<Vec<_>>(),
    ) {
        use crate::flex::optimizer_update::{MomentumFactors, SgdFactors, Update};
        let lr = step.lr as f32;
        let Some(m) = step.momentum else {
            if velocity.is_some() {
                return Err(Box::new((weight, grad, velocity)));
            }
            let update = Update::Sgd(SgdFactors { lr, momentum: None });
            return Ok((on_dispatch(weight, grad, vec![], update).0, None));
        };
        let momentum = MomentumFactors {
            momentum: m.momentum as f32,
            keep: (1.0 - m.dampening) as f32,
            nesterov: m.nesterov,
            first: velocity.is_none(),
        };
        // The first step's velocity is the gradient: a buffer for it, not read.
        let velocity = velocity.unwrap_or_else(|| Tensor::zeros(grad.shape(), &grad.device()));
        let update = Update::Sgd(SgdFactors {
            lr,
            momentum: Some(momentum),
        });
        let (weight, mut slots) = on_dispatch(weight, grad, vec![velocity], update);
        return Ok((weight, slots.pop()));
    }
    let _ = step;
    Err(Box::new((weight, grad, velocity)))
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
    if on_flex(&tensors.each_ref()) {
        use crate::flex::optimizer_update::{RmsProp, Update};
        let hyper = RmsProp {
            lr: step.lr as f32,
            decay: step.decay as f32,
            keep: (1.0 - step.decay) as f32,
            momentum: step.momentum as f32,
            epsilon: step.epsilon as f32,
        };
        return Ok(with_two_slots(tensors, Update::RmsProp(hyper)));
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
    if on_flex(&tensors.each_ref()) {
        use crate::flex::optimizer_update::{AdamFactors, Update};
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
        return Ok(with_two_slots(tensors, Update::Adam(factors)));
    }
    let _ = step;
    Err(Box::new(tensors))
}

/// `update` of `[weight, grad, slot_1, slot_2]` by the flex kernels: the weight and its slots.
#[cfg(feature = "flex")]
fn with_two_slots<const D: usize>(
    [weight, grad, slot_1, slot_2]: [Tensor<D>; 4],
    update: crate::flex::optimizer_update::Update,
) -> [Tensor<D>; 3] {
    let (weight, slots) = on_dispatch(weight, grad, vec![slot_1, slot_2], update);
    let [slot_1, slot_2] = slots.try_into().expect("two slots");
    [weight, slot_1, slot_2]
}

/// `update` of `weight` and its `slots` on `grad` by the flex kernels: the weight and its slots.
#[cfg(feature = "flex")]
fn on_dispatch<const D: usize>(
    weight: Tensor<D>,
    grad: Tensor<D>,
    slots: Vec<Tensor<D>>,
    update: crate::flex::optimizer_update::Update,
) -> (Tensor<D>, Vec<Tensor<D>>) {
    use crate::extension::FlexKernels;
    use burn::backend::Dispatch;
    let (shape, kept) = (weight.shape(), slots.len());
    let back = |t| Tensor::<D>::from_dispatch(t).reshape(shape.clone());
    // Empty placeholders for the slots the update does not keep.
    let placeholder = || Tensor::<1>::empty([0], &weight.device()).into_dispatch();
    let mut slots = slots.into_iter().map(Tensor::into_dispatch);
    let [s1, s2] = [(); 2].map(|_| slots.next().unwrap_or_else(placeholder));
    let (w, g) = (weight.into_dispatch(), grad.into_dispatch());
    let (w, s1, s2) = <Dispatch as FlexKernels>::towers_optimizer_update(w, g, s1, s2, update);
    (back(w), [s1, s2].into_iter().take(kept).map(back).collect())
}

/// Whether all of `tensors` are f32 flex tensors of one shape, not empty, without autodiff (an
/// optimizer steps on its parameters' inner tensors).
#[cfg(feature = "flex")]
fn on_flex<const D: usize>(tensors: &[&Tensor<D>]) -> bool {
    use crate::dispatch::flex_route;
    let shape = tensors[0].shape();
    tensors
        .iter()
        .all(|t| flex_route::on_flex(t) && !t.device().is_autodiff() && t.shape() == shape)
}
