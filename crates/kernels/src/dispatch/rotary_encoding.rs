//! [`rotary_encoding`]: Burn's `RotaryEncoding::apply`, on flex by one kernel each way.

use burn::nn::RotaryEncoding;
use burn::tensor::Tensor;

/// `rope.apply(x, start)`: `x` (`[..., seq, d_model]`) with its positions `start..start + seq`
/// encoded; on flex in one pass each way (the same values as Burn's), elsewhere Burn's layer.
pub fn rotary_encoding<const D: usize>(
    rope: &RotaryEncoding,
    x: Tensor<D>,
    start: usize,
) -> Tensor<D> {
    #[cfg(feature = "flex")]
    if let Some(y) = super::flex_route::rotary_encoding(rope, &x, start) {
        return y;
    }
    rope.apply(x, start)
}
