//! An optimizer's update of one parameter in one pass over its values, on rayon's threads:
//! TF 1.x's RMSProp (`towers_train`'s `TfRmsProp`) and Burn's Adam (`FusedAdam`).
//!
//! Written as Burn tensor ops, each update is about a dozen passes over the parameter's size on
//! the calling thread (flex runs its elementwise ops on one core) while the other cores wait:
//! for Inception v3's 24 M weights about 3 GB of memory traffic a step, by count, and on the
//! Inception demo (2 cores) 0.20–0.21 s a step against 0.19 in one pass. Here each value's
//! weight and its two slots are updated together, in the same f32 operations in the same order
//! as those ops, so the results are the same to the bit.

use burn_flex::FlexTensor;
use rayon::prelude::*;

use super::buffers::{contiguous, owned};

/// Values per rayon task: a few pages of each of the four tensors.
const CHUNK: usize = 16 * 1024;

/// Which update, with its factors for this step, in f32.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Update {
    /// TF's RMSProp; the slots are the mean square and the momentum.
    RmsProp(RmsProp),
    /// Burn's Adam (no AMSGrad, no weight decay); the slots are the two moments.
    Adam(AdamFactors),
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

/// `[weight, slot_1, slot_2]` after one step on `grad`:
///
/// ```text
/// RMSProp: ms  <- decay * ms + (1 - decay) * g^2
///          mom <- momentum * mom + lr * g / sqrt(ms + eps)
///          w   <- w - mom
/// Adam:    m1  <- β₁ m1 + (1 - β₁) g
///          m2  <- β₂ m2 + (1 - β₂) g²
///          w   <- w - lr · (m1 · combined) / (√m2 + ε √(1 - β₂ᵗ))
/// ```
///
/// The three are updated in place where their buffers are their own, else copied first.
pub(crate) fn update(
    [weight, grad, slot_1, slot_2]: [FlexTensor; 4],
    update: Update,
) -> [FlexTensor; 3] {
    match update {
        Update::RmsProp(h) => in_one_pass([weight, grad, slot_1, slot_2], |w, ms, mom, g| {
            *ms = *ms * h.decay + g * g * h.keep;
            *mom = *mom * h.momentum + g / (*ms + h.epsilon).sqrt() * h.lr;
            *w -= *mom;
        }),
        Update::Adam(f) => in_one_pass([weight, grad, slot_1, slot_2], |w, m1, m2, g| {
            *m1 = *m1 * f.beta_1 + g * f.keep_1;
            *m2 = *m2 * f.beta_2 + g * g * f.keep_2;
            *w -= *m1 * f.combined / (m2.sqrt() + f.epsilon) * f.lr;
        }),
    }
}

/// `step(weight, slot_1, slot_2, grad)` on every value, in chunks on rayon's threads.
fn in_one_pass(
    [weight, grad, slot_1, slot_2]: [FlexTensor; 4],
    step: impl Fn(&mut f32, &mut f32, &mut f32, f32) + Sync,
) -> [FlexTensor; 3] {
    let [mut w, mut s1, mut s2] = [weight, slot_1, slot_2].map(owned);
    let grad = contiguous(grad);
    let g: &[f32] = grad.storage();
    let (w_values, s1_values, s2_values) = (
        w.storage_mut::<f32>(),
        s1.storage_mut::<f32>(),
        s2.storage_mut::<f32>(),
    );
    assert!(
        [w_values.len(), s1_values.len(), s2_values.len()] == [g.len(); 3],
        "an optimizer's tensors differ in size"
    );
    w_values
        .par_chunks_mut(CHUNK)
        .zip(s1_values.par_chunks_mut(CHUNK))
        .zip(s2_values.par_chunks_mut(CHUNK))
        .zip(g.par_chunks(CHUNK))
        .for_each(|(((w, s1), s2), g)| {
            for (((w, s1), s2), &g) in w.iter_mut().zip(s1).zip(s2).zip(g) {
                step(w, s1, s2, g);
            }
        });
    [w, s1, s2]
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
        let fused = update(
            [shared.clone(), flex(&g), flex(&ms), flex(&mom)],
            Update::RmsProp(h),
        );
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
}
