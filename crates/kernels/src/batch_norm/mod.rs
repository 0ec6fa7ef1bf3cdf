//! [`batch_norm_train`] and [`offset_batch_norm`]: batch normalization on the batch's own
//! statistics, with a scale (Burn's `BatchNorm`) or without (TF-slim's
//! `batch_norm(scale=False)`), with a backward pass of their own on Burn's CubeCL devices, and
//! the layer's [`MovingAverages`] moved in the same kernels; with a ReLU or ReLU6 after it in
//! the same op ([`batch_norm_relu_train_moving`], [`offset_batch_norm_relu_moving`],
//! [`batch_norm_relu6_train_moving`]), whose backward pass the batch norm's kernels take in.
//!
//! Why: Burn's `batch_norm_train` (burn-backend's default, which the CubeCL backends take)
//! takes four reductions in its backward pass (the two sums, then their means again, apart for
//! f16), and a layer without a scale fills a `gamma` of ones each forward pass and gets its
//! gradient all the same. On a fused GPU that was about 10 of the ~42 launches per convolution
//! layer of Inception v3's step (bench/HISTORY.md, "Where Inception v3's launches go"). Here:
//! two reductions forward (the mean, then the variance from the centred values, each moving its
//! average as it writes) and backward `Σ dy` and `Σ dy · x̂` per channel from one pass of a
//! kernel of ours, each pass's element-wise work in one expression.
//!
//! - `moving_averages.rs`: the moving averages, and their move;
//! - `rectifier.rs`: the ReLU or ReLU6 after the batch norm, forward and backward;
//! - `extension.rs`: the Burn backend extension (the forward pass by Burn's ops, on every
//!   backend it routes) and which devices it routes;
//! - `backward.rs`: the backward pass, under autodiff;
//! - `column_sums.rs`: the per-channel sums and means both passes take, in pieces short
//!   enough for wgpu;
//! - `gradient_sums/`: the backward pass's two sums per channel in one kernel.

#[cfg(feature = "gpu")]
mod backward;
#[cfg(feature = "gpu")]
mod column_sums;
#[cfg(feature = "gpu")]
mod extension;
#[cfg(feature = "gpu")]
mod gradient_sums;
mod moving_averages;
mod rectifier;

use burn::tensor::Tensor;

pub use moving_averages::MovingAverages;
use rectifier::Rectifier;

/// `gamma · (x - mean) / √(variance + epsilon) + beta` per channel of `x` (`[n, c, ...]`,
/// `gamma` and `beta` `[c]`), on the batch's own mean and biased variance, which come back with
/// it (`[c]` each, no gradient), as Burn's `batch_norm_train` computes them; under autodiff the
/// gradients of `x`, `gamma` and `beta` are its own backward pass's. A layer with moving
/// averages takes [`batch_norm_train_moving`], which moves them in its own kernels.
///
/// `None` off Burn's CubeCL devices (and in builds without a GPU backend): flex has fused
/// kernels of its own (`flex_route`), other backends take Burn's `batch_norm_train`.
pub fn batch_norm_train<const D: usize>(
    x: &Tensor<D>,
    gamma: &Tensor<1>,
    beta: &Tensor<1>,
    epsilon: f64,
) -> Option<(Tensor<D>, [Tensor<1>; 2])> {
    let moved = batch_norm_train_moving(x, gamma, beta, epsilon, the_batchs(x));
    moved.map(|(y, statistics)| (y, [statistics.mean, statistics.variance]))
}

/// [`batch_norm_train`] without a scale (`gamma` of ones, with no gradient to compute).
pub fn offset_batch_norm<const D: usize>(
    x: &Tensor<D>,
    beta: &Tensor<1>,
    epsilon: f64,
) -> Option<(Tensor<D>, [Tensor<1>; 2])> {
    let moved = offset_batch_norm_moving(x, beta, epsilon, the_batchs(x));
    moved.map(|(y, statistics)| (y, [statistics.mean, statistics.variance]))
}

/// [`batch_norm_train`], its `averages` moved towards the batch's mean and variance (no
/// gradient) in place of them: on a fused GPU the moves then run inside the kernel that takes
/// the variance, where moving them after the batch norm took two kernels of their own.
///
/// `None` where [`batch_norm_train`] is: there, Burn's `batch_norm_train` and
/// [`MovingAverages::moved_towards`].
///
/// # Panics
///
/// Where the averages do not hold one value per channel of `x`.
pub fn batch_norm_train_moving<const D: usize>(
    x: &Tensor<D>,
    gamma: &Tensor<1>,
    beta: &Tensor<1>,
    epsilon: f64,
    averages: MovingAverages,
) -> Option<(Tensor<D>, MovingAverages)> {
    on_cube(x, Some(gamma), beta, epsilon, None, averages)
}

