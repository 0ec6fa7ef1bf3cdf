//! `ImageClassifier::loss_decay_in_update` against `loss`, for every bundled net: the same
//! value, and a gradient that is `loss`'s less `decay · W` for each of `weight_decays`.

use std::collections::HashMap;

use burn::module::{ModuleVisitor, Param, ParamId};
use burn::optim::GradientsParams;
use burn::tensor::{Device, Distribution, Int, Tensor, TensorData};
use towers_models::{Cifar10Config, ImageClassifier, InceptionV3Config, ResNet18, ResNetConfig};
use towers_testing::compare::max_abs_diff;

/// `model`'s two losses on one random batch of 2, checked against each other; its decays large
/// enough that a gradient with or without one more `decay · W` shows.
fn assert_decay_left_to_the_update<M: ImageClassifier>(model: M, decayed_tensors: usize) {
    let device = model.devices()[0].clone();
    let [c, h, w] = model.input_shape();
    let images = Tensor::<4>::random([2, c, h, w], Distribution::Uniform(-1.0, 1.0), &device);
    let labels = Tensor::<1, Int>::from_data(TensorData::new(vec![1i64, 3], [2]), &device);
    let decays: HashMap<ParamId, f64> = model.weight_decays_by_id().into_iter().collect();
    assert_eq!(decays.len(), decayed_tensors);

    // No dropout in the nets as configured here: both losses see the same network.
    let loss = model.loss(images.clone(), labels.clone()).loss;
    let apart = model.loss_decay_in_update(images, labels).loss;
    let (loss_value, apart_value) = (host(loss.clone())[0], host(apart.clone())[0]);
    assert!(
        (loss_value - apart_value).abs() <= 1e-6 * loss_value.abs(),
        "{apart_value} vs {loss_value}"
    );
    let mut compare = Compare {
        full: GradientsParams::from_grads(loss.backward(), &model),
        apart: GradientsParams::from_grads(apart.backward(), &model),
        decays,
        decayed_checked: 0,
    };
    model.visit(&mut compare);
    assert_eq!(
        compare.decayed_checked, decayed_tensors,
        "every decayed tensor compared"
    );
}

fn host<const D: usize>(tensor: Tensor<D>) -> Vec<f32> {
    tensor.into_data().convert::<f32>().try_to_vec().unwrap()
}

/// Each tensor's gradient from `loss` against the one from `loss_decay_in_update` plus
/// `decay · W`.
struct Compare {
    full: GradientsParams,
    apart: GradientsParams,
    decays: HashMap<ParamId, f64>,
    /// The decayed tensors compared so far.
    decayed_checked: usize,
}

impl ModuleVisitor for Compare {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let Some(full) = self.full.get::<D>(param.id) else {
            return;
        };
        let apart = self
            .apart
            .get::<D>(param.id)
            .expect("the same tensors trained");
        let decay = self.decays.get(&param.id).copied().unwrap_or(0.0);
        let with_decay = apart + param.val().inner().mul_scalar(decay);
        let (want, got) = (host(full), host(with_decay));
        let scale = want.iter().fold(1e-3f32, |m, v| m.max(v.abs()));
        let diff = max_abs_diff(&got, &want);
        assert!(
            diff <= 1e-5 * scale,
            "a gradient off by {diff} (largest {scale})"
        );
        self.decayed_checked += usize::from(decay != 0.0);
    }
}

#[test]
fn cifar10_leaves_its_decay_to_the_update() {
    let device = Device::flex().autodiff();
    let config = Cifar10Config::new().with_weight_decay(0.5);
    assert_decay_left_to_the_update(config.init(&device), 2);
}

#[test]
fn inception_v3_leaves_its_decay_to_the_update() {
    let device = Device::flex().autodiff();
    let config = InceptionV3Config::new(5)
        .with_image_size(107)
        .with_dropout_keep_prob(1.0)
        .with_weight_decay(0.1);
    // Every convolution's weight (94 and the auxiliary head's 2) and the two classifiers'.
    assert_decay_left_to_the_update(config.init(&device), 98);
}

#[test]
fn resnet18_leaves_its_decay_to_the_update() {
    let device = Device::flex().autodiff();
    let config = ResNetConfig::resnet18(5)
        .with_image_size(32)
        .with_weight_decay(1e-2);
    // Every weight, bias and batch-norm scale and offset.
    let model: ResNet18 = config.init(&device);
    assert_decay_left_to_the_update(model, 62);
}
