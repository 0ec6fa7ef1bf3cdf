//! [`offset_batch_norm`]: batch normalization with an offset and no scale (TF-slim's
//! `batch_norm(scale=False)`) on the batch's own statistics, with a backward pass of its own on
//! Burn's CubeCL devices.
//!
//! Why: Burn's `batch_norm_train` (burn-backend's default, which the CubeCL backends take) needs
//! a scale, so a layer without one fills a `gamma` of ones each forward pass, and its backward
//! pass takes four reductions (the two sums, then their means again, apart for f16) and a
//! gradient for that constant. On a fused GPU that was about 10 of the ~42 launches per
//! convolution layer of Inception v3's step (bench/HISTORY.md, "Where Inception v3's launches
//! go"). Here: no scale, two reductions forward (the mean, then the variance from the centred
//! values) and two backward (`Σ dy` and `Σ dy · x̂`, per channel), each pass's element-wise
//! work in one expression.
//!
//! - `extension.rs`: the Burn backend extension (the forward pass by Burn's ops, on every
//!   backend it routes) and which devices it routes;
//! - `backward.rs`: the backward pass, under autodiff.

#[cfg(feature = "gpu")]
mod backward;
#[cfg(feature = "gpu")]
mod extension;

use burn::tensor::Tensor;

/// `(x - mean) / √(variance + epsilon) + beta` per channel of `x` (`[n, c, ...]`, `beta`
/// `[c]`), on the batch's own mean and biased variance, which come back with it (`[c]` each, no
/// gradient), as Burn's `batch_norm_train` with a scale of ones computes them; under autodiff
/// the gradients of `x` and `beta` are its own backward pass's.
///
/// `None` off Burn's CubeCL devices (and in builds without a GPU backend): flex has fused
/// kernels of its own (`flex_route`), other backends take Burn's `batch_norm_train`.
pub fn offset_batch_norm<const D: usize>(
    x: &Tensor<D>,
    beta: &Tensor<1>,
    epsilon: f64,
) -> Option<(Tensor<D>, [Tensor<1>; 2])> {
    #[cfg(feature = "gpu")]
    if extension::routed(&x.device()) {
        return Some(extension::offset_batch_norm(x, beta, epsilon));
    }
    let _ = (x, beta, epsilon);
    None
}
