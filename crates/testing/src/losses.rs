//! [`assert_cross_entropy_matches_burns`]: `towers_kernels::softmax_cross_entropy`, value and
//! gradient, against Burn's `CrossEntropyLoss` and Burn's autodiff of it, on one device.

use burn::nn::loss::CrossEntropyLossConfig;
use burn::tensor::{Device, Int, Tensor, TensorData};
use towers_kernels::softmax_cross_entropy;

use crate::compare::max_abs_diff;

/// `(loss, d(3·loss)/d logits)` of `loss_of`: the factor checks that the loss's own gradient
/// enters the backward pass.
fn loss_and_gradient(
    logits: &Tensor<2>,
    loss_of: impl Fn(Tensor<2>) -> Tensor<1>,
) -> (Vec<f32>, Vec<f32>) {
    let logits = logits.clone().require_grad();
    let loss = loss_of(logits.clone());
    let grads = (loss.clone() * 3.0).backward();
    let gradient = logits.grad(&grads).expect("the logits' gradient");
    let values = |t: TensorData| t.convert::<f32>().try_to_vec::<f32>().unwrap();
    (values(loss.into_data()), values(gradient.into_data()))
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

        let ours = loss_and_gradient(&logits, |x| {
            softmax_cross_entropy(x, labels.clone(), smoothing)
        });
        let burns = loss_and_gradient(&logits, |x| {
            let smoothed = (smoothing > 0.0).then_some(smoothing);
            let loss = CrossEntropyLossConfig::new().with_smoothing(smoothed);
            loss.init(device).forward(x, labels.clone())
        });
        let value_diff = (ours.0[0] - burns.0[0]).abs() / burns.0[0].abs().max(1.0);
        assert!(
            value_diff <= 1e-6,
            "{what}: loss {:?}, Burn's {:?}",
            ours.0,
            burns.0
        );
        let scale = burns.1.iter().fold(0f32, |m, g| m.max(g.abs()));
        let gradient_diff = max_abs_diff(&ours.1, &burns.1) / scale;
        assert!(
            gradient_diff <= 1e-5,
            "{what}: gradients {gradient_diff} apart (relative to their largest, {scale})"
        );
        // Logits that require no gradient: the extension's untracked path.
        let untracked = softmax_cross_entropy(logits, labels, smoothing).into_scalar::<f32>();
        let untracked_diff = (untracked - burns.0[0]).abs() / burns.0[0].abs().max(1.0);
        assert!(untracked_diff <= 1e-6, "{what}: untracked loss {untracked}");
    }
}
