//! [`assert_cross_entropy_matches_burns`]: `towers_kernels::softmax_cross_entropy`, value and
//! gradient, against Burn's `CrossEntropyLoss` and Burn's autodiff of it, on one device.

use burn::nn::loss::CrossEntropyLossConfig;
use burn::tensor::{Device, Int, Tensor, TensorData};
use towers_kernels::softmax_cross_entropy;

use crate::compare::{assert_close, rel_diff};

/// `(loss, d(3·loss)/d logits)` of `loss_of`: the factor checks that the loss's own gradient
/// enters the backward pass.
fn loss_and_gradient(
    logits: &Tensor<2>,
    loss_of: impl Fn(Tensor<2>) -> Tensor<1>,
) -> (f32, Tensor<2>) {
    let logits = logits.clone().require_grad();
    let loss = loss_of(logits.clone());
    let grads = (loss.clone() * 3.0).backward();
    let gradient = logits.grad(&grads).expect("the logits' gradient");
    (loss.into_scalar::<f32>(), gradient)
}

/// Asserts that the loss and its gradient equal Burn's to float rounding on `device` (with
/// autodiff), for one-hot and smoothed targets, logits of up to ±40 (where an unshifted
/// softmax overflows) and a batch of one.
pub fn assert_cross_entropy_matches_burns(device: &Device) {
    for (batch, classes, smoothing) in [(16, 10, 0.0), (7, 1001, 0.1), (1, 3, 1.0), (5, 4, 0.0)] {
        let spread: Vec<f32> = (0..batch * classes)
            .map(|i| ((i * 7919) % 1000) as f32 / 12.5 - 40.0)
            .collect();
        let logits = Tensor::<2>::from_data(TensorData::new(spread, [batch, classes]), device);
        let labels: Vec<i64> = (0..batch).map(|i| ((i * 7 + 3) % classes) as i64).collect();
        let labels = Tensor::<1, Int>::from_data(TensorData::new(labels, [batch]), device);
        let what = format!("batch {batch}, {classes} classes, smoothing {smoothing}");

        let (ours_loss, ours_gradient) = loss_and_gradient(&logits, |x| {
            softmax_cross_entropy(x, labels.clone(), smoothing)
        });
        let (burns_loss, burns_gradient) = loss_and_gradient(&logits, |x| {
            let smoothed = (smoothing > 0.0).then_some(smoothing);
            let loss = CrossEntropyLossConfig::new().with_smoothing(smoothed);
            loss.init(device).forward(x, labels.clone())
        });
        assert_close(&[ours_loss], &[burns_loss], 1e-6, &format!("{what}: loss"));
        let gradient_diff = rel_diff(ours_gradient, burns_gradient);
        assert!(
            gradient_diff <= 1e-5,
            "{what}: gradients {gradient_diff} apart (relative to their largest)"
        );
        // Logits that require no gradient: the extension's untracked path.
        let untracked = softmax_cross_entropy(logits, labels, smoothing).into_scalar::<f32>();
        assert_close(
            &[untracked],
            &[burns_loss],
            1e-6,
            &format!("{what}: untracked loss"),
        );
    }
}
