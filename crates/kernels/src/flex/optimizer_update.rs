//! An optimizer's update of one parameter in one pass over its values, on rayon's threads:
//! TF 1.x's RMSProp (`towers_train`'s `TfRmsProp`), Burn's Adam (`FusedAdam`) and Burn's SGD
//! with or without momentum (`FusedSgd`).
//!
//! Written as Burn tensor ops, each update is two (SGD) to a dozen passes over the parameter's
//! size, on the calling thread for parameters under flex's parallel threshold (256 K values,
//! most of Inception v3's) while the other cores wait: for Inception v3's 24 M weights about
//! 3 GB of memory traffic a step for RMSProp, by count, and on the Inception demo (2 cores)
//! 0.20–0.21 s a step against 0.19 in one pass. Here each value's weight and its slots are
//! updated together, in the same f32 operations in the same order as those ops, so the results
//! are the same to the bit.

use burn_flex::FlexTensor;
use rayon::prelude::*;

use crate::flex::memory::buffers::{chunks_side_by_side, contiguous, owned};

/// Values per rayon task: a few pages of each of the tensors.
const CHUNK: usize = 16 * 1024;

/// Which update, with its factors for this step, in f32.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Update {
    /// TF's RMSProp; the slots are the mean square and the momentum.
    RmsProp(RmsProp),
    /// Burn's Adam (no AMSGrad, no weight decay); the slots are the two moments.
    Adam(AdamFactors),
    /// Burn's SGD without weight decay; with momentum the slot is the velocity, else none.
    Sgd(SgdFactors),
}

impl Update {
    /// The slots the update keeps beside the weight.
    pub(crate) fn slots(&self) -> usize {
        match self {
            Self::RmsProp(_) | Self::Adam(_) => 2,
            Self::Sgd(SgdFactors { momentum: None, .. }) => 0,
            Self::Sgd(_) => 1,
        }
    }
}

/// RMSProp's hyperparameters for one step (the learning rate of that step).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct RmsProp {
    pub lr: f32,
    pub decay: f32,
    /// `1 - decay`, rounded once from the f64 difference as Burn's scalar op rounds it.
    pub keep: f32,
    pub momentum: f32,
    pub epsilon: f32,
}

/// One Adam step's factors, as Burn's `Adam` computes them for step `t`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct AdamFactors {
    /// `β₁`, `1 - β₁`, `β₂`, `1 - β₂`.
    pub beta_1: f32,
    pub keep_1: f32,
    pub beta_2: f32,
    pub keep_2: f32,
    /// `√(1 - β₂ᵗ) / (1 - β₁ᵗ)`, the moments' bias corrections together.
    pub combined: f32,
    /// `ε · √(1 - β₂ᵗ)`.
    pub epsilon: f32,
    /// The step's learning rate.
    pub lr: f32,
}

/// One SGD step's factors: the learning rate, and the momentum's if there is one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SgdFactors {
    pub lr: f32,
    pub momentum: Option<MomentumFactors>,
}

/// Burn's momentum (`MomentumConfig`) for one step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct MomentumFactors {
    pub momentum: f32,
    /// `1 - dampening`, rounded once from the f64 difference.
    pub keep: f32,
    pub nesterov: bool,
    /// The first step, whose velocity is the gradient itself (the slot's values are not read).
    pub first: bool,
}

