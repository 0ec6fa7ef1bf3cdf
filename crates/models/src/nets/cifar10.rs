//! [`Cifar10Net`]: the TF CIFAR-10 tutorial network and its configuration, built of `layers/`.

use crate::layers::{Lrn, LrnConfig, truncated_normal};
use crate::nets::{ClassifierLoss, ImageClassifier};
use crate::parameter_table::model_rows;
use crate::parameter_table::parameter_table;
use crate::params::{WeightDecay, count_params, weight_decays};
use crate::penalty::l2_penalty;
use burn::config::Config;
use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::pool::{MaxPool2d, MaxPool2dConfig};
use burn::nn::{Initializer, Linear, LinearConfig, PaddingConfig2d};
use burn::tensor::{Device, Int, Tensor};
use towers_kernels::same_padding;
use towers_kernels::{
    conv2d_relu, conv2d_relu_max_pool2d, linear, linear_relu, max_pool2d, softmax_cross_entropy,
};

/// Configuration of [`Cifar10Net`]; the defaults are the TF tutorial's (`cifar10.py`).
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct Cifar10Config {
    /// Number of classes.
    #[config(default = 10)]
    pub num_classes: usize,
    /// Side of the square input; the tutorial trains on 24x24 crops of the 32x32 images.
    #[config(default = 24)]
    pub image_size: usize,
    /// Decay of the two hidden fully-connected weight matrices (the only decayed ones).
    #[config(default = 0.004)]
    pub weight_decay: f64,
}

/// The TF CIFAR-10 tutorial network: conv1 5x5x64 (ReLU), max pool 3x3/2, LRN, conv2 5x5x64
/// (ReLU), LRN, max pool 3x3/2, local3 384 (ReLU), local4 192 (ReLU), softmax_linear.
///
/// Layer names, initializers, biases and weight decay are the tutorial's. Weights are laid
/// out as TF's where the layout is free: the fully-connected weights are `[in, out]`, and the
/// pooled features are flattened in NHWC order, so `local3.weight` is the tutorial's matrix
/// row for row. Convolution kernels are Burn's `[out, in, kh, kw]`.
#[derive(Module, Debug)]
pub struct Cifar10Net {
    /// 5x5, 3 to 64 channels, SAME, bias 0.
    pub conv1: Conv2d,
    /// 3x3, stride 2, SAME.
    pub pool1: MaxPool2d,
    /// `tf.nn.lrn(depth_radius=4, bias=1, alpha=0.001/9, beta=0.75)`.
    pub norm1: Lrn,
    /// 5x5, 64 to 64 channels, SAME, bias 0.1.
    pub conv2: Conv2d,
    /// As `norm1`.
    pub norm2: Lrn,
    /// 3x3, stride 2, SAME.
    pub pool2: MaxPool2d,
    /// Flattened features to 384, bias 0.1, decayed.
    pub local3: Linear,
    /// 384 to 192, bias 0.1, decayed.
    pub local4: Linear,
    /// 192 to the class logits, bias 0.
    pub softmax_linear: Linear,
    num_classes: usize,
    image_size: usize,
    weight_decay: f64,
}

