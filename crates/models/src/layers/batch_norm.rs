//! [`OffsetBatchNorm`]: batch normalization with an offset and no scale (TF-slim's
//! `batch_norm(scale=False)`), its moving statistics, and its fused forms with ReLU and a max
//! pool that the flex kernels run in one pass.

use burn::config::Config;
use burn::module::{Flag, Module, Param, RunningState};
use burn::nn::Initializer;
use burn::nn::conv::Conv2d;
use burn::nn::pool::MaxPool2d;
use burn::tensor::{Device, Tensor, assert_shape};

use towers_kernels::{MovingAverages, reads_rounded};

/// Configuration of [`OffsetBatchNorm`]; the defaults are TF-slim Inception v3's.
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct OffsetBatchNormConfig {
    /// The number of channels.
    pub num_features: usize,
    /// Added to the variance before the square root.
    #[config(default = 1e-3)]
    pub epsilon: f64,
    /// Weight of the batch statistics in the moving averages, in Burn's convention
    /// (`running = (1 - momentum) * running + momentum * batch`). TF's `decay` is
    /// `1 - momentum`: slim's 0.9997 is the default here.
    #[config(default = "1.0 - 0.9997")]
    pub momentum: f64,
}

/// Batch normalization with a learned offset (beta) and no scale, as TF-slim's
/// `batch_norm(scale=False)` and Keras' `BatchNormalization(scale=False)` in Inception v3.
///
/// Burn's `BatchNorm` always trains a gamma; a frozen one would still be counted, saved and
/// seen by optimizers, so this layer has none (the following ReLU makes a scale redundant).
/// Field names match Burn's `BatchNorm` so that statistics sync finds `running_mean` and
/// `running_var` at the same paths for both.
#[derive(Module, Debug)]
pub struct OffsetBatchNorm {
    /// The learned offset.
    pub beta: Param<Tensor<1>>,
    /// Whether the layer trains (batch statistics, moving-average updates) on an autodiff device.
    pub training: Param<Flag>,
    /// Moving average of the batch means.
    pub running_mean: RunningState<Tensor<1>>,
    /// Moving average of the (biased) batch variances, as `tf.nn.moments` gives them.
    pub running_var: RunningState<Tensor<1>>,
    /// See [`OffsetBatchNormConfig::momentum`].
    pub momentum: f64,
    /// See [`OffsetBatchNormConfig::epsilon`].
    pub epsilon: f64,
}

impl OffsetBatchNormConfig {
    /// Initializes the layer: beta 0, moving mean 0, moving variance 1 (as TF).
    pub fn init(&self, device: &Device) -> OffsetBatchNorm {
        assert!(
            self.num_features > 0,
            "num_features must be greater than zero"
        );
        assert!(
            self.epsilon.is_finite() && self.epsilon > 0.0,
            "epsilon must be finite and positive"
        );
        assert!(
            (0.0..=1.0).contains(&self.momentum),
            "momentum must be within [0, 1]"
        );
        let c = self.num_features;
        OffsetBatchNorm {
            beta: Initializer::Zeros.init([c], device),
            training: Param::from_bool(true),
            running_mean: RunningState::new(Tensor::zeros([c], device)),
            running_var: RunningState::new(Tensor::ones([c], device)),
            momentum: self.momentum,
            epsilon: self.epsilon,
        }
    }
}