/// The weight and its slots after one step on `grad`:
///
/// ```text
/// RMSProp:  ms  <- decay * ms + (1 - decay) * g^2
///           mom <- momentum * mom + lr * g / sqrt(ms + eps)
///           w   <- w - mom
/// Adam:     m1  <- β₁ m1 + (1 - β₁) g
///           m2  <- β₂ m2 + (1 - β₂) g²
///           w   <- w - lr · (m1 · combined) / (√m2 + ε √(1 - β₂ᵗ))
/// SGD:      w   <- w - lr · g
/// momentum: v   <- (1 - dampening) g + momentum · v   (v <- g on the first step)
///           w   <- w - lr · v                         (Nesterov: w - lr · (momentum · v + g))
/// ```
///
/// The weight and slots are updated in place where their buffers are their own, else copied
/// first. Panics unless `slots` holds [`Update::slots`] tensors.
pub(crate) fn update(
    weight: FlexTensor,
    grad: FlexTensor,
    slots: Vec<FlexTensor>,
    update: Update,
) -> (FlexTensor, Vec<FlexTensor>) {
    let count = slots.len();
    assert_eq!(
        count,
        update.slots(),
        "{update:?} keeps {} slots, not {count}",
        update.slots()
    );
    let (w, g) = (weight, grad);
    match update {
        Update::RmsProp(h) => in_one_pass(w, g, as_array(slots), |w, [ms, mom], g| {
            for (((w, ms), mom), &g) in w.iter_mut().zip(ms).zip(mom).zip(g) {
                *ms = *ms * h.decay + g * g * h.keep;
                *mom = *mom * h.momentum + g / (*ms + h.epsilon).sqrt() * h.lr;
                *w -= *mom;
            }
        }),
        Update::Adam(f) => in_one_pass(w, g, as_array(slots), |w, [m1, m2], g| {
            for (((w, m1), m2), &g) in w.iter_mut().zip(m1).zip(m2).zip(g) {
                *m1 = *m1 * f.beta_1 + g * f.keep_1;
                *m2 = *m2 * f.beta_2 + g * g * f.keep_2;
                *w -= *m1 * f.combined / (m2.sqrt() + f.epsilon) * f.lr;
            }
        }),
        Update::Sgd(SgdFactors { lr, momentum: None }) => in_one_pass(w, g, [], |w, [], g| {
            for (w, &g) in w.iter_mut().zip(g) {
                *w -= g * lr;
            }
        }),
        Update::Sgd(SgdFactors {
            lr,
            momentum: Some(m),
        }) => in_one_pass(w, g, as_array(slots), |w, [v], g| {
            // One loop per case, without branches inside, so that it vectorizes: with the two
            // matches inside, Inception's update ran at half the memory rate of Adam's.
            match (m.first, m.nesterov) {
                (true, true) => momentum_pass::<true, true>(w, v, g, m, lr),
                (true, false) => momentum_pass::<true, false>(w, v, g, m, lr),
                (false, true) => momentum_pass::<false, true>(w, v, g, m, lr),
                (false, false) => momentum_pass::<false, false>(w, v, g, m, lr),
            }
        }),
    }
}

/// Momentum SGD on one chunk: `FIRST` (the velocity is the gradient) and `NESTEROV` as `m`
/// says.
#[inline(always)]
fn momentum_pass<const FIRST: bool, const NESTEROV: bool>(
    w: &mut [f32],
    v: &mut [f32],
    g: &[f32],
    m: MomentumFactors,
    lr: f32,
) {
    for ((w, v), &g) in w.iter_mut().zip(v).zip(g) {
        *v = match FIRST {
            true => g,
            false => g * m.keep + *v * m.momentum,
        };
        let step = match NESTEROV {
            true => *v * m.momentum + g,
            false => *v,
        };
        *w -= step * lr;
    }
}

/// `slots` as an array of as many (the caller checked the count).
fn as_array<const S: usize>(slots: Vec<FlexTensor>) -> [FlexTensor; S] {
    slots
        .try_into()
        .unwrap_or_else(|_| unreachable!("the slot count was checked"))
}

