//! Inception v3 in TF-slim's layout (`nets/inception_v3.py`, and the
//! `inception/slim/inception_model.py` that TF's multi-GPU trainer uses).

mod aux_head;
mod inception_a;
mod inception_b;
mod inception_c;
mod inception_d;
mod inception_e;

pub use aux_head::{AuxHead, AuxHeadConfig};
pub use inception_a::{InceptionA, InceptionAConfig};
pub use inception_b::{InceptionB, InceptionBConfig};
pub use inception_c::{InceptionC, InceptionCConfig};
pub use inception_d::{InceptionD, InceptionDConfig};
pub use inception_e::{InceptionE, InceptionEConfig};

use crate::layers::{BasicConv, BasicConvConfig, truncated_normal};
use crate::nets::{ClassifierLoss, ImageClassifier};
use crate::parameter_table::model_rows;
use crate::parameter_table::parameter_table;
use crate::params::{WeightDecay, count_params, weight_decays};
use crate::penalty::l2_penalty;
use burn::config::Config;
use burn::module::Module;
use burn::nn::pool::{AvgPool2d, AvgPool2dConfig, MaxPool2d, MaxPool2dConfig};
use burn::nn::{Dropout, DropoutConfig, Initializer, Linear, LinearConfig, PaddingConfig2d};
use burn::tensor::{Device, Int, Tensor};
use towers_kernels::{conv2d, softmax_cross_entropy};

/// Configuration of [`InceptionV3`]; the defaults are TF's multi-GPU Inception trainer's.
#[derive(Config, Debug)]
pub struct InceptionV3Config {
    /// Number of classes: 1001 for TF's ImageNet layout (class 0 is background), 1000 for
    /// Keras', or a small number for fine-tuning.
    pub num_classes: usize,
    /// Side of the square input. The auxiliary head's last convolution is sized for it.
    #[config(default = 299)]
    pub image_size: usize,
    /// Whether to build the auxiliary head on Mixed_6e (needs `image_size >= 107`).
    #[config(default = true)]
    pub aux_logits: bool,
    /// Weight of the auxiliary cross-entropy in the loss.
    #[config(default = 0.4)]
    pub aux_weight: f64,
    /// Label smoothing of both cross-entropies: targets `(1 - s) * one_hot + s / num_classes`.
    #[config(default = 0.1)]
    pub label_smoothing: f32,
    /// Probability of keeping a pooled feature before the logits.
    #[config(default = 0.8)]
    pub dropout_keep_prob: f64,
    /// L2 decay of every convolution and fully-connected weight (not biases, not beta).
    #[config(default = 0.00004)]
    pub weight_decay: f64,
    /// Decay of the batch-norm moving statistics (TF-slim's `batch_norm_decay`). TF's 0.9997
    /// suits long runs; a run of a few hundred steps needs a smaller one (0.9, say) for its
    /// moving statistics to reach the data's before evaluation.
    #[config(default = 0.9997)]
    pub batch_norm_decay: f64,
    /// Whether the 3x3 average pools of the Mixed blocks count the zero padding at the
    /// borders: true for torchvision's weights (its port keeps PyTorch's `count_include_pad`),
    /// false for TF's, which average real pixels only.
    #[config(default = false)]
    pub pool_counts_padding: bool,
}

