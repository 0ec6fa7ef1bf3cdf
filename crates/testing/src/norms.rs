//! [`assert_offset_batch_norm_matches_burns`]: `towers_kernels::offset_batch_norm`, output,
//! statistics and gradients, against Burn's `batch_norm_train` with a scale of ones and Burn's
//! autodiff of it, on one device.

use burn::tensor::module::batch_norm_train;
use burn::tensor::{Device, Distribution, Tensor};
use towers_kernels::offset_batch_norm;

use crate::compare::rel_diff;

/// Asserts that [`offset_batch_norm`] takes `device` (a CubeCL one) and equals Burn's batch
/// norm there to float rounding: the output, the batch's mean and variance, and the gradients
/// of the input and the offset under a loss that weighs each output differently (a plain sum
/// would give the input a zero gradient); for channels far from zero (where a variance taken as
/// `E[x²] - E[x]²` would cancel), few values per channel, an input with NHWC strides (as a
/// convolution leaves it), and an input that requires no gradient.
pub fn assert_offset_batch_norm_matches_burns(device: &Device) {
    let cases = [
        ([4, 6, 5, 7], 0.0, false),
        ([3, 32, 17, 17], 0.0, true),
        ([2, 8, 9, 9], 100.0, false),
        ([5, 3, 2, 1], 0.0, true),
    ];
    for ([n, c, h, w], offset, channels_last) in cases {
        let what = format!("{n}x{c}x{h}x{w}, offset {offset}, NHWC strides {channels_last}");
        let x = if channels_last {
            Tensor::<4>::random([n, h, w, c], Distribution::Uniform(-2.0, 3.0), device)
                .permute([0, 3, 1, 2])
        } else {
            Tensor::<4>::random([n, c, h, w], Distribution::Uniform(-2.0, 3.0), device)
        }
        .add_scalar(offset);
        let beta = Tensor::<1>::random([c], Distribution::Default, device);
        let weights = Tensor::<4>::random([n, c, h, w], Distribution::Default, device);
        let (x, beta) = (x.require_grad(), beta.require_grad());

        let (ours, [mean, variance]) =
            offset_batch_norm(&x, &beta, 1e-3).expect("offset_batch_norm routes this device");
        let burns = batch_norm_train(x.clone(), Tensor::ones([c], device), beta.clone(), 1e-3);
        let close = |got: Tensor<1>, want: Tensor<1>, of: &str| {
            let diff = rel_diff(got, want);
            assert!(diff <= 1e-5, "{what}: {of} {diff} apart");
        };
        close(mean, burns.mean, "mean");
        close(variance, burns.variance, "variance");
        let output_diff = rel_diff(ours.clone(), burns.output.clone());
        assert!(output_diff <= 1e-5, "{what}: outputs {output_diff} apart");

        let gradients = |y: Tensor<4>| {
            let grads = (y * weights.clone()).sum().backward();
            let of = |t: Option<Tensor<4>>| t.expect("a gradient");
            (
                of(x.grad(&grads)),
                beta.grad(&grads).expect("beta's gradient"),
            )
        };
        let (ours_dx, ours_dbeta) = gradients(ours);
        let (burns_dx, burns_dbeta) = gradients(burns.output.clone());
        let dx_diff = rel_diff(ours_dx, burns_dx);
        // Few values per channel (10 in the last case) make the input gradient a difference of
        // nearly equal terms: f32 rounding shows at ~1e-5 there.
        assert!(dx_diff <= 1e-4, "{what}: input gradients {dx_diff} apart");
        close(ours_dbeta, burns_dbeta, "offset gradient");

        let untracked = x.clone().detach();
        let (plain, _) = offset_batch_norm(&untracked, &beta.clone().detach(), 1e-3)
            .expect("offset_batch_norm routes this device");
        let plain_diff = rel_diff(plain, burns.output.detach());
        assert!(
            plain_diff <= 1e-5,
            "{what}: untracked outputs {plain_diff} apart"
        );
    }
}