impl Cifar10Config {
    /// Builds the network with the tutorial's initialization (weights drawn lazily).
    pub fn init(&self, device: &Device) -> Cifar10Net {
        assert!(self.image_size > 0 && self.num_classes > 0);
        let conv = |c_in, bias| {
            let mut conv = Conv2dConfig::new([c_in, 64], [5, 5])
                .with_padding(PaddingConfig2d::Same)
                .init(device);
            conv.weight = truncated_normal([64, c_in, 5, 5], 5e-2, device);
            conv.bias = Some(Initializer::Constant { value: bias }.init([64], device));
            conv
        };
        let pool = |input: usize| {
            let config = MaxPool2dConfig::new([3, 3]).with_strides([2, 2]);
            // Where TF's SAME pads only after the end (24 and 12, the tutorial's sizes), it
            // has the windows of no padding in ceil mode, which skips Burn's padding copy and
            // index fix-ups (0.72x to 1.04x the time forward and backward, `bench_step`).
            match same_padding(input, 3, 2).0 == 0 {
                true => config.with_ceil_mode(true).init(),
                false => config.with_padding(PaddingConfig2d::Same).init(),
            }
        };
        let lrn = || {
            LrnConfig::new()
                .with_depth_radius(4)
                .with_bias(1.0)
                .with_alpha(0.001 / 9.0)
                .with_beta(0.75)
                .init()
        };
        let linear = |d_in, d_out, stddev, bias| {
            let mut linear = LinearConfig::new(d_in, d_out).init(device);
            linear.weight = truncated_normal([d_in, d_out], stddev, device);
            linear.bias = Some(Initializer::Constant { value: bias }.init([d_out], device));
            linear
        };
        let pooled = self.image_size.div_ceil(2).div_ceil(2);
        Cifar10Net {
            conv1: conv(3, 0.0),
            pool1: pool(self.image_size),
            norm1: lrn(),
            conv2: conv(64, 0.1),
            norm2: lrn(),
            pool2: pool(self.image_size.div_ceil(2)),
            local3: linear(pooled * pooled * 64, 384, 0.04, 0.1),
            local4: linear(384, 192, 0.04, 0.1),
            softmax_linear: linear(192, self.num_classes, 1.0 / 192.0, 0.0),
            num_classes: self.num_classes,
            image_size: self.image_size,
            weight_decay: self.weight_decay,
        }
    }
}

impl Cifar10Net {
    /// Logits, reporting each layer's output shape to `tap` under its TF name.
    fn run(&self, images: Tensor<4>, tap: &mut dyn FnMut(&'static str, &[usize])) -> Tensor<2> {
        // SAME, stride 1: conv1's output is the images' size.
        let [n, _, h, w] = images.dims();
        tap("conv1", &[n, self.conv1.weight.dims()[0], h, w]);
        let x = conv2d_relu_max_pool2d(&self.conv1, &self.pool1, images);
        tap("pool1", &x.dims());
        let x = self.norm1.forward(x);
        tap("norm1", &x.dims());
        let x = conv2d_relu(&self.conv2, x);
        tap("conv2", &x.dims());
        let x = self.norm2.forward(x);
        tap("norm2", &x.dims());
        let x = max_pool2d(&self.pool2, x);
        tap("pool2", &x.dims());
        // NHWC order, as TF's reshape, so local3's rows match the tutorial's.
        let x = x.permute([0, 2, 3, 1]).flatten::<2>(1, 3);
        let x = linear_relu(&self.local3, x);
        tap("local3", &x.dims());
        let x = linear_relu(&self.local4, x);
        tap("local4", &x.dims());
        let logits = linear(&self.softmax_linear, x);
        tap("softmax_linear", &logits.dims());
        logits
    }

    /// Each layer's TF name and output shape for `images`.
    pub fn endpoints(&self, images: Tensor<4>) -> Vec<(&'static str, Vec<usize>)> {
        let mut shapes = Vec::new();
        self.run(images, &mut |name, dims| shapes.push((name, dims.to_vec())));
        shapes
    }

    /// The decayed parameters: `local3.weight` and `local4.weight`.
    pub fn weight_decay_terms(&self) -> Vec<WeightDecay> {
        weight_decays(self, |path| self.decay_of(path))
    }

    /// `sum of decay * sum(W^2) / 2` over [`Self::weight_decay_terms`], shape `[1]`; `None`
    /// when the decay is 0. Part of [`ImageClassifier::loss`].
    pub fn regularization(&self) -> Option<Tensor<1>> {
        l2_penalty(self, |path| self.decay_of(path))
    }

    /// The loss without its penalty: the mean cross-entropy.
    fn cross_entropy(&self, images: Tensor<4>, labels: Tensor<1, Int>) -> ClassifierLoss {
        let logits = ImageClassifier::forward(self, images);
        let loss = softmax_cross_entropy(logits.clone(), labels, 0.0);
        ClassifierLoss { loss, logits }
    }

    fn decay_of(&self, path: &str) -> f64 {
        match path {
            "local3.weight" | "local4.weight" => self.weight_decay,
            _ => 0.0,
        }
    }

    /// A table of layers, output shapes (batch 1) and parameter counts. Runs one image through
    /// an evaluation copy of the model.
    pub fn summary(&self) -> String {
        let model = self.valid();
        let device = model.conv1.weight.val().device();
        let images = Tensor::zeros([1, 3, self.image_size, self.image_size], &device);
        let rows = model_rows(&model, model.endpoints(images));
        let title = format!("Cifar10Net, input {:?}", self.input_shape());
        parameter_table(&title, &rows, count_params(self))
    }
}

impl ImageClassifier for Cifar10Net {
    fn forward(&self, images: Tensor<4>) -> Tensor<2> {
        self.run(images, &mut |_, _| {})
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::ParamCounts;
    use burn::module::Param;
    use burn::tensor::{Distribution, TensorData};

    fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
        t.into_data().try_to_vec().unwrap()
    }