/// Inception v3 (Szegedy et al., "Rethinking the Inception Architecture"), TF-slim's layout
/// and names: a stem of convolutions and pools, Mixed_5b..Mixed_7c, global average pool,
/// dropout, logits, and an optional auxiliary head on Mixed_6e.
///
/// Every convolution is a [`BasicConv`] (no bias, offset-only batch norm with epsilon 0.001
/// and decay 0.9997, ReLU) with truncated-normal weights of stddev 0.1. The logits layer is a
/// [`Linear`] (`[2048, num_classes]`, stddev 0.001, bias 0), slim's 1x1 convolution on a 1x1
/// map. The final pool averages the whole map (slim's 8x8 VALID pool at 299x299).
#[derive(Module, Debug)]
pub struct InceptionV3 {
    /// 3x3/2 VALID, 32: 149x149 at 299.
    pub conv2d_1a_3x3: BasicConv,
    /// 3x3 VALID, 32: 147x147.
    pub conv2d_2a_3x3: BasicConv,
    /// 3x3 SAME, 64: 147x147.
    pub conv2d_2b_3x3: BasicConv,
    /// Max pool 3x3/2 VALID: 73x73.
    pub maxpool_3a_3x3: MaxPool2d,
    /// 1x1 VALID, 80: 73x73.
    pub conv2d_3b_1x1: BasicConv,
    /// 3x3 VALID, 192: 71x71.
    pub conv2d_4a_3x3: BasicConv,
    /// Max pool 3x3/2 VALID: 35x35.
    pub maxpool_5a_3x3: MaxPool2d,
    /// 35x35x256.
    pub mixed_5b: InceptionA,
    /// 35x35x288.
    pub mixed_5c: InceptionA,
    /// 35x35x288.
    pub mixed_5d: InceptionA,
    /// 17x17x768.
    pub mixed_6a: InceptionB,
    /// 17x17x768, 7x7 width 128.
    pub mixed_6b: InceptionC,
    /// 17x17x768, 7x7 width 160.
    pub mixed_6c: InceptionC,
    /// 17x17x768, 7x7 width 160.
    pub mixed_6d: InceptionC,
    /// 17x17x768, 7x7 width 192.
    pub mixed_6e: InceptionC,
    /// 8x8x1280.
    pub mixed_7a: InceptionD,
    /// 8x8x2048.
    pub mixed_7b: InceptionE,
    /// 8x8x2048.
    pub mixed_7c: InceptionE,
    /// The auxiliary classifier, if configured.
    pub aux_logits: Option<AuxHead>,
    /// Dropout_1b.
    pub dropout: Dropout,
    /// Conv2d_1c_1x1: the logits.
    pub logits: Linear,
    num_classes: usize,
    image_size: usize,
    aux_weight: f64,
    label_smoothing: f32,
    weight_decay: f64,
}