/// [`batch_norm_train_moving`] without a scale, as [`offset_batch_norm`].
pub fn offset_batch_norm_moving<const D: usize>(
    x: &Tensor<D>,
    beta: &Tensor<1>,
    epsilon: f64,
    averages: MovingAverages,
) -> Option<(Tensor<D>, MovingAverages)> {
    on_cube(x, None, beta, epsilon, None, averages)
}

/// `relu(batch_norm_train_moving(..))`, the ReLU in the same op: forward in the batch norm's
/// element-wise expression (as fusion would take it anyway), backward inside the batch norm's
/// kernels, which mask the output's gradient as they read it, where a ReLU of its own took one
/// kernel more per layer on a fused GPU, writing and reading back a tensor of the input's
/// size. The gradients are those of Burn's `relu` after Burn's `batch_norm_train` (Burn's
/// mask: none where the output is `<= 0`).
///
/// `None` where [`batch_norm_train`] is.
///
/// # Panics
///
/// Where the averages do not hold one value per channel of `x`.
pub fn batch_norm_relu_train_moving<const D: usize>(
    x: &Tensor<D>,
    gamma: &Tensor<1>,
    beta: &Tensor<1>,
    epsilon: f64,
    averages: MovingAverages,
) -> Option<(Tensor<D>, MovingAverages)> {
    on_cube(
        x,
        Some(gamma),
        beta,
        epsilon,
        Some(Rectifier::Relu),
        averages,
    )
}

/// `relu6(batch_norm_train_moving(..))` (`min(max(y, 0), 6)`), as
/// [`batch_norm_relu_train_moving`]: MobileNetV2's layer. The input's and the parameters'
/// gradients pass where `0 < output < 6` (TF's `relu6` gradient; Burn's clamp also passes them
/// where the batch norm's output is exactly 0 or 6).
///
/// `None` where [`batch_norm_train`] is.
///
/// # Panics
///
/// Where the averages do not hold one value per channel of `x`.
pub fn batch_norm_relu6_train_moving<const D: usize>(
    x: &Tensor<D>,
    gamma: &Tensor<1>,
    beta: &Tensor<1>,
    epsilon: f64,
    averages: MovingAverages,
) -> Option<(Tensor<D>, MovingAverages)> {
    on_cube(
        x,
        Some(gamma),
        beta,
        epsilon,
        Some(Rectifier::Relu6),
        averages,
    )
}

/// [`batch_norm_relu_train_moving`] without a scale, as [`offset_batch_norm`]: Inception v3's
/// layer (TF-slim's `batch_norm(scale=False)` and its ReLU).
pub fn offset_batch_norm_relu_moving<const D: usize>(
    x: &Tensor<D>,
    beta: &Tensor<1>,
    epsilon: f64,
    averages: MovingAverages,
) -> Option<(Tensor<D>, MovingAverages)> {
    on_cube(x, None, beta, epsilon, Some(Rectifier::Relu), averages)
}

/// Averages that a momentum of 1 replaces by the batch's statistics, exactly (`0·0 + 1·s`).
fn the_batchs<const D: usize>(x: &Tensor<D>) -> MovingAverages {
    let channels = x.dims()[1];
    let zeros = || Tensor::zeros([channels], &x.device());
    MovingAverages::new(zeros(), zeros(), 1.0)
}

/// Either batch norm, a `rectifier` after it where there is one, where `x` is on a CubeCL device
/// (which the extension routes), else `None`.
fn on_cube<const D: usize>(
    x: &Tensor<D>,
    gamma: Option<&Tensor<1>>,
    beta: &Tensor<1>,
    epsilon: f64,
    rectifier: Option<Rectifier>,
    averages: MovingAverages,
) -> Option<(Tensor<D>, MovingAverages)> {
    averages.assert_channels(x.dims()[1]);
    #[cfg(feature = "gpu")]
    if crate::cubecl_device::on_cubecl(&x.device()) {
        return Some(extension::batch_norm(
            x, gamma, beta, epsilon, rectifier, averages,
        ));
    }
    let _ = (x, gamma, beta, epsilon, rectifier, averages);
    None
}
