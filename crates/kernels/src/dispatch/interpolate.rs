//! [`interpolate`]: Burn's `burn::tensor::module::interpolate`, bilinear resizing on flex by
//! burn-towers' kernel (`crate::flex::interpolate`).

use burn::tensor::Tensor;
#[cfg(feature = "flex")]
use burn::tensor::ops::InterpolateMode;
use burn::tensor::ops::InterpolateOptions;

#[cfg(feature = "flex")]
use super::flex_route;

/// `x` (`[n, c, h, w]`) resized as `options` say, as Burn's `interpolate`: to
/// `options.output_size`, or to `floor(size · scale_factor)`. Bilinear resizing of f32 on flex
/// runs in two vectorized passes each way (Burn's reads four neighbours a pixel at a time);
/// every other mode, type and backend is Burn's. The same outputs and gradients as Burn's to
/// float rounding.
///
/// # Panics
///
/// Unless exactly one of `output_size` and `scale_factor` is set, as Burn's.
pub fn interpolate(x: Tensor<4>, options: InterpolateOptions) -> Tensor<4> {
    #[cfg(feature = "flex")]
    if matches!(options.mode, InterpolateMode::Bilinear) {
        let [_, _, h, w] = x.dims();
        let out = output_size([h, w], &options);
        if let Some(y) = flex_route::bilinear(&x, out, options.align_corners) {
            return y;
        }
    }
    burn::tensor::module::interpolate(x, options)
}

/// The output's `[height, width]`, as Burn's `interpolate` takes it (its function is private).
#[cfg(feature = "flex")]
fn output_size(input: [usize; 2], options: &InterpolateOptions) -> [usize; 2] {
    match (options.output_size, options.scale_factor) {
        (Some(size), None) => size,
        (None, Some(scale)) => {
            std::array::from_fn(|i| (input[i] as f64 * scale[i] as f64) as usize)
        }
        _ => panic!("interpolate: set exactly one of output_size and scale_factor"),
    }
}