impl OffsetBatchNorm {
    /// Normalizes `[n, c, ...]` per channel: with batch statistics (and a moving-average
    /// update) when training on an autodiff device, with the moving averages otherwise.
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        let [c] = self.beta.shape().dims();
        assert_shape!(input, [_, c, ..]);
        let device = input.device();
        let gamma = || Tensor::ones([c], &device);
        if !(device.is_autodiff() && self.training.is_enabled()) {
            return burn::tensor::module::batch_norm(
                input,
                gamma(),
                self.beta.val(),
                self.running_mean.value().to_device(&device),
                self.running_var.value().to_device(&device),
                self.epsilon,
            );
        }
        // Without a scale on CubeCL devices (a backward pass of two reductions, the moving
        // averages moved in its kernels); Burn's, with a scale of ones, elsewhere.
        let (beta, averages) = (self.beta.val(), self.averages(&device));
        let (output, moved) =
            towers_kernels::offset_batch_norm_moving(&input, &beta, self.epsilon, averages.clone())
                .unwrap_or_else(|| {
                    let batch =
                        burn::tensor::module::batch_norm_train(input, gamma(), beta, self.epsilon);
                    (
                        batch.output,
                        averages.moved_towards(batch.mean, batch.variance),
                    )
                });
        self.update_running(moved);
        output
    }

    /// `relu(self.forward(x))`; on flex both in the passes of one kernel
    /// (`flex/norm/batch_norm.rs`): on batch statistics while training, on the moving averages
    /// otherwise (evaluation, where Burn's batch norm ran its elementwise ops on one thread);
    /// while training on a CubeCL device, one op whose kernels take the ReLU's backward pass in
    /// (`towers_kernels::offset_batch_norm_relu_moving`).
    pub fn forward_relu(&self, x: Tensor<4>) -> Tensor<4> {
        self.normalized_relu(x, false)
    }

    /// [`forward_relu`](Self::forward_relu) for an output that only the convolution `next`
    /// reads: handed on rounded to bf16 where `next` reads such an input as it is, forward and
    /// for its weight gradient (in a bf16 span on flex where the direct vector kernels run,
    /// AVX-512 BF16 without AMX; not a 1x1 at stride 1, which f32 gemm reads in place), else as
    /// `forward_relu` gives it. `next` rounds its input to
    /// bf16 anyway, so it computes the same bits, from half the bytes written, kept for the
    /// backward pass and packed; the output's gradient is f32 still.
    pub fn forward_relu_into(&self, x: Tensor<4>, next: &Conv2d) -> Tensor<4> {
        let rounded = reads_rounded(next, x.dims());
        self.normalized_relu(x, rounded)
    }

    /// `relu(self.forward(x))`, on flex `rounded` to bf16 or in f32.
    #[cfg_attr(not(feature = "flex"), allow(unused_variables))]
    pub(crate) fn normalized_relu(&self, x: Tensor<4>, rounded: bool) -> Tensor<4> {
        #[cfg(feature = "flex")]
        {
            use towers_kernels::flex_route as flex;
            let epsilon = self.epsilon;
            let fused = self.fused(
                &x,
                |x, beta| flex::batch_norm_relu(x, beta, epsilon, rounded),
                |x, beta, averages| {
                    flex::batch_norm_relu_given(x, beta, averages, epsilon, rounded)
                },
            );
            if let Some(y) = fused {
                return y;
            }
        }
        if let Some(y) = self.training_on_cube_relu(&x) {
            return y;
        }
        burn::tensor::activation::relu(self.forward(x))
    }

    /// `relu(self.forward(x))` while training on a CubeCL device, by
    /// `towers_kernels::offset_batch_norm_relu_moving`; `None` elsewhere.
    fn training_on_cube_relu(&self, x: &Tensor<4>) -> Option<Tensor<4>> {
        let device = x.device();
        let training = device.is_autodiff() && self.training.is_enabled();
        if !(training && towers_kernels::on_cubecl(&device)) {
            return None;
        }
        let (beta, averages) = (self.beta.val(), self.averages(&device));
        let (y, moved) =
            towers_kernels::offset_batch_norm_relu_moving(x, &beta, self.epsilon, averages)?;
        self.update_running(moved);
        Some(y)
    }

    /// `max_pool2d(pool, self.forward_relu(x))`; on flex in one kernel that pools `x` first
    /// (`flex/pool/batch_norm_max_pool.rs`): the normalization (no scale, so a positive factor) and
    /// the ReLU are monotone, so the window's largest output is the output at its largest
    /// input, and only the pooled values are normalized.
    pub fn forward_relu_max_pool(&self, pool: &MaxPool2d, x: Tensor<4>) -> Tensor<4> {
        #[cfg(feature = "flex")]
        {
            use towers_kernels::flex_route as flex;
            let epsilon = self.epsilon;
            let fused = self.fused(
                &x,
                |x, beta| flex::batch_norm_relu_max_pool(x, beta, epsilon, pool),
                |x, beta, averages| {
                    flex::batch_norm_relu_max_pool_given(x, beta, averages, epsilon, pool)
                },
            );
            if let Some(y) = fused {
                return y;
            }
        }
        towers_kernels::max_pool2d(pool, self.forward_relu(x))
    }

    /// A fused flex kernel's output: `on_batch`'s on the batch's statistics (the moving
    /// averages moved towards them) while training on an autodiff device, else `on_given`'s on
    /// the moving averages; `None` where the kernel does not apply.
    #[cfg(feature = "flex")]
    fn fused(
        &self,
        x: &Tensor<4>,
        on_batch: impl FnOnce(&Tensor<4>, Tensor<1>) -> Option<(Tensor<4>, Tensor<2>)>,
        on_given: impl FnOnce(&Tensor<4>, Tensor<1>, [Tensor<1>; 2]) -> Option<Tensor<4>>,
    ) -> Option<Tensor<4>> {
        let device = x.device();
        if device.is_autodiff() && self.training.is_enabled() {
            let (y, moments) = on_batch(x, self.beta.val())?;
            self.update_running(self.averages(&device).moved_towards_moments(moments));
            return Some(y);
        }
        let averages =
            [&self.running_mean, &self.running_var].map(|s| s.value().to_device(&device));
        on_given(x, self.beta.val(), averages)
    }

    /// The moving averages on `device`.
    fn averages(&self, device: &Device) -> MovingAverages {
        MovingAverages::of_states(&self.running_mean, &self.running_var, self.momentum, device)
    }

    /// The moving averages replaced by `moved`.
    fn update_running(&self, moved: MovingAverages) {
        moved.store_in(&self.running_mean, &self.running_var);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::count_params;
    use burn::tensor::{Device, TensorData};

    /// The fused batch norm and ReLU of flex against Burn's batch norm followed by ReLU:
    /// outputs, the input's and offset's gradients (through a concatenation), and the moving
    /// averages after the step.
    #[cfg(feature = "flex")]
    #[test]
    fn fused_relu_matches_burns_batch_norm_then_relu() {
        use burn::tensor::Distribution;
        let device = Device::flex().autodiff();
        // Not 2 values per channel: there the input gradient is zero up to rounding (the
        // normalized values are ±1 whatever the input), and a relative comparison meaningless.
        // The last case's channels sit far from zero: their variance must not cancel.
        let cases = [
            ([4, 6, 5, 7], 0.0),
            ([5, 3, 1, 1], 0.0),
            ([3, 32, 17, 17], 0.0),
            ([2, 8, 9, 9], 100.0),
        ];
        for ([n, c, h, w], offset) in cases {
            let beta = Tensor::<1>::random([c], Distribution::Default, &device);
            let layer = || OffsetBatchNorm {
                beta: Param::from_tensor(beta.clone()),
                ..OffsetBatchNormConfig::new(c).init(&device)
            };
            let (fused, apart) = (layer(), layer());
            let x = Tensor::<4>::random([n, c, h, w], Distribution::Uniform(-2.0, 3.0), &device)
                .add_scalar(offset)
                .require_grad();
            // Behind a concatenation, as in Inception's blocks: the output's gradient arrives as
            // a slice of the whole's.
            let side = Tensor::<4>::random([n, 2, h, w], Distribution::Default, &device);
            let joined = |y: Tensor<4>| Tensor::cat(vec![side.clone(), y], 1);
            let got = joined(fused.forward_relu(x.clone()));
            let want = joined(burn::tensor::activation::relu(apart.forward(x.clone())));
            let counted = away_from_kink(joined(layer().forward(x.clone())));
            let diffs = differences(&x, counted, (got, &fused), (want, &apart));
            // Few values per channel (5 in the second case) make the input gradient a
            // difference of nearly equal terms: f32 rounding shows at ~1e-5 there.
            assert!(
                diffs.iter().all(|&d| d < 1e-4),
                "{n}x{c}x{h}x{w}: {diffs:?}"
            );
            let stats =
                |l: &OffsetBatchNorm| [l.running_mean.value(), l.running_var.value()].map(vec1);
            let (s_got, s_want) = (stats(&fused), stats(&apart));
            for (a, b) in s_got.iter().flatten().zip(s_want.iter().flatten()) {
                assert!(
                    (a - b).abs() < 1e-6,
                    "moving averages {s_got:?} against {s_want:?}"
                );
            }
        }
    }

    /// Without autodiff (evaluation), the fused kernel on the moving averages against Burn's
    /// batch norm then ReLU, and `forward_relu` taking it.
    #[cfg(feature = "flex")]
    #[test]
    fn fused_relu_on_moving_averages_matches_burns() {
        use burn::tensor::Distribution::Uniform;
        use towers_kernels::flex_route::batch_norm_relu_given;
        use towers_testing::compare::rel_diff;
        let device = Device::flex();
        let c = 6;
        let random = |low, high| Tensor::<1>::random([c], Uniform(low, high), &device);
        let layer = OffsetBatchNorm {
            beta: Param::from_tensor(random(-1.0, 1.0)),
            running_mean: RunningState::new(random(-1.0, 1.0)),
            running_var: RunningState::new(random(0.5, 2.0)),
            ..OffsetBatchNormConfig::new(c).init(&device)
        };
        let x = Tensor::<4>::random([3, c, 5, 7], Uniform(-2.0, 3.0), &device);
        let averages = [&layer.running_mean, &layer.running_var].map(|s| s.value());
        let fused = |rounded| {
            let (beta, averages) = (layer.beta.val(), averages.clone());
            batch_norm_relu_given(&x, beta, averages, layer.epsilon, rounded)
                .expect("flex takes batch norms on given statistics")
        };
        let want = burn::tensor::activation::relu(layer.forward(x.clone()));
        let diff = rel_diff(fused(false), want);
        assert!(diff < 1e-6, "fused against Burn's: {diff}");
        // Rounded, the f32 output's nearest bf16s (to even), computed in the same pass.
        let rounded = fused(true);
        assert_eq!(rounded.dtype(), burn::tensor::DType::BF16);
        let nearest = fused(false).cast(burn::tensor::DType::BF16);
        assert_eq!(rounded.into_data(), nearest.into_data());
        let got = layer.forward_relu(x.clone());
        assert_eq!(got.into_data(), fused(false).into_data());
    }

    /// Training turned off on an autodiff device (fine-tuning with frozen statistics): the
    /// fused kernel on the moving averages, its gradients (the statistics constants) against
    /// Burn's batch norm then ReLU.
    #[cfg(feature = "flex")]
    #[test]
    fn fused_relu_on_frozen_averages_has_burns_gradients() {
        use burn::tensor::Distribution::Uniform;
        let device = Device::flex().autodiff();
        let c = 5;
        let random = |low, high| Tensor::<1>::random([c], Uniform(low, high), &device);
        let (beta, mean, var) = (random(-1.0, 1.0), random(-1.0, 1.0), random(0.5, 2.0));
        let layer = || OffsetBatchNorm {
            beta: Param::from_tensor(beta.clone()),
            training: Param::from_bool(false),
            running_mean: RunningState::new(mean.clone()),
            running_var: RunningState::new(var.clone()),
            ..OffsetBatchNormConfig::new(c).init(&device)
        };
        let (fused, apart) = (layer(), layer());
        let x = Tensor::<4>::random([3, c, 4, 6], Uniform(-2.0, 3.0), &device).require_grad();
        let got = fused.forward_relu(x.clone());
        let want = burn::tensor::activation::relu(apart.forward(x.clone()));
        let counted = away_from_kink(layer().forward(x.clone()));
        let diffs = differences(&x, counted, (got, &fused), (want, &apart));
        assert!(diffs.iter().all(|&d| d < 1e-5), "{diffs:?}");
        // The averages stay where they were.
        assert_eq!(vec1(fused.running_mean.value()), vec1(mean));
    }

    /// Batch norm, ReLU and max pool in one kernel against the batch norm's kernel then the
    /// pool's, on batch statistics and on the moving averages (training off, and without
    /// autodiff): outputs, the input's and offset's gradients, the moving averages. Inputs are
    /// distinct values, so that a window's maximum is one place either way.
    #[cfg(feature = "flex")]
    #[test]
    fn fused_max_pool_matches_pooling_after_batch_norm() {
        use burn::nn::pool::MaxPool2dConfig;
        use burn::tensor::Distribution;
        let device = Device::flex().autodiff();
        let cases = [
            ([2, 3, 9, 11], [3, 3], [2, 2], false, 0.0),
            ([3, 4, 8, 8], [2, 2], [2, 2], false, 100.0),
            ([2, 2, 8, 10], [3, 3], [2, 2], true, 0.0),
        ];
        // Training (batch statistics), then training turned off (the moving averages).
        for (([n, c, h, w], kernel, strides, ceil_mode, offset), training) in cases
            .into_iter()
            .flat_map(|case| [(case, true), (case, false)])
        {
            let pool = MaxPool2dConfig::new(kernel)
                .with_strides(strides)
                .with_ceil_mode(ceil_mode)
                .init();
            let random =
                |low, high| Tensor::<1>::random([c], Distribution::Uniform(low, high), &device);
            let (beta, mean, var) = (random(-0.5, 0.5), random(-1.0, 1.0), random(0.5, 2.0));
            let layer = || OffsetBatchNorm {
                beta: Param::from_tensor(beta.clone()),
                training: Param::from_bool(training),
                running_mean: RunningState::new(mean.clone().add_scalar(offset)),
                running_var: RunningState::new(var.clone()),
                ..OffsetBatchNormConfig::new(c).init(&device)
            };
            let (fused, apart) = (layer(), layer());
            let len = n * c * h * w;
            // A permutation of evenly spaced values (7919 is prime, so coprime to `len`).
            let values: Vec<f32> = (0..len)
                .map(|i| (i * 7919 % len) as f32 / len as f32 * 4.0 - 2.0 + offset)
                .collect();
            let x = Tensor::<4>::from_data(TensorData::new(values, [n, c, h, w]), &device)
                .require_grad();
            let got = fused.forward_relu_max_pool(&pool, x.clone());
            let want = towers_kernels::max_pool2d(&pool, apart.forward_relu(x.clone()));
            assert_eq!(got.dims(), want.dims());
            // A window's maximum commutes with ReLU, so the pool of the values before it says
            // which outputs lie within rounding of its kink.
            let before_relu = towers_kernels::max_pool2d(&pool, layer().forward(x.clone()));
            let diffs = differences(
                &x,
                away_from_kink(before_relu),
                (got, &fused),
                (want, &apart),
            );
            assert!(
                diffs.iter().all(|&d| d < 1e-5),
                "{n}x{c}x{h}x{w}, {kernel:?}/{strides:?}, training {training}: {diffs:?}"
            );
            let stats =
                |l: &OffsetBatchNorm| [l.running_mean.value(), l.running_var.value()].map(vec1);
            assert_eq!(stats(&fused), stats(&apart));
            // Without autodiff (evaluation), on the moving averages.
            let (fused, x) = (fused.valid(), x.inner());
            let got = fused.forward_relu_max_pool(&pool, x.clone());
            let want = towers_kernels::max_pool2d(&pool, fused.forward_relu(x));
            assert_eq!(got.into_data(), want.into_data(), "evaluation");
        }
    }

    /// How far `got` (by `fused`) lies from `want` (by `apart`), both computed from `x`: the
    /// outputs, and the gradients of `x` and of each layer's offset for one random weighting of
    /// the outputs, zero where `counted` is 0 (see `away_from_kink`).
    #[cfg(feature = "flex")]
    fn differences(
        x: &Tensor<4>,
        counted: Tensor<4>,
        (got, fused): (Tensor<4>, &OffsetBatchNorm),
        (want, apart): (Tensor<4>, &OffsetBatchNorm),
    ) -> [f32; 3] {
        use towers_testing::compare::rel_diff;
        let probe =
            Tensor::random(got.dims(), burn::tensor::Distribution::Default, &x.device()) * counted;
        let g_got = (got.clone() * probe.clone()).sum().backward();
        let g_want = (want.clone() * probe).sum().backward();
        let (b_got, b_want) = (fused.beta.val(), apart.beta.val());
        [
            rel_diff(got, want),
            rel_diff(x.grad(&g_got).unwrap(), x.grad(&g_want).unwrap()),
            rel_diff(b_got.grad(&g_got).unwrap(), b_want.grad(&g_want).unwrap()),
        ]
    }

    /// 1 where a value before ReLU lies clear of its kink, 0 within rounding of it: there the
    /// fused and the separate computations may round to opposite sides of it and rightly
    /// disagree on that value's gradient (seen once in ~1000 runs, at offset 100).
    #[cfg(feature = "flex")]
    fn away_from_kink(before_relu: Tensor<4>) -> Tensor<4> {
        before_relu.detach().abs().greater_elem(1e-3).float()
    }

    fn vec1(t: Tensor<1>) -> Vec<f32> {
        t.into_data().try_to_vec().unwrap()
    }

    /// Channel 0 holds 1..=4, channel 1 holds 10, 20, 30, 40 (batch 2, 2 values each).
    fn input(device: &Device) -> Tensor<3> {
        Tensor::from_data(
            TensorData::new(
                vec![1.0f32, 2.0, 10.0, 20.0, 3.0, 4.0, 30.0, 40.0],
                [2, 2, 2],
            ),
            device,
        )
    }

    #[test]
    fn trains_on_batch_statistics_and_moves_averages_by_tf_decay() {
        let device = Device::flex().autodiff();
        let bn = OffsetBatchNormConfig::new(2).init(&device);
        let out: Vec<f32> = bn.forward(input(&device)).into_data().try_to_vec().unwrap();
        // Channel 0: mean 2.5, biased variance 1.25.
        let want0 = |x: f32| (x - 2.5) / (1.25f32 + 1e-3).sqrt();
        assert!((out[0] - want0(1.0)).abs() < 1e-5 && (out[5] - want0(4.0)).abs() < 1e-5);
        let m = 1.0 - 0.9997;
        let mean = vec1(bn.running_mean.value_sync());
        let var = vec1(bn.running_var.value_sync());
        // TF: moving = decay * moving + (1 - decay) * batch, from mean 0 and variance 1.
        assert!((mean[0] as f64 - m * 2.5).abs() < 1e-7);
        assert!((mean[1] as f64 - m * 25.0).abs() < 1e-6);
        assert!((var[0] as f64 - (0.9997 + m * 1.25)).abs() < 1e-6);
        assert!((var[1] as f64 - (0.9997 + m * 125.0)).abs() < 1e-5);
    }

    #[test]
    fn evaluates_on_moving_averages_and_has_no_scale() {
        let device = Device::flex();
        let bn = OffsetBatchNormConfig::new(2).init(&device);
        let out: Vec<f32> = bn.forward(input(&device)).into_data().try_to_vec().unwrap();
        let want = 10.0 / (1.0f32 + 1e-3).sqrt();
        assert!((out[2] - want).abs() < 1e-5);
        let counts = count_params(&bn);
        assert_eq!((counts.trainable, counts.moving), (2, 4));
    }
}
