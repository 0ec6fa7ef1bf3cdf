//! [`dropout`]: Burn's dropout layer with its mask drawn from this thread's seeded stream.
//!
//! Burn draws dropout masks from its backend's generator, which is global per backend: two
//! towers on one backend take numbers from it in whatever order their threads arrive, so a
//! run with dropout on several towers does not repeat itself, and cannot be resumed exactly.
//! [`with_dropout_seed`] gives the thread a stream of its own for the span of a closure (the
//! trainer seeds it from the run's seed, the step, the micro-batch and the tower); [`dropout`]
//! draws from it on the host and uploads the mask. Outside such a span it is Burn's layer.

use std::cell::RefCell;

use burn::nn::Dropout;
use burn::tensor::{Distribution, Tensor, TensorData};
use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;

thread_local! {
    static STREAM: RefCell<Option<Xoshiro256PlusPlus>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's dropout masks drawn from a stream seeded `seed`.
pub fn with_dropout_seed<R>(seed: u64, f: impl FnOnce() -> R) -> R {
    /// Restores the outer stream however `f` ends.
    struct Restore(Option<Xoshiro256PlusPlus>);
    impl Drop for Restore {
        fn drop(&mut self) {
            STREAM.set(self.0.take());
        }
    }
    let _restore = Restore(STREAM.replace(Some(Xoshiro256PlusPlus::seed_from_u64(seed))));
    f()
}

/// `layer` applied to `input`: in training (an autodiff device, the layer's training flag on)
/// inside [`with_dropout_seed`], each element is kept with probability `1 - prob` by the
/// thread's stream and scaled by `1 / (1 - prob)`; otherwise what `layer.forward` does.
pub fn dropout<const D: usize>(layer: &Dropout, input: Tensor<D>) -> Tensor<D> {
    let keep = 1.0 - layer.prob;
    let active = layer.training.is_enabled() && input.device().is_autodiff() && layer.prob > 0.0;
    let mask = STREAM.with_borrow_mut(|stream| match stream {
        Some(rng) if active => Some(TensorData::random::<f32, _, _>(
            input.shape(),
            Distribution::Bernoulli(keep),
            rng,
        )),
        _ => None,
    });
    match mask {
        Some(mask) => {
            let mask = Tensor::from_data(mask, &input.device());
            (input * mask).mul_scalar(1.0 / keep)
        }
        None => layer.forward(input),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::nn::DropoutConfig;
    use burn::tensor::Device;

    fn values(t: Tensor<2>) -> Vec<f32> {
        t.into_data().try_to_vec().unwrap()
    }

    /// Same seed, same mask; another seed, another; kept values scaled by 1 / keep; about
    /// the asked fraction dropped; off outside a span and in evaluation.
    #[test]
    fn masks_follow_the_seed_and_keep_the_expected_fraction() {
        let device = Device::flex().autodiff();
        let layer = DropoutConfig::new(0.25).init();
        let ones = || Tensor::<2>::ones([40, 50], &device);
        let a = with_dropout_seed(7, || values(dropout(&layer, ones())));
        let b = with_dropout_seed(7, || values(dropout(&layer, ones())));
        let c = with_dropout_seed(8, || values(dropout(&layer, ones())));
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.iter().all(|&v| v == 0.0 || (v - 1.0 / 0.75).abs() < 1e-6));
        let dropped = a.iter().filter(|&&v| v == 0.0).count() as f64 / a.len() as f64;
        assert!((dropped - 0.25).abs() < 0.05, "{dropped}");
        let plain = Tensor::<2>::ones([4, 5], &Device::flex());
        assert_eq!(
            with_dropout_seed(7, || values(dropout(&layer, plain))),
            vec![1.0; 20],
            "no autodiff: evaluation"
        );
        assert!(STREAM.with_borrow(Option::is_none), "the span ended");
    }
}
