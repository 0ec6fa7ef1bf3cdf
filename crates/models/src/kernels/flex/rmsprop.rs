//! TF 1.x's RMSProp update of one parameter in one pass over its values, on rayon's threads.
//!
//! Written as Burn tensor ops (`towers_train`'s `TfRmsProp`), the update is eleven passes over
//! the parameter's size, each on the calling thread: flex runs its elementwise ops on one core.
//! For Inception v3's 24 M weights that is about 3 GB of memory traffic a step (by count) while
//! the other cores wait. Here each value's mean square, momentum and weight are updated
//! together, in the same f32 operations in the same order as those ops, so the results are the
//! same to the bit.

use burn_flex::FlexTensor;
use rayon::prelude::*;

use super::buffers::{contiguous, owned};

/// Values per rayon task: a few pages of each of the four tensors.
const CHUNK: usize = 16 * 1024;

/// RMSProp's hyperparameters for one step, as f32 (the learning rate of that step).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct RmsProp {
    pub lr: f32,
    pub decay: f32,
    /// `1 - decay`, rounded once from the f64 difference as Burn's scalar op rounds it.
    pub keep: f32,
    pub momentum: f32,
    pub epsilon: f32,
}

/// `[weight, mean_square, momentum]` after one step on `grad`:
///
/// ```text
/// ms  <- decay * ms + (1 - decay) * g^2
/// mom <- momentum * mom + lr * g / sqrt(ms + eps)
/// w   <- w - mom
/// ```
///
/// The three are updated in place where their buffers are their own, else copied first.
pub(crate) fn rmsprop(
    [weight, grad, mean_square, momentum]: [FlexTensor; 4],
    h: RmsProp,
) -> [FlexTensor; 3] {
    let [mut w, mut ms, mut mom] = [weight, mean_square, momentum].map(owned);
    let grad = contiguous(grad);
    let g: &[f32] = grad.storage();
    let (w_values, ms_values, mom_values) = (
        w.storage_mut::<f32>(),
        ms.storage_mut::<f32>(),
        mom.storage_mut::<f32>(),
    );
    assert!(
        [w_values.len(), ms_values.len(), mom_values.len()] == [g.len(); 3],
        "RMSProp's tensors differ in size"
    );
    w_values
        .par_chunks_mut(CHUNK)
        .zip(ms_values.par_chunks_mut(CHUNK))
        .zip(mom_values.par_chunks_mut(CHUNK))
        .zip(g.par_chunks(CHUNK))
        .for_each(|(((w, ms), mom), g)| {
            for (((w, ms), mom), &g) in w.iter_mut().zip(ms).zip(mom).zip(g) {
                *ms = *ms * h.decay + g * g * h.keep;
                *mom = *mom * h.momentum + g / (*ms + h.epsilon).sqrt() * h.lr;
                *w -= *mom;
            }
        });
    [w, ms, mom]
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
        let fused = rmsprop([shared.clone(), flex(&g), flex(&ms), flex(&mom)], h);
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
