//! The drop-in `nn::Dropout` on flex: each value zeroed or scaled by `1 / (1 - prob)`, the
//! share zeroed `prob` (a count), the gradient through the same mask, the same masks again
//! after `Device::seed`, and Burn's identity where nothing drops (evaluation, no autodiff, a
//! probability of 0). The transformer's drop-in layers use it (`transformer.rs` compares them
//! with Burn's without dropout).

use burn::module::Module;
use burn::tensor::{Device, Tensor};
use towers_kernels::nn::DropoutConfig;
use towers_testing::nets::pattern;

use crate::drop_in::device;

/// `[8, 128, 130]` of values in `[1, 2]`, none zero, so that a zero in the output is a drop.
fn nonzero_input(device: &Device) -> Tensor<3> {
    pattern([8, 128, 130], 3, device).abs() * 5.0 + 1.0
}

/// Values of a tensor.
fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().iter::<f32>().collect()
}

#[test]
fn dropout_zeroes_its_share_and_scales_the_rest_and_its_gradient_follows() {
    let device = device();
    let x = nonzero_input(&device);
    let n = x.shape().num_elements();
    for prob in [0.1, 0.5, 0.8] {
        let layer = DropoutConfig::new(prob).init();
        let x = x.clone().require_grad();
        let y = layer.forward(x.clone());
        let g = pattern(y.dims(), 7, &device) + 1.0;
        let dx = values(x.grad(&(y.clone() * g.clone()).sum().backward()).unwrap());
        let scale = (1.0 / (1.0 - prob)) as f32;
        let (x, y, g) = (values(x), values(y), values(g));
        let dropped = y.iter().filter(|&&v| v == 0.0).count() as f64;
        let sd = (n as f64 * prob * (1.0 - prob)).sqrt();
        let want = n as f64 * prob;
        assert!(
            (dropped - want).abs() < 5.0 * sd,
            "{prob}: {dropped} of {n} dropped"
        );
        for i in 0..n {
            let kept = y[i] != 0.0;
            let (want_y, want_dx) = match kept {
                true => (x[i] * scale, g[i] * scale),
                false => (0.0, 0.0),
            };
            assert_eq!((y[i], dx[i]), (want_y, want_dx), "{prob}: value {i}");
        }
    }
}

/// In a process of its own: the device's generator is the backend's, and the other tests of
/// this binary draw from it at once (initializing layers), between this test's draws.
#[test]
fn seeding_the_device_repeats_the_masks_and_calls_differ() {
    if towers_testing::child::role().is_none() {
        let name =
            towers_testing::test_name!("seeding_the_device_repeats_the_masks_and_calls_differ");
        let child = towers_testing::child::child(&name, "alone", &[], "")
            .output()
            .unwrap();
        let output = String::from_utf8_lossy(&child.stderr);
        assert!(
            child.status.success(),
            "the child process failed:\n{output}"
        );
        assert!(
            String::from_utf8_lossy(&child.stdout).contains("1 passed"),
            "no test ran"
        );
        return;
    }
    let device = device();
    let layer = DropoutConfig::new(0.5).init();
    let x = nonzero_input(&device);
    let draw = |seed| {
        device.seed(seed);
        [(); 2].map(|_| values(layer.forward(x.clone())))
    };
    let [first, second] = draw(5);
    assert_ne!(first, second, "two calls, one mask");
    assert_eq!(draw(5), [first.clone(), second], "seed 5 again");
    assert_ne!(draw(6)[0], first, "seed 6 as seed 5");
}

#[test]
fn dropout_that_drops_nothing_is_the_identity() {
    let device = device();
    let x = nonzero_input(&device);
    let want = values(x.clone());
    let training = DropoutConfig::new(0.5).init();
    let cases = [
        ("evaluation", training.valid().forward(x.clone())),
        (
            "no autodiff",
            training.forward(nonzero_input(&Device::flex())),
        ),
        ("probability 0", DropoutConfig::new(0.0).init().forward(x)),
    ];
    for (what, y) in cases {
        assert_eq!(values(y), want, "{what}");
    }
}
