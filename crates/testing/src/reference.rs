//! The independent computations towers are checked against: plain single-device Burn steps on
//! flex, and fresh `BatchNorm` layers for running statistics.

use burn::module::{Module, RunningState};
use burn::nn::{BatchNorm, BatchNormConfig};
use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor, TensorData};
use towers_data::HostBatch;

use crate::nets::{BnNet, LR, Net, sgd};

/// The flex device with autodiff, where references run.
pub fn flex() -> Device {
    Device::flex().autodiff()
}

/// Plain Burn steps on flex, one per batch. Returns the model and each step's loss and
/// correct count.
pub fn plain_training(model: Net, batches: &[HostBatch]) -> (Net, Vec<(f64, usize)>) {
    plain_training_penalized(model, batches, |_| None)
}

/// [`plain_training`] with `penalty` of the model (differentiable) added to each step's loss.
pub fn plain_training_penalized(
    model: Net,
    batches: &[HostBatch],
    penalty: impl Fn(&Net) -> Option<Tensor<1>>,
) -> (Net, Vec<(f64, usize)>) {
    let device = flex();
    let mut model = model.fork(&device);
    let mut optim = sgd();
    let mut outputs = Vec::new();
    for b in batches {
        let (x, y) = b.as_slice().to_tensors(&device);
        let out = model.loss(x, y);
        let (loss, (logits, _)) = (out.loss, out.predictions.expect("the net gives logits"));
        let loss = match penalty(&model) {
            Some(penalty) => loss + penalty,
            None => loss,
        };
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        let loss: f32 = loss.into_scalar();
        let predicted: Vec<i64> = logits.argmax(1).into_data().iter::<i64>().collect();
        let correct = predicted
            .iter()
            .zip(b.labels())
            .filter(|(p, l)| p == l)
            .count();
        outputs.push((loss as f64, correct));
        model = optim.step(LR, model, grads);
    }
    (model, outputs)
}

/// Running mean and variance one fresh `BatchNorm` (starting from `start`) holds after each
/// slice, averaged with the slices' sizes as weights.
pub fn expected_stats(start: &(Vec<f32>, Vec<f32>), slices: &[HostBatch]) -> (Vec<f32>, Vec<f32>) {
    let device = flex();
    let total: usize = slices.iter().map(HostBatch::len).sum();
    let mut mean = vec![0.0; 3];
    let mut var = vec![0.0; 3];
    for slice in slices {
        let mut bn: BatchNorm = BatchNormConfig::new(3).init(&device);
        let tensor = |v: &Vec<f32>| Tensor::from_data(TensorData::new(v.clone(), [3]), &device);
        bn.running_mean = RunningState::new(tensor(&start.0));
        bn.running_var = RunningState::new(tensor(&start.1));
        let (x, _) = slice.as_slice().to_tensors(&device);
        let _ = bn.forward(x);
        let w = slice.len() as f32 / total as f32;
        let m = bn.running_mean.value_sync().into_data();
        let v = bn.running_var.value_sync().into_data();
        for (acc, s) in mean.iter_mut().zip(m.iter::<f32>()) {
            *acc += w * s;
        }
        for (acc, s) in var.iter_mut().zip(v.iter::<f32>()) {
            *acc += w * s;
        }
    }
    (mean, var)
}

/// The running mean and variance of a [`BnNet`].
pub fn stats_of(model: &BnNet) -> (Vec<f32>, Vec<f32>) {
    let read = |s: &RunningState<Tensor<1>>| s.value().into_data().iter::<f32>().collect();
    (read(&model.bn.running_mean), read(&model.bn.running_var))
}
