//! A bias per channel, then ReLU, fused into the convolution that precedes them
//! ([`crate::flex::conv::passes::forward_bias_relu`]): applied to each share of the output while it is still
//! in cache, instead of Burn's two passes, each reading and writing the whole output into a new
//! tensor; and backward, the ReLU's mask and the bias's gradient in one pass over the output
//! gradient. On the CIFAR-10 net's first convolution (4.7 million outputs a batch) those passes
//! cost more than the convolution itself in bf16.

use std::mem::MaybeUninit;

use burn::tensor::TensorData;
use burn_flex::FlexTensor;
use multiversion::multiversion;
use rayon::prelude::*;

use crate::flex::memory::SUM_LANES;
use crate::flex::memory::buffers::contiguous;

/// `y = relu(y + bias)` in place, `y` holding images of `bias.len()` planes of `places` values.
/// NaN stays NaN, as in Burn's ReLU.
pub(crate) fn apply(y: &mut [f32], bias: &[f32], places: usize) {
    for (plane, &b) in y.chunks_exact_mut(places).zip(bias.iter().cycle()) {
        add_relu(plane, b);
    }
}

/// `relu(v + b)` for each value of a plane.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn add_relu(plane: &mut [f32], b: f32) {
    plane.iter_mut().for_each(|v| *v = relu(*v + b));
}

#[inline(always)]
fn relu(v: f32) -> f32 {
    if v <= 0.0 { 0.0 } else { v }
}

/// Given the fused op's output `y` and `grad = ∂L/∂y` (`[n, c, h, w]` each): the gradient
/// before the ReLU (zero where `y` is not positive), which is also the convolution's output
/// gradient, and the bias's gradient (its sum per channel).
pub(crate) fn backward(y: &FlexTensor, grad: FlexTensor) -> (FlexTensor, FlexTensor) {
    let (y, grad) = (contiguous(y.clone()), contiguous(grad));
    let shape = y.layout().shape().to_vec();
    // Every value of `masked` is written below only if the two tile one another.
    assert_eq!(
        shape,
        grad.layout().shape().to_vec(),
        "the output and its gradient"
    );
    assert_eq!(shape.len(), 4, "an [n, c, h, w] output");
    let (channels, places) = (shape[1], shape[2] * shape[3]);
    let (y_data, grad_data): (&[f32], &[f32]) = (y.storage(), grad.storage());
    let len = grad_data.len();
    // Not zeroed first: every value is written below.
    let mut masked = Vec::with_capacity(len);
    let per_image = (channels * places).max(1);
    let sums: Vec<f64> = masked.spare_capacity_mut()[..len]
        .par_chunks_mut(per_image)
        .zip(
            grad_data
                .par_chunks(per_image)
                .zip(y_data.par_chunks(per_image)),
        )
        .map(|(dst, (g, y))| image_sums(dst, g, y, places))
        .reduce(
            || vec![0.0; channels],
            |mut a, b| {
                a.iter_mut().zip(b).for_each(|(a, b)| *a += b);
                a
            },
        );
    // SAFETY: the capacity is at least `len`, and `image_sums` wrote every image's values.
    unsafe { masked.set_len(len) };
    let bias_grad: Vec<f32> = sums.iter().map(|&s| s as f32).collect();
    (
        FlexTensor::from_data(TensorData::new(masked, shape)),
        FlexTensor::from_data(TensorData::new(bias_grad, [channels])),
    )
}

/// One image: `dst = g` where `y > 0`, else 0 (every value written); the sum of `dst` per
/// channel.
fn image_sums(dst: &mut [MaybeUninit<f32>], g: &[f32], y: &[f32], places: usize) -> Vec<f64> {
    assert!(dst.len() == g.len() && g.len() == y.len() && dst.len().is_multiple_of(places.max(1)));
    let planes = dst.chunks_exact_mut(places).zip(g.chunks_exact(places));
    planes
        .zip(y.chunks_exact(places))
        .map(|((dst, g), y)| masked_plane(dst, g, y))
        .collect()
}

/// A plane's `dst = g` where `y > 0`, else 0, and the sum of `dst`, in `SUM_LANES` sums side by
/// side (one sum in order kept the compiler to one value at a time: 5% of the CIFAR-10 net's
/// bf16 step).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn masked_plane(dst: &mut [MaybeUninit<f32>], g: &[f32], y: &[f32]) -> f64 {
    assert!(g.len() == dst.len() && y.len() == dst.len());
    let mut sums = [0f32; SUM_LANES];
    let (dst_lanes, dst_rest) = dst.as_chunks_mut::<SUM_LANES>();
    let ((g_lanes, g_rest), (y_lanes, y_rest)) =
        (g.as_chunks::<SUM_LANES>(), y.as_chunks::<SUM_LANES>());
    for ((dst, g), y) in dst_lanes.iter_mut().zip(g_lanes).zip(y_lanes) {
        for l in 0..SUM_LANES {
            // Loaded before the test, so that the compiler selects instead of branching.
            let (g, y) = (g[l], y[l]);
            let d = if y > 0.0 { g } else { 0.0 };
            dst[l].write(d);
            sums[l] += d;
        }
    }
    for (l, ((dst, &g), &y)) in dst_rest.iter_mut().zip(g_rest).zip(y_rest).enumerate() {
        let d = if y > 0.0 { g } else { 0.0 };
        dst.write(d);
        sums[l] += d;
    }
    sums.iter().map(|&s| f64::from(s)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "the output and its gradient")]
    fn a_gradient_of_another_shape_is_refused() {
        let tensor = |shape: [usize; 4]| {
            let values = vec![1.0f32; shape.iter().product()];
            FlexTensor::from_data(TensorData::new(values, shape))
        };
        backward(&tensor([2, 3, 4, 4]), tensor([2, 3, 4, 2]));
    }
}
