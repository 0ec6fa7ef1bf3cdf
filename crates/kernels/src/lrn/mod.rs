//! [`lrn_by_band`]: local response normalization across channels (`tf.nn.lrn`) on Burn's CubeCL
//! devices, each channel's window of squares summed by one product with a band matrix
//! ([`lrn_band`]), with a backward pass of its own.
//!
//! Why: Burn's autodiff derives the LRN's gradient one op at a time, and burn-fusion forms its
//! blocks of operations that share a tensor and never merges two blocks that each fuse already:
//! the power's gradient starts from the window sums alone, apart from the products with the
//! output's gradient, so the CIFAR-10 net's second LRN took three kernels before its band
//! product where one does (bench/HISTORY.md, "The pool before the bias"). Here the gradient
//! is an element-wise chain, each op taking the result of the one before it, the band product,
//! and one more element-wise expression (the CIFAR-10 step on lavapipe 65 launches against 66;
//! unfused, where each op is a launch, 136 against 135).
//!
//! - `extension.rs`: the Burn backend extension (the forward pass by Burn's ops) and which
//!   devices it routes.
//! - `backward.rs`: the backward pass, under autodiff.

#[cfg(feature = "gpu")]
mod backward;
#[cfg(feature = "gpu")]
mod extension;

use burn::tensor::{Device, Tensor, TensorData};

/// `x / (bias + alpha · Σ_{|c' - c| ≤ radius} x[c']²)^beta` across the channels of `x`
/// (`[n, c, h, w]`), as `tf.nn.lrn` (`params` are `[bias, alpha, beta]`), where `x` is on one of
/// Burn's CubeCL devices: the window sums one product of `x²`, as rows `[n·h·w, c]` (a view
/// where the channels lie last in memory, as Burn's GPU convolutions write them), by
/// [`lrn_band`]; under autodiff the gradient is the extension's own (see the module's doc).
/// `None` elsewhere, and in builds without a GPU backend.
pub fn lrn_by_band(x: &Tensor<4>, radius: usize, params: [f64; 3]) -> Option<Tensor<4>> {
    #[cfg(feature = "gpu")]
    if crate::cubecl_device::on_cubecl(&x.device()) {
        return Some(extension::lrn(x, radius, params));
    }
    let _ = (x, radius, params);
    None
}

/// The `[channels, channels]` band whose product sums each channel's window: `alpha` where two
/// channels are at most `radius` apart, zero elsewhere (so the windows at the edges are
/// shorter). It is symmetric: from either side it sums the same windows.
pub fn lrn_band(channels: usize, radius: usize, alpha: f64, device: &Device) -> Tensor<2> {
    let band: Vec<f32> = (0..channels * channels)
        .map(|i| match (i / channels).abs_diff(i % channels) <= radius {
            true => alpha as f32,
            false => 0.0,
        })
        .collect();
    Tensor::from_data(TensorData::new(band, [channels, channels]), device)
}
