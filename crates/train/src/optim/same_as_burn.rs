//! Tests' checks that a fused optimizer is Burn's: the same weights to the bit, step after step,
//! and each one's saved state loaded into the other.

use burn::nn::{Linear, LinearConfig};
use burn::optim::{GradientsParams, ModuleOptimizer, Optimizer};
use burn::tensor::{Device, Tensor, TensorData};

/// The bits of `t`'s values.
fn bits<const D: usize>(t: &Tensor<D>) -> Vec<u32> {
    let values: Vec<f32> = t.to_data().try_to_vec().unwrap();
    values.iter().map(|v| v.to_bits()).collect()
}

/// One step at learning rate 1e-3 on a fixed input whose gradient depends on `scale`.
fn step(model: Linear, optim: &mut ModuleOptimizer, scale: f32) -> Linear {
    let device = model.weight.val().device();
    let x = Tensor::<2>::from_data(
        TensorData::new(
            (0..96).map(|i| (i % 7) as f32 * scale - 1.0).collect(),
            [4, 24],
        ),
        &device,
    );
    let loss = model.forward(x).powi_scalar(2).mean();
    let grads = GradientsParams::from_grads(loss.backward(), &model);
    optim.step(1e-3, model, grads)
}

/// Three steps of a layer on flex by `ours` equal those by `burn` to the bit, and each carries
/// on from the other's saved state as from its own.
pub(super) fn steps_and_state(
    burn: impl Fn() -> ModuleOptimizer,
    ours: impl Fn() -> ModuleOptimizer,
) {
    let device = Device::flex().autodiff();
    let weights = |model: &Linear| bits(&model.weight.val());
    let model = LinearConfig::new(24, 40).init(&device);
    let (mut a, mut b) = (model.clone(), model);
    let (mut optim_a, mut optim_b) = (burn(), ours());
    for scale in [1.0, -0.5, 0.25] {
        a = step(a, &mut optim_a, scale);
        b = step(b, &mut optim_b, scale);
        assert_eq!(weights(&a), weights(&b), "scale {scale}");
    }
    let mut ours_from_burn = ours().load_record(optim_a.to_record());
    let mut burn_from_ours = burn().load_record(optim_b.to_record());
    let next = weights(&step(a.clone(), &mut optim_a, 0.5));
    assert_eq!(
        weights(&step(a, &mut ours_from_burn, 0.5)),
        next,
        "ours from Burn's state"
    );
    assert_eq!(
        weights(&step(b, &mut burn_from_ours, 0.5)),
        next,
        "Burn's from our state"
    );
}

/// Where the update does not fuse (here tensors with autodiff, as another backend's are not
/// flex), `ours` steps as `burn` does from the same state: the same values, step after step.
pub(super) fn elsewhere<A: Optimizer, B: Optimizer>(ours: &A, burn: &B) {
    let device = Device::flex().autodiff();
    let t = |v: [f32; 3]| Tensor::<1>::from_data(TensorData::new(v.to_vec(), [3]), &device);
    let (mut a, mut b) = (t([0.5, -1.0, 2.0]), t([0.5, -1.0, 2.0]));
    let (mut state_a, mut state_b) = (None, None);
    for k in 0..3 {
        let grad = t([k as f32 - 1.0, 0.3, -0.7]);
        (a, state_a) = ours.step(1e-3, a, grad.clone(), state_a);
        (b, state_b) = burn.step(1e-3, b, grad, state_b);
        assert_eq!(bits(&a), bits(&b), "step {k}");
    }
}
