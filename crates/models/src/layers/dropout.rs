//! [`dropout`]: Burn's dropout layer with its mask drawn from seeded streams of this thread.
//!
//! Burn draws dropout masks from its backend's generator, which is global per backend: two
//! towers on one backend take numbers from it in whatever order their threads arrive, so a
//! run with dropout on several towers does not repeat itself, and cannot be resumed exactly.
//! For the span of a closure, [`with_dropout_seed`] gives the thread one stream of its own,
//! and [`with_example_dropout`] one stream per example: row `r` of every dropout input (the
//! first dimension is the batch) is the batch's example `first_example + r`, and its mask
//! depends on that index only, so one tower and N towers sharing a batch drop the same
//! values (the trainer seeds it from the run's seed, the step, the micro-batch and the rank).
//! [`dropout`] draws on the host and uploads the mask. Outside such a span it is Burn's layer.

use std::cell::RefCell;

use burn::nn::Dropout;
use burn::tensor::{Distribution, Tensor, TensorData};
use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;

/// Where this thread's masks come from, inside a span.
enum Stream {
    /// One stream for every mask.
    Thread(Xoshiro256PlusPlus),
    /// One stream per example and dropout call.
    Examples {
        seed: u64,
        first_example: u64,
        /// Dropout calls so far in the span: each layer gets masks of its own.
        calls: u64,
    },
}

thread_local! {
    static STREAM: RefCell<Option<Stream>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's dropout masks drawn from a stream seeded `seed`.
pub fn with_dropout_seed<R>(seed: u64, f: impl FnOnce() -> R) -> R {
    within(Stream::Thread(Xoshiro256PlusPlus::seed_from_u64(seed)), f)
}

/// Runs `f` with each dropout input's row `r` masked by a stream of `seed`, of the dropout
/// call (the first, second... in `f`) and of the example `first_example + r`: the masks of
/// an example do not depend on which part of a batch it is in.
pub fn with_example_dropout<R>(seed: u64, first_example: usize, f: impl FnOnce() -> R) -> R {
    let stream = Stream::Examples {
        seed,
        first_example: first_example as u64,
        calls: 0,
    };
    within(stream, f)
}

fn within<R>(stream: Stream, f: impl FnOnce() -> R) -> R {
    /// Restores the outer stream however `f` ends.
    struct Restore(Option<Stream>);
    impl Drop for Restore {
        fn drop(&mut self) {
            STREAM.set(self.0.take());
        }
    }
    let _restore = Restore(STREAM.replace(Some(stream)));
    f()
}

/// The mask of `shape` from `stream`: 1 with probability `keep`, else 0.
fn mask(stream: &mut Stream, dims: Vec<usize>, keep: f64) -> TensorData {
    let bernoulli = Distribution::Bernoulli(keep);
    match stream {
        Stream::Thread(rng) => TensorData::random::<f32, _, _>(dims, bernoulli, rng),
        Stream::Examples {
            seed,
            first_example,
            calls,
        } => {
            *calls += 1;
            let elements: usize = dims.iter().product();
            let rows = dims.first().copied().unwrap_or(1).max(1);
            let per_row = elements / rows;
            let mut values = Vec::with_capacity(elements);
            for row in 0..rows as u64 {
                let row_seed = mix(mix(mix(*seed, *calls), *first_example + row), 0);
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(row_seed);
                let row = TensorData::random::<f32, _, _>([per_row], bernoulli, &mut rng);
                values.extend(row.iter::<f32>());
            }
            TensorData::new(values, dims)
        }
    }
}

/// SplitMix64's finalizer of `a` and `b`: well-spread seeds from small numbers.
fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `layer` applied to `input`: in training (an autodiff device, the layer's training flag on)
/// inside [`with_dropout_seed`] or [`with_example_dropout`], each element is kept with
/// probability `1 - prob` by the span's streams and scaled by `1 / (1 - prob)`; otherwise what
/// `layer.forward` does.
pub fn dropout<const D: usize>(layer: &Dropout, input: Tensor<D>) -> Tensor<D> {
    let keep = 1.0 - layer.prob;
    let active = layer.training.is_enabled() && input.device().is_autodiff() && layer.prob > 0.0;
    let mask = STREAM.with_borrow_mut(|stream| match stream {
        Some(stream) if active => Some(mask(stream, input.dims().to_vec(), keep)),
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

/// `input` with whole examples (rows of its first dimension) dropped as [`dropout`] drops
/// values, the rest scaled by `1 / (1 - prob)`: stochastic depth, Keras's `Dropout` of
/// `noise_shape` `(None, 1, 1, 1)` and torchvision's `StochasticDepth(p, "row")`. The input
/// itself outside training.
pub fn drop_examples<const D: usize>(layer: &Dropout, input: Tensor<D>) -> Tensor<D> {
    let active = layer.training.is_enabled() && input.device().is_autodiff() && layer.prob > 0.0;
    if !active {
        return input;
    }
    let mut per_example = [1; D];
    per_example[0] = input.dims()[0];
    let kept = dropout(layer, Tensor::ones(per_example, &input.device()));
    input * kept
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

    /// Per example: rows 2..6 of a batch of 6 get the masks of a batch of 4 starting at
    /// example 2; the second call in a span (another layer) gets other masks.
    #[test]
    fn example_masks_depend_on_the_example_only() {
        let device = Device::flex().autodiff();
        let layer = DropoutConfig::new(0.5).init();
        let ones = |n| Tensor::<2>::ones([n, 64], &device);
        let whole = with_example_dropout(3, 0, || values(dropout(&layer, ones(6))));
        let part = with_example_dropout(3, 2, || values(dropout(&layer, ones(4))));
        assert_eq!(&whole[2 * 64..], &part[..]);
        let (first, second) = with_example_dropout(3, 0, || {
            (
                values(dropout(&layer, ones(6))),
                values(dropout(&layer, ones(6))),
            )
        });
        assert_eq!(first, whole);
        assert_ne!(first, second);
    }

    /// Each example kept whole (scaled by 1 / keep) or dropped whole; the per-example masks
    /// are [`dropout`]'s of a column; the input itself in evaluation.
    #[test]
    fn drop_examples_drops_whole_examples() {
        let device = Device::flex().autodiff();
        let layer = DropoutConfig::new(0.5).init();
        let input = || Tensor::<3>::ones([64, 3, 5], &device);
        let dropped = with_example_dropout(3, 0, || drop_examples(&layer, input()));
        let rows: Vec<Vec<f32>> = values(dropped.reshape([64, 15]))
            .chunks(15)
            .map(<[f32]>::to_vec)
            .collect();
        let column = with_example_dropout(3, 0, || {
            values(dropout(&layer, Tensor::<2>::ones([64, 1], &device)))
        });
        for (row, kept) in rows.iter().zip(&column) {
            assert_eq!(row, &vec![*kept; 15]);
        }
        assert!(column.contains(&0.0) && column.contains(&2.0), "{column:?}");
        let plain = Tensor::<2>::ones([4, 5], &Device::flex());
        assert_eq!(values(drop_examples(&layer, plain)), vec![1.0; 20]);
    }
}