impl InceptionV3Config {
    /// Builds the network (weights drawn lazily, on first use).
    pub fn init(&self, device: &Device) -> InceptionV3 {
        assert!(
            self.image_size >= 75,
            "Inception v3 needs inputs of at least 75x75"
        );
        let mixed_6e_size = stem_and_reductions(self.image_size);
        assert!(
            !self.aux_logits || mixed_6e_size >= 5,
            "the auxiliary head needs inputs of at least 107x107; set aux_logits = false"
        );
        assert!(
            self.num_classes > 0 && (0.0..=1.0).contains(&self.label_smoothing),
            "num_classes must be positive and label_smoothing within [0, 1]"
        );
        let scope = ArgScope::new(self.batch_norm_decay, device);
        let stem = |c_in, c_out, k, stride, padding| {
            scope
                .config(c_in, c_out, [k, k])
                .with_stride([stride, stride])
                .with_padding(padding)
                .init(device)
        };
        let (valid, same) = (PaddingConfig2d::Valid, PaddingConfig2d::Same);
        let decay = self.batch_norm_decay;
        let counted = self.pool_counts_padding;
        let a = |c_in, pool| {
            InceptionAConfig::new(c_in, pool)
                .with_batch_norm_decay(decay)
                .with_pool_counts_padding(counted)
        };
        let mixed_5b = a(192, 32);
        let mixed_5c = a(mixed_5b.out_channels(), 64);
        let mixed_5d = a(mixed_5c.out_channels(), 64);
        let mixed_6a = InceptionBConfig::new(mixed_5d.out_channels()).with_batch_norm_decay(decay);
        let c = |c7| {
            InceptionCConfig::new(mixed_6a.out_channels(), c7)
                .with_batch_norm_decay(decay)
                .with_pool_counts_padding(counted)
        };
        let (mixed_6b, mixed_6c, mixed_6d, mixed_6e) = (c(128), c(160), c(160), c(192));
        let mixed_7a = InceptionDConfig::new(mixed_6e.out_channels()).with_batch_norm_decay(decay);
        let e = |c_in| {
            InceptionEConfig::new(c_in)
                .with_batch_norm_decay(decay)
                .with_pool_counts_padding(counted)
        };
        let mixed_7b = e(mixed_7a.out_channels());
        let mixed_7c = e(mixed_7b.out_channels());
        let head_in = mixed_7c.out_channels();
        let mut logits = LinearConfig::new(head_in, self.num_classes).init(device);
        logits.weight = truncated_normal([head_in, self.num_classes], 0.001, device);
        logits.bias = Some(Initializer::Zeros.init([self.num_classes], device));
        InceptionV3 {
            conv2d_1a_3x3: stem(3, 32, 3, 2, valid.clone()),
            conv2d_2a_3x3: stem(32, 32, 3, 1, valid.clone()),
            conv2d_2b_3x3: stem(32, 64, 3, 1, same),
            maxpool_3a_3x3: max_pool_3x3_s2(),
            conv2d_3b_1x1: stem(64, 80, 1, 1, valid.clone()),
            conv2d_4a_3x3: stem(80, 192, 3, 1, valid),
            maxpool_5a_3x3: max_pool_3x3_s2(),
            mixed_5b: mixed_5b.init(device),
            mixed_5c: mixed_5c.init(device),
            mixed_5d: mixed_5d.init(device),
            mixed_6a: mixed_6a.init(device),
            mixed_6b: mixed_6b.init(device),
            mixed_6c: mixed_6c.init(device),
            mixed_6d: mixed_6d.init(device),
            mixed_6e: mixed_6e.init(device),
            mixed_7a: mixed_7a.init(device),
            mixed_7b: mixed_7b.init(device),
            mixed_7c: mixed_7c.init(device),
            aux_logits: self.aux_logits.then(|| {
                AuxHeadConfig::new(mixed_6e.out_channels(), self.num_classes)
                    .with_pooled_size((mixed_6e_size - 5) / 3 + 1)
                    .with_batch_norm_decay(decay)
                    .init(device)
            }),
            dropout: DropoutConfig::new(1.0 - self.dropout_keep_prob).init(),
            logits,
            num_classes: self.num_classes,
            image_size: self.image_size,
            aux_weight: self.aux_weight,
            label_smoothing: self.label_smoothing,
            weight_decay: self.weight_decay,
        }
    }
}

/// Side of Mixed_6e's map for a square input of side `n` (17 at 299).
fn stem_and_reductions(n: usize) -> usize {
    let valid = |n: usize, k: usize, s: usize| (n - k) / s + 1;
    let n = valid(valid(n, 3, 2), 3, 1); // Conv2d_1a, Conv2d_2a (2b is SAME)
    let n = valid(valid(n, 3, 2), 3, 1); // MaxPool_3a, Conv2d_4a (3b is 1x1)
    let n = valid(n, 3, 2); // MaxPool_5a
    valid(n, 3, 2) // Mixed_6a
}