/// `step(weight, slots, grad)` on chunks of the values side by side, on rayon's threads: the
/// weight and its `S` slots after the step.
fn in_one_pass<const S: usize>(
    weight: FlexTensor,
    grad: FlexTensor,
    slots: [FlexTensor; S],
    step: impl Fn(&mut [f32], [&mut [f32]; S], &[f32]) + Sync,
) -> (FlexTensor, Vec<FlexTensor>) {
    let (mut w, mut slots) = (owned(weight), slots.map(owned));
    let grad = contiguous(grad);
    let g: &[f32] = grad.storage();
    let w_values = w.storage_mut::<f32>();
    let slot_values = slots.each_mut().map(|slot| slot.storage_mut::<f32>());
    let lengths = slot_values.iter().map(|s| s.len()).chain([w_values.len()]);
    assert!(
        lengths.into_iter().all(|len| len == g.len()),
        "an optimizer's tensors differ in size"
    );
    // Chunk `k` of every slot together, for the task that takes chunk `k` of the weight.
    w_values
        .par_chunks_mut(CHUNK)
        .zip(g.par_chunks(CHUNK))
        .zip(chunks_side_by_side(slot_values, g.len(), CHUNK))
        .for_each(|((w, g), slots)| step(w, slots, g));
    (w, slots.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::{Device, Tensor, TensorData};

    /// Values in [-2, 2) from a fixed sequence.
    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut state = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..n)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
                ((state >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
            })
            .collect()
    }

    /// One step against the same update by Burn's ops (`towers_train`'s `TfRmsProp` writes it
    /// so), bit for bit, on a parameter of several tasks; a weight whose buffer is shared is
    /// copied, not written through.
    #[test]
    fn equals_the_update_by_burns_ops() {
        let h = RmsProp {
            lr: 0.045,
            decay: 0.9,
            keep: (1.0 - 0.9f64) as f32,
            momentum: 0.9,
            epsilon: 1.0,
        };
        let n = 3 * CHUNK + 5;
        let [w, g, ms, mom] = [1, 2, 3, 4].map(|seed| values(n, seed));
        let ms: Vec<f32> = ms.iter().map(|v| v.abs()).collect();
        let by_ops = {
            let device = Device::flex();
            let t = |v: &[f32]| Tensor::<1>::from_data(TensorData::new(v.to_vec(), [n]), &device);
            let (w, g, ms, mom) = (t(&w), t(&g), t(&ms), t(&mom));
            let ms = ms
                .mul_scalar(0.9)
                .add(g.clone().square().mul_scalar(1.0 - 0.9));
            let scaled = g.div(ms.clone().add_scalar(1.0).sqrt());
            let mom = mom.mul_scalar(0.9).add(scaled.mul_scalar(0.045));
            [w - mom.clone(), ms, mom].map(|t| t.into_data().try_to_vec::<f32>().unwrap())
        };
        let flex = |v: &[f32]| FlexTensor::from_data(TensorData::new(v.to_vec(), [n]));
        let shared = flex(&w);
        let (weight, slots) = update(
            shared.clone(),
            flex(&g),
            vec![flex(&ms), flex(&mom)],
            Update::RmsProp(h),
        );
        let fused = [vec![weight], slots].concat();
        for (fused, want) in fused.iter().zip(&by_ops) {
            let fused: Vec<u32> = fused.storage::<f32>().iter().map(|v| v.to_bits()).collect();
            let want: Vec<u32> = want.iter().map(|v| v.to_bits()).collect();
            assert!(fused == want, "not the ops' update, bit for bit");
        }
        assert_eq!(
            shared.storage::<f32>(),
            &w[..],
            "the shared weight was written"
        );
    }

    fn bits(values: &[f32]) -> Vec<u32> {
        values.iter().map(|v| v.to_bits()).collect()
    }

    /// Plain SGD, and momentum with dampening (Nesterov's or not, on a first step and a later
    /// one), against the same updates by Burn's ops as Burn's `Sgd` and `Momentum` write them,
    /// bit for bit, on a parameter of several tasks.
    #[test]
    fn sgd_equals_the_update_by_burns_ops() {
        let n = 2 * CHUNK + 3;
        let [w, g, v] = [5, 6, 7].map(|seed| values(n, seed));
        let device = Device::flex();
        let t = |v: &[f32]| Tensor::<1>::from_data(TensorData::new(v.to_vec(), [n]), &device);
        let flex = |v: &[f32]| FlexTensor::from_data(TensorData::new(v.to_vec(), [n]));
        let burns = |t: Tensor<1>| bits(&t.into_data().try_to_vec::<f32>().unwrap());
        let lr = 0.05;
        let plain = Update::Sgd(SgdFactors {
            lr: lr as f32,
            momentum: None,
        });
        let (fused, slots) = update(flex(&w), flex(&g), vec![], plain);
        assert!(slots.is_empty());
        let want = burns(t(&w) - t(&g).mul_scalar(lr));
        assert!(bits(fused.storage()) == want, "not plain SGD's update");
        let (momentum, dampening) = (0.9, 0.1);
        for (nesterov, first) in [(false, false), (true, false), (false, true), (true, true)] {
            let velocity = match first {
                true => t(&g),
                false => t(&g)
                    .mul_scalar(1.0 - dampening)
                    .add(t(&v).mul_scalar(momentum)),
            };
            let step = match nesterov {
                true => velocity.clone().mul_scalar(momentum).add(t(&g)),
                false => velocity.clone(),
            };
            let want = [t(&w) - step.mul_scalar(lr), velocity].map(burns);
            let factors = MomentumFactors {
                momentum: momentum as f32,
                keep: (1.0 - dampening) as f32,
                nesterov,
                first,
            };
            let how = Update::Sgd(SgdFactors {
                lr: lr as f32,
                momentum: Some(factors),
            });
            let (w, slots) = update(flex(&w), flex(&g), vec![flex(&v)], how);
            let got = [&w, &slots[0]].map(|t| bits(t.storage()));
            assert!(got == want, "nesterov {nesterov}, first {first}");
        }
    }
}
