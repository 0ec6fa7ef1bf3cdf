//! Adam's update of one parameter (Burn's `Adam`, without AMSGrad or weight decay) in one pass
//! over its values, on rayon's threads.
//!
//! Burn's `Adam` is a dozen elementwise passes over the parameter's size, each on the calling
//! thread: flex runs its elementwise ops on one core, while the others wait. The Inception demo
//! (24 M weights, batch 16 at 75x75, 2 cores) steps 0.20–0.21 s with them, 0.19 with this. Each
//! value's two moments and weight are updated together, in the same f32 operations in the same
//! order as Burn's, so the results are the same to the bit.

use burn_flex::FlexTensor;
use rayon::prelude::*;

use super::buffers::{contiguous, owned};

/// Values per rayon task: a few pages of each of the four tensors.
const CHUNK: usize = 16 * 1024;

/// One Adam step's factors, as Burn's `Adam` computes them for step `t` (in f32).
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

/// `[weight, moment_1, moment_2]` after one step on `grad`:
///
/// ```text
/// m1 <- β₁ m1 + (1 - β₁) g
/// m2 <- β₂ m2 + (1 - β₂) g²
/// w  <- w - lr · (m1 · combined) / (√m2 + ε √(1 - β₂ᵗ))
/// ```
///
/// The three are updated in place where their buffers are their own, else copied first.
pub(crate) fn adam(
    [weight, grad, moment_1, moment_2]: [FlexTensor; 4],
    f: AdamFactors,
) -> [FlexTensor; 3] {
    let [mut w, mut m1, mut m2] = [weight, moment_1, moment_2].map(owned);
    let grad = contiguous(grad);
    let g: &[f32] = grad.storage();
    let (w_values, m1_values, m2_values) = (
        w.storage_mut::<f32>(),
        m1.storage_mut::<f32>(),
        m2.storage_mut::<f32>(),
    );
    assert!(
        [w_values.len(), m1_values.len(), m2_values.len()] == [g.len(); 3],
        "Adam's tensors differ in size"
    );
    w_values
        .par_chunks_mut(CHUNK)
        .zip(m1_values.par_chunks_mut(CHUNK))
        .zip(m2_values.par_chunks_mut(CHUNK))
        .zip(g.par_chunks(CHUNK))
        .for_each(|(((w, m1), m2), g)| {
            for (((w, m1), m2), &g) in w.iter_mut().zip(m1).zip(m2).zip(g) {
                *m1 = *m1 * f.beta_1 + g * f.keep_1;
                *m2 = *m2 * f.beta_2 + g * g * f.keep_2;
                *w -= *m1 * f.combined / (m2.sqrt() + f.epsilon) * f.lr;
            }
        });
    [w, m1, m2]
}