impl InceptionV3 {
    /// Main logits and, when `with_aux` and the head exists, auxiliary logits; reports each
    /// named endpoint's shape to `tap`.
    fn run(
        &self,
        images: Tensor<4>,
        with_aux: bool,
        tap: &mut dyn FnMut(&'static str, &[usize]),
    ) -> (Tensor<2>, Option<Tensor<2>>) {
        let mut step = |name, x: Tensor<4>| {
            tap(name, &x.dims());
            x
        };
        // Outputs that only the next convolution reads go to it as it reads them best
        // (`forward_into`: in bf16, rounded already where it takes that).
        let (conv_1a, conv_2a) = (&self.conv2d_1a_3x3, &self.conv2d_2a_3x3);
        let x = step(
            "Conv2d_1a_3x3",
            conv_1a.forward_images_into(images, conv_2a),
        );
        let x = step(
            "Conv2d_2a_3x3",
            conv_2a.forward_into(x, &self.conv2d_2b_3x3),
        );
        // The stem's two max pools take the batch norm and ReLU of the convolution before them
        // into their pass (`forward_relu_max_pool`): those endpoints' shapes are the
        // convolutions' outputs'.
        let (conv_2b, conv_4a) = (&self.conv2d_2b_3x3, &self.conv2d_4a_3x3);
        let x = step("Conv2d_2b_3x3", conv2d(&conv_2b.conv, x));
        let x = step(
            "MaxPool_3a_3x3",
            conv_2b.bn.forward_relu_max_pool(&self.maxpool_3a_3x3, x),
        );
        let x = step("Conv2d_3b_1x1", self.conv2d_3b_1x1.forward_into(x, conv_4a));
        let x = step("Conv2d_4a_3x3", conv2d(&conv_4a.conv, x));
        let x = step(
            "MaxPool_5a_3x3",
            conv_4a.bn.forward_relu_max_pool(&self.maxpool_5a_3x3, x),
        );
        let x = step("Mixed_5b", self.mixed_5b.forward(x));
        let x = step("Mixed_5c", self.mixed_5c.forward(x));
        let x = step("Mixed_5d", self.mixed_5d.forward(x));
        let x = step("Mixed_6a", self.mixed_6a.forward(x));
        let x = step("Mixed_6b", self.mixed_6b.forward(x));
        let x = step("Mixed_6c", self.mixed_6c.forward(x));
        let x = step("Mixed_6d", self.mixed_6d.forward(x));
        let mixed_6e = step("Mixed_6e", self.mixed_6e.forward(x));
        let aux = match (&self.aux_logits, with_aux) {
            (Some(head), true) => Some(head.forward(mixed_6e.clone())),
            _ => None,
        };
        let x = step("Mixed_7a", self.mixed_7a.forward(mixed_6e));
        let x = step("Mixed_7b", self.mixed_7b.forward(x));
        let x = step("Mixed_7c", self.mixed_7c.forward(x));
        let pooled = x.mean_dim(3).mean_dim(2).flatten::<2>(1, 3);
        let logits =
            towers_kernels::linear(&self.logits, crate::layers::dropout(&self.dropout, pooled));
        if let Some(aux) = &aux {
            tap("AuxLogits", &aux.dims());
        }
        tap("Logits", &logits.dims());
        (logits, aux)
    }

    /// Main and auxiliary logits (`None` without the head). On an autodiff device in training
    /// state, dropout is active and batch norm uses and updates batch statistics.
    pub fn forward_with_aux(&self, images: Tensor<4>) -> (Tensor<2>, Option<Tensor<2>>) {
        self.run(images, true, &mut |_, _| {})
    }

    /// Every named endpoint, Conv2d_1a_3x3 .. Mixed_7c, AuxLogits, Logits, with its shape
    /// (NCHW for maps) for `images`.
    pub fn endpoints(&self, images: Tensor<4>) -> Vec<(&'static str, Vec<usize>)> {
        let mut shapes = Vec::new();
        self.run(images, true, &mut |name, dims| {
            shapes.push((name, dims.to_vec()))
        });
        shapes
    }

    /// The decayed parameters: every convolution and fully-connected weight.
    pub fn weight_decay_terms(&self) -> Vec<WeightDecay> {
        weight_decays(self, |path| self.decay_of(path))
    }

    /// `sum of decay * sum(W^2) / 2` over [`Self::weight_decay_terms`], shape `[1]`; `None`
    /// when the decay is 0. Part of [`ImageClassifier::loss`].
    pub fn regularization(&self) -> Option<Tensor<1>> {
        l2_penalty(self, |path| self.decay_of(path))
    }

    /// The loss without its penalty: the main head's cross-entropy plus the auxiliary head's,
    /// weighted, both label-smoothed as configured.
    fn cross_entropy(&self, images: Tensor<4>, labels: Tensor<1, Int>) -> ClassifierLoss {
        let (logits, aux) = self.forward_with_aux(images);
        let cross_entropy =
            |logits, labels| softmax_cross_entropy(logits, labels, self.label_smoothing);
        let mut loss = cross_entropy(logits.clone(), labels.clone());
        if let Some(aux) = aux {
            loss = loss + cross_entropy(aux, labels).mul_scalar(self.aux_weight);
        }
        ClassifierLoss { loss, logits }
    }

    fn decay_of(&self, path: &str) -> f64 {
        match path.ends_with(".weight") {
            true => self.weight_decay,
            false => 0.0,
        }
    }

    /// A table of endpoints, output shapes (batch 1) and parameter counts. Runs one image
    /// through an evaluation copy of the model.
    pub fn summary(&self) -> String {
        let model = self.valid();
        let device = model.logits.weight.val().device();
        let images = Tensor::zeros([1, 3, self.image_size, self.image_size], &device);
        let rows = model_rows(&model, model.endpoints(images));
        let title = format!("InceptionV3, input {:?}", self.input_shape());
        parameter_table(&title, &rows, count_params(self))
    }
}

impl ImageClassifier for InceptionV3 {
    fn forward(&self, images: Tensor<4>) -> Tensor<2> {
        self.run(images, false, &mut |_, _| {}).0
    }