    fn batch(n: usize, device: &Device) -> (Tensor<4>, Tensor<1, Int>) {
        let images = Tensor::random([n, 3, 24, 24], Distribution::Normal(0.0, 1.0), device);
        let labels: Vec<i64> = (0..n as i64).map(|i| (i * 3) % 10).collect();
        (
            images,
            Tensor::from_data(TensorData::new(labels, [n]), device),
        )
    }

    /// Ratio of a parameter's standard deviation to a two-sigma truncated normal's (which
    /// keeps 0.8796 of `stddev`); all values must lie within two `stddev`s.
    fn std_ratio<const D: usize>(param: &Param<Tensor<D>>, stddev: f64) -> f64 {
        let v = values(param.val());
        assert!(v.iter().all(|x| (x.abs() as f64) <= 2.0 * stddev + 1e-7));
        let n = v.len() as f64;
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
        (v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n).sqrt() / (0.8796 * stddev)
    }

    #[test]
    fn has_the_tutorial_parameter_count() {
        let net = Cifar10Config::new().init(&Device::flex());
        let counts = ParamCounts {
            trainable: 1_068_298,
            moving: 0,
        };
        assert_eq!(count_params(&net), counts);
        assert_eq!(net.num_params(), 1_068_298);
    }

    #[test]
    fn layer_shapes_follow_the_tutorial() {
        let device = Device::flex();
        let net = Cifar10Config::new().init(&device);
        let (images, _) = batch(2, &device);
        let want: Vec<(&str, Vec<usize>)> = vec![
            ("conv1", vec![2, 64, 24, 24]),
            ("pool1", vec![2, 64, 12, 12]),
            ("norm1", vec![2, 64, 12, 12]),
            ("conv2", vec![2, 64, 12, 12]),
            ("norm2", vec![2, 64, 12, 12]),
            ("pool2", vec![2, 64, 6, 6]),
            ("local3", vec![2, 384]),
            ("local4", vec![2, 192]),
            ("softmax_linear", vec![2, 10]),
        ];
        assert_eq!(net.endpoints(images), want);
        assert_eq!(net.input_shape(), [3, 24, 24]);
        assert_eq!(net.num_classes(), 10);
    }

    #[test]
    fn initialization_matches_tf() {
        let device = Device::flex();
        device.seed(1);
        let net = Cifar10Config::new().init(&device);
        assert!((std_ratio(&net.conv1.weight, 5e-2) - 1.0).abs() < 0.05);
        assert!((std_ratio(&net.conv2.weight, 5e-2) - 1.0).abs() < 0.02);
        assert!((std_ratio(&net.local3.weight, 0.04) - 1.0).abs() < 0.01);
        assert!((std_ratio(&net.local4.weight, 0.04) - 1.0).abs() < 0.02);
        assert!((std_ratio(&net.softmax_linear.weight, 1.0 / 192.0) - 1.0).abs() < 0.08);
        let bias = |linear: Option<&Param<Tensor<1>>>| values(linear.unwrap().val());
        assert!(bias(net.conv1.bias.as_ref()).iter().all(|&b| b == 0.0));
        assert!(bias(net.conv2.bias.as_ref()).iter().all(|&b| b == 0.1));
        assert!(bias(net.local3.bias.as_ref()).iter().all(|&b| b == 0.1));
        assert!(bias(net.local4.bias.as_ref()).iter().all(|&b| b == 0.1));
        assert!(
            bias(net.softmax_linear.bias.as_ref())
                .iter()
                .all(|&b| b == 0.0)
        );
    }