    fn loss(&self, images: Tensor<4>, labels: Tensor<1, Int>) -> ClassifierLoss {
        self.cross_entropy(images, labels)
            .plus(self.regularization())
    }

    fn weight_decays(&self) -> Vec<WeightDecay> {
        self.weight_decay_terms()
    }

    fn loss_decay_in_update(&self, images: Tensor<4>, labels: Tensor<1, Int>) -> ClassifierLoss {
        self.cross_entropy(images, labels)
            .plus_penalty_value(self, |path| self.decay_of(path))
    }

    fn num_classes(&self) -> usize {
        self.num_classes
    }

    fn input_shape(&self) -> [usize; 3] {
        [3, self.image_size, self.image_size]
    }
}

/// What every [`BasicConv`] of the network shares (TF-slim's arg scope): the batch-norm decay
/// and the device.
struct ArgScope<'a> {
    batch_norm_decay: f64,
    device: &'a Device,
}

impl<'a> ArgScope<'a> {
    fn new(batch_norm_decay: f64, device: &'a Device) -> Self {
        Self {
            batch_norm_decay,
            device,
        }
    }

    /// A SAME, stride-1 convolution with the default stddev, to be adjusted.
    fn config(&self, c_in: usize, c_out: usize, kernel: [usize; 2]) -> BasicConvConfig {
        BasicConvConfig::new([c_in, c_out], kernel).with_momentum(1.0 - self.batch_norm_decay)
    }

    /// A SAME, stride-1 [`BasicConv`] with the default stddev: most of the network.
    fn conv(&self, c_in: usize, c_out: usize, kernel: [usize; 2]) -> BasicConv {
        self.config(c_in, c_out, kernel).init(self.device)
    }

    /// A 3x3, stride-2, VALID [`BasicConv`]: the grid reductions.
    fn reduce(&self, c_in: usize, c_out: usize) -> BasicConv {
        self.config(c_in, c_out, [3, 3])
            .with_stride([2, 2])
            .with_padding(PaddingConfig2d::Valid)
            .init(self.device)
    }
}

/// Max pool 3x3, stride 2, VALID.
fn max_pool_3x3_s2() -> MaxPool2d {
    MaxPool2dConfig::new([3, 3]).with_strides([2, 2]).init()
}

/// The pooling branch's 3x3 average pool: stride 1, SAME, averaging only real pixels as TF
/// unless `counts_padding` (torchvision's port).
fn pool_3x3(counts_padding: bool) -> AvgPool2d {
    AvgPool2dConfig::new([3, 3])
        .with_strides([1, 1])
        .with_padding(PaddingConfig2d::Same)
        .with_count_include_pad(counts_padding)
        .init()
}

/// Applies a branch's convolutions in order, each output handed to the next as it reads it
/// best ([`BasicConv::forward_into`]).
fn sequence(convs: &[BasicConv], x: Tensor<4>) -> Tensor<4> {
    sequence_into(convs, x, None)
}

/// [`sequence`], the last output handed to `next` as it reads it best, when there is a `next`.
fn sequence_into(convs: &[BasicConv], x: Tensor<4>, next: Option<&BasicConv>) -> Tensor<4> {
    let nexts = convs.iter().skip(1).map(Some).chain([next]);
    convs
        .iter()
        .zip(nexts)
        .fold(x, |x, (conv, next)| match next {
            Some(next) => conv.forward_into(x, next),
            None => conv.forward(x),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::ParamCounts;
    use burn::module::Param;
    use burn::optim::GradientsParams;
    use burn::tensor::{Distribution, TensorData};

    fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
        t.into_data().try_to_vec().unwrap()
    }

    fn batch(n: usize, size: usize, classes: i64, device: &Device) -> (Tensor<4>, Tensor<1, Int>) {
        let images = Tensor::random([n, 3, size, size], Distribution::Uniform(-1.0, 1.0), device);
        let labels: Vec<i64> = (0..n as i64).map(|i| (2 * i + 1) % classes).collect();
        (
            images,
            Tensor::from_data(TensorData::new(labels, [n]), device),
        )
    }

    /// Ratio of a parameter's standard deviation to a two-sigma truncated normal's.
    fn std_ratio<const D: usize>(param: &Param<Tensor<D>>, stddev: f64) -> f64 {
        let v = values(param.val());
        let n = v.len() as f64;
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
        let std = (v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n).sqrt();
        std / (0.8796 * stddev)
    }

    #[test]
    fn parameter_counts_match_keras_and_torchvision() {
        let device = Device::flex();
        // keras.applications.InceptionV3(weights=None, classes=1000): trainable and
        // non-trainable (moving mean and variance) parameters.
        let keras = InceptionV3Config::new(1000)
            .with_aux_logits(false)
            .init(&device);
        let want = ParamCounts {
            trainable: 23_817_352,
            moving: 34_432,
        };
        assert_eq!(count_params(&keras), want);
        // torchvision's inception_v3 (aux head, 1000 classes) has 27,161,264 parameters,
        // counting a BN gamma per channel that slim and Keras do not train.
        let with_aux = InceptionV3Config::new(1000).init(&device);
        let counts = count_params(&with_aux);
        assert_eq!(counts.trainable + counts.moving / 2, 27_161_264);
    }

    #[test]
    fn endpoints_at_299_have_slim_sizes_and_depths() {
        let device = Device::flex();
        let model = InceptionV3Config::new(1001).init(&device);
        let (images, _) = batch(1, 299, 1001, &device);
        let map = |c, s| vec![1, c, s, s];
        let want: Vec<(&str, Vec<usize>)> = vec![
            ("Conv2d_1a_3x3", map(32, 149)),
            ("Conv2d_2a_3x3", map(32, 147)),
            ("Conv2d_2b_3x3", map(64, 147)),
            ("MaxPool_3a_3x3", map(64, 73)),
            ("Conv2d_3b_1x1", map(80, 73)),
            ("Conv2d_4a_3x3", map(192, 71)),
            ("MaxPool_5a_3x3", map(192, 35)),
            ("Mixed_5b", map(256, 35)),
            ("Mixed_5c", map(288, 35)),
            ("Mixed_5d", map(288, 35)),
            ("Mixed_6a", map(768, 17)),
            ("Mixed_6b", map(768, 17)),
            ("Mixed_6c", map(768, 17)),
            ("Mixed_6d", map(768, 17)),
            ("Mixed_6e", map(768, 17)),
            ("Mixed_7a", map(1280, 8)),
            ("Mixed_7b", map(2048, 8)),
            ("Mixed_7c", map(2048, 8)),
            ("AuxLogits", vec![1, 1001]),
            ("Logits", vec![1, 1001]),
        ];
        assert_eq!(model.endpoints(images), want);
        assert_eq!(model.input_shape(), [3, 299, 299]);
    }

    #[test]
    fn trains_forward_and_backward_with_the_aux_head() {
        let device = Device::flex().autodiff();
        device.seed(3);
        let model = InceptionV3Config::new(5).with_image_size(139).init(&device);
        let (images, labels) = batch(2, 139, 5, &device);
        let out = model.loss(images, labels);
        assert_eq!(out.logits.dims(), [2, 5]);
        let loss = values(out.loss.clone());
        assert!(loss.len() == 1 && loss[0].is_finite());
        let grads = GradientsParams::from_grads(out.loss.backward(), &model);
        // 94 + 2 convolutions (weight, beta) and two logits layers (weight, bias).
        assert_eq!(grads.len(), 2 * 96 + 4);
        let g = grads.get::<4>(model.conv2d_1a_3x3.conv.weight.id).unwrap();
        assert!(values(g).iter().any(|&x| x != 0.0));
        // Batch statistics moved the first layer's averages by TF's 1 - 0.9997.
        let mean = values(model.conv2d_1a_3x3.bn.running_mean.value_sync());
        let largest = mean.iter().fold(0f32, |m, x| m.max(x.abs()));
        assert!(largest > 0.0 && largest < 1e-2);
        // The aux head's small initializers.
        let aux = model.aux_logits.as_ref().unwrap();
        assert!((std_ratio(&aux.conv2d_2a.conv.weight, 0.01) - 1.0).abs() < 0.02);
        assert!((std_ratio(&aux.conv2d_2b_1x1.weight, 0.001) - 1.0).abs() < 0.1);
    }

    #[test]
    fn batch_norm_decay_reaches_every_batch_norm() {
        // From zero averages, two training forwards of one batch leave `(1 - d) m` and then
        // `d (1 - d) m + (1 - d) m`: their ratio is `1 + d`, for every batch norm configured.
        // One layer of the stem, of each block kind and of the aux head.
        let device = Device::flex().autodiff();
        let m = InceptionV3Config::new(3)
            .with_image_size(107)
            .with_batch_norm_decay(0.9)
            .init(&device);
        let (images, _) = batch(2, 107, 3, &device);
        let aux = m.aux_logits.as_ref().unwrap();
        let layers = [
            &m.conv2d_1a_3x3,
            &m.mixed_5b.branch_3,
            &m.mixed_6a.branch_0,
            &m.mixed_6e.branch_3,
            &m.mixed_7a.branch_1[3],
            &m.mixed_7c.branch_3,
            &aux.conv2d_1b_1x1,
            &aux.conv2d_2a,
        ];
        let means = || layers.map(|conv| values(conv.bn.running_mean.value_sync()));
        let _ = m.forward_with_aux(images.clone());
        let once = means();
        let _ = m.forward_with_aux(images);
        for (layer, (once, twice)) in once.iter().zip(&means()).enumerate() {
            let (i, largest) = once.iter().enumerate().fold((0, 0f32), |m, (i, &v)| {
                if v.abs() > m.1 { (i, v.abs()) } else { m }
            });
            assert!(largest > 0.0, "layer {layer} did not move");
            let ratio = twice[i] / once[i];
            assert!((ratio - 1.9).abs() < 1e-3, "layer {layer}: {ratio}");
        }
    }

    #[test]
    fn loss_is_smoothed_cross_entropy_plus_weighted_aux_plus_decay() {
        let device = Device::flex();
        let model = InceptionV3Config::new(5).with_image_size(139).init(&device);
        let (images, labels) = batch(2, 139, 5, &device);
        let (logits, aux) = model.forward_with_aux(images.clone());
        let labels_host: Vec<i64> = labels
            .clone()
            .into_data()
            .convert::<i64>()
            .try_to_vec()
            .unwrap();
        let smoothed_ce = |logits: Vec<f32>| {
            let mut total = 0.0;
            for (i, &label) in labels_host.iter().enumerate() {
                let row: Vec<f64> = logits[i * 5..(i + 1) * 5]
                    .iter()
                    .map(|&x| x as f64)
                    .collect();
                let max = row.iter().cloned().fold(f64::MIN, f64::max);
                let log_sum = row.iter().map(|x| (x - max).exp()).sum::<f64>().ln() + max;
                for (k, x) in row.iter().enumerate() {
                    let target = 0.1 / 5.0 + if k == label as usize { 0.9 } else { 0.0 };
                    total += target * (log_sum - x);
                }
            }
            total / labels_host.len() as f64
        };
        let penalty = values(model.regularization().unwrap())[0] as f64;
        let want = smoothed_ce(values(logits)) + 0.4 * smoothed_ce(values(aux.unwrap())) + penalty;
        let got = values(model.loss(images, labels).loss)[0] as f64;
        assert!((got - want).abs() < 1e-4 * want, "{got} vs {want}");
    }

    #[test]
    fn weight_decay_covers_every_conv_and_fc_weight() {
        let device = Device::flex();
        device.seed(5);
        let model = InceptionV3Config::new(10)
            .with_aux_logits(false)
            .init(&device);
        let terms = model.weight_decay_terms();
        assert_eq!(terms.len(), 95);
        assert!(terms.iter().all(|t| t.decay == 0.00004));
        let convs = terms
            .iter()
            .filter(|t| t.path.ends_with(".conv.weight"))
            .count();
        assert_eq!(convs, 94);
        assert_eq!(terms.last().unwrap().path, "logits.weight");

        struct SumSquares(f64);
        impl burn::module::ModuleVisitor for SumSquares {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
                if D > 1 {
                    self.0 += values(param.val())
                        .iter()
                        .map(|&x| (x as f64).powi(2))
                        .sum::<f64>();
                }
            }
        }
        let mut squares = SumSquares(0.0);
        model.visit(&mut squares);
        let by_hand = 0.00004 * squares.0 / 2.0;
        let got = values(model.regularization().unwrap())[0] as f64;
        assert!((got - by_hand).abs() < 1e-4 * by_hand, "{got} vs {by_hand}");

        // Weights drawn with TF's stddevs: 0.1 for convolutions, 0.001 for the logits.
        assert!((std_ratio(&model.mixed_7b.branch_2[1].conv.weight, 0.1) - 1.0).abs() < 0.01);
        assert!((std_ratio(&model.logits.weight, 0.001) - 1.0).abs() < 0.02);
    }

    #[test]
    fn summary_rows_name_every_block_and_add_up() {
        let model = InceptionV3Config::new(1000)
            .with_image_size(139)
            .init(&Device::flex());
        let summary = model.summary();
        for line in [
            "Conv2d_1a_3x3",
            "Mixed_5b",
            "Mixed_7c",
            "AuxLogits",
            "Logits",
        ] {
            assert!(summary.contains(line), "{line} missing from\n{summary}");
        }
        let rows = model_rows(
            &model,
            model.endpoints(Tensor::zeros([1, 3, 139, 139], &Device::flex())),
        );
        assert!(rows.iter().all(|row| !row.output_shape.is_empty()));
        let trainable: usize = rows.iter().map(|row| row.params.trainable).sum();
        assert_eq!(trainable, count_params(&model).trainable);
    }
}