    #[test]
    fn weight_decay_is_tf_l2_loss_of_the_hidden_fc_weights() {
        let device = Device::flex().autodiff();
        let net = Cifar10Config::new().init(&device);
        let terms = net.weight_decay_terms();
        let expected = [
            ("local3.weight", net.local3.weight.id),
            ("local4.weight", net.local4.weight.id),
        ];
        assert_eq!(terms.len(), 2);
        for (term, (path, id)) in terms.iter().zip(expected) {
            assert_eq!((term.path.as_str(), term.id, term.decay), (path, id, 0.004));
        }

        let squares = |w: &Param<Tensor<2>>| {
            values(w.val())
                .iter()
                .map(|&x| (x as f64).powi(2))
                .sum::<f64>()
        };
        let by_hand = 0.004 * (squares(&net.local3.weight) + squares(&net.local4.weight)) / 2.0;
        let penalty = net.regularization().unwrap();
        let got = values(penalty.clone())[0] as f64;
        assert!((got - by_hand).abs() < 1e-5 * by_hand, "{got} vs {by_hand}");

        // d/dW of decay * sum(W^2) / 2 is decay * W, and nothing else is decayed.
        let grads = penalty.backward();
        let w = values(net.local4.weight.val());
        let g = values(net.local4.weight.val().grad(&grads).unwrap());
        assert!(w.iter().zip(&g).all(|(w, g)| (0.004 * w - g).abs() < 1e-9));
        assert!(net.conv1.weight.val().grad(&grads).is_none());
        assert!(net.softmax_linear.weight.val().grad(&grads).is_none());
    }

    #[test]
    fn loss_is_mean_cross_entropy_plus_decay() {
        let device = Device::flex();
        let net = Cifar10Config::new().init(&device);
        let (images, labels) = batch(3, &device);
        let out = net.loss(images, labels.clone());
        let logits = values(out.logits);
        let labels: Vec<i64> = labels.into_data().convert::<i64>().try_to_vec().unwrap();
        let cross_entropy = labels
            .iter()
            .enumerate()
            .map(|(i, &label)| {
                let row: Vec<f64> = logits[i * 10..(i + 1) * 10]
                    .iter()
                    .map(|&x| x as f64)
                    .collect();
                let max = row.iter().cloned().fold(f64::MIN, f64::max);
                let log_sum = row.iter().map(|x| (x - max).exp()).sum::<f64>().ln() + max;
                log_sum - row[label as usize]
            })
            .sum::<f64>()
            / 3.0;
        let penalty = values(net.regularization().unwrap())[0] as f64;
        let loss = values(out.loss);
        assert_eq!(loss.len(), 1);
        assert!((loss[0] as f64 - (cross_entropy + penalty)).abs() < 1e-5);
    }

    #[test]
    fn full_batch_gradient_is_the_mean_of_half_batch_gradients() {
        let device = Device::flex().autodiff();
        let net = Cifar10Config::new().init(&device);
        let (images, labels) = batch(4, &device);
        let grad_of = |images: Tensor<4>, labels: Tensor<1, Int>| {
            let grads = net.loss(images, labels).loss.backward();
            (
                values(net.conv1.weight.val().grad(&grads).unwrap()),
                values(net.local3.weight.val().grad(&grads).unwrap()),
            )
        };
        let full = grad_of(images.clone(), labels.clone());
        let a = grad_of(
            images.clone().narrow(0, 0, 2),
            labels.clone().narrow(0, 0, 2),
        );
        let b = grad_of(images.narrow(0, 2, 2), labels.narrow(0, 2, 2));
        let check = |full: &[f32], a: &[f32], b: &[f32]| {
            let scale = full.iter().fold(0f32, |m, x| m.max(x.abs()));
            for ((f, a), b) in full.iter().zip(a).zip(b) {
                assert!((f - (a + b) / 2.0).abs() <= 1e-4 * scale, "{f} vs {a}, {b}");
            }
        };
        check(&full.0, &a.0, &b.0);
        check(&full.1, &a.1, &b.1);
    }

    #[test]
    fn summary_lists_every_layer_and_the_total() {
        let net = Cifar10Config::new().init(&Device::flex());
        let summary = net.summary();
        for line in [
            "conv1",
            "[1, 64, 24, 24]",
            "norm2",
            "local3",
            "885,120",
            "softmax_linear  [1, 10]",
        ] {
            assert!(summary.contains(line), "{line} missing from\n{summary}");
        }
        assert!(summary.ends_with("Total: 1,068,298 trainable parameters, 0 moving statistics"));
    }
}
