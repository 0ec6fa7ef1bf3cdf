//! [`ResNetV2`]: keras.applications' `ResNet50V2`, `ResNet101V2` and `ResNet152V2`
//! (`keras/src/applications/resnet_v2.py`), the pre-activation ResNet of
//! [`PreActBottleneck`]s, whose weights Keras's files hold
//! ([`KerasSource`](crate::weights::KerasSource)); its layer names are in
//! `weights/resnet_keras_names.rs`.

use burn::config::Config;
use burn::module::Module;
use burn::tensor::ops::PadMode;
use burn::tensor::{Device, Tensor};
use towers_kernels::nn::conv::Conv2d;
use towers_kernels::nn::pool::{
    AdaptiveAvgPool2d, AdaptiveAvgPool2dConfig, MaxPool2d, MaxPool2dConfig,
};
use towers_kernels::nn::{BatchNorm, Linear};

use crate::nets::features_classifier;
use crate::nets::resnet::layout::{ResNetLayout, keras_v2_conv};
use crate::nets::resnet::pre_act_bottleneck::{PreActBottleneck, PreActBottleneckConfig};
use crate::nets::resnet::{STAGES_50, STAGES_101, STAGES_152, assert_stages_have_blocks};

/// A ResNet v2's depth and head.
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct ResNetV2Config {
    /// The blocks of each of the four stages: `[3, 4, 6, 3]` for ResNet50V2, `[3, 4, 23, 3]`
    /// for ResNet101V2, `[3, 8, 36, 3]` for ResNet152V2.
    pub blocks: [usize; 4],
    /// The classes of the logits (Keras's ImageNet models: 1000).
    #[config(default = 1000)]
    pub num_classes: usize,
    /// The side of the square images the model expects (any side of 32 or more works).
    #[config(default = 224)]
    pub image_size: usize,
    /// L2 penalty on every weight, bias and batch-norm scale and offset, added to the loss.
    #[config(default = 0.0)]
    pub weight_decay: f64,
}

impl ResNetV2Config {
    /// keras.applications' `ResNet50V2`.
    pub fn resnet50v2(num_classes: usize) -> Self {
        Self::new(STAGES_50).with_num_classes(num_classes)
    }

    /// keras.applications' `ResNet101V2`.
    pub fn resnet101v2(num_classes: usize) -> Self {
        Self::new(STAGES_101).with_num_classes(num_classes)
    }

    /// keras.applications' `ResNet152V2`.
    pub fn resnet152v2(num_classes: usize) -> Self {
        Self::new(STAGES_152).with_num_classes(num_classes)
    }

    /// keras.applications' `ResNet{depth}V2`: `depth` 50, 101 or 152, else `None`.
    pub fn of_depth(depth: usize, num_classes: usize) -> Option<Self> {
        match depth {
            50 => Some(Self::resnet50v2(num_classes)),
            101 => Some(Self::resnet101v2(num_classes)),
            152 => Some(Self::resnet152v2(num_classes)),
            _ => None,
        }
    }

    /// A new ResNet v2, initialized as Keras initializes it (Glorot's uniform, biases at zero,
    /// batch norms at scale 1 and offset 0).
    ///
    /// Panics if a stage has no block.
    pub fn init(&self, device: &Device) -> ResNetV2 {
        assert_stages_have_blocks(self.blocks);
        let mut channels = 64;
        // Keras's `stack_residual_blocks_v2`: the first block's shortcut a convolution, the
        // stride in the last block.
        let mut stage = |planes: usize, blocks: usize, stride: usize| -> Vec<PreActBottleneck> {
            (0..blocks)
                .map(|i| {
                    let block = PreActBottleneckConfig::new(channels, planes)
                        .with_stride(if i + 1 == blocks { stride } else { 1 })
                        .with_conv_shortcut(i == 0)
                        .init(device);
                    channels = 4 * planes;
                    block
                })
                .collect()
        };
        let [b1, b2, b3, b4] = self.blocks;
        let (layer1, layer2, layer3, layer4) = (
            stage(64, b1, 2),
            stage(128, b2, 2),
            stage(256, b3, 2),
            stage(512, b4, 1),
        );
        ResNetV2 {
            conv1: keras_v2_conv([3, 64], 7, 2, true, device),
            maxpool: MaxPool2dConfig::new([3, 3]).with_strides([2, 2]).init(),
            layer1,
            layer2,
            layer3,
            layer4,
            post_bn: ResNetLayout::Keras.batch_norm(2048, device),
            avgpool: AdaptiveAvgPool2dConfig::new([1, 1]).init(),
            fc: ResNetLayout::Keras.classifier(2048, self.num_classes, device),
            num_classes: self.num_classes,
            image_size: self.image_size,
            weight_decay: self.weight_decay,
        }
    }
}

/// A ResNet v2: stem (7x7/2 convolution with a bias, no batch norm, a 3x3/2 max pool over a
/// padding of zeros), four stages of [`PreActBottleneck`]s (64, 128, 256, 512 planes; the
/// first three end at stride 2), a batch norm and ReLU, global average pool, a dense layer to
/// the logits.
#[derive(Module, Debug)]
pub struct ResNetV2 {
    /// The stem's 7x7/2 convolution (Keras's `conv1_conv`).
    pub conv1: Conv2d,
    /// The stem's 3x3/2 max pool (`pool1_pool`), on the convolution padded by a zero on every
    /// side: the convolution's values can be negative, so a zero can be a window's maximum.
    pub maxpool: MaxPool2d,
    /// 64 planes, ending at stride 2 (Keras's `conv2`).
    pub layer1: Vec<PreActBottleneck>,
    /// 128 planes, ending at stride 2.
    pub layer2: Vec<PreActBottleneck>,
    /// 256 planes, ending at stride 2.
    pub layer3: Vec<PreActBottleneck>,
    /// 512 planes.
    pub layer4: Vec<PreActBottleneck>,
    /// After the last block (`post_bn`).
    pub post_bn: BatchNorm,
    /// Global average pool.
    pub avgpool: AdaptiveAvgPool2d,
    /// The logits (`predictions`).
    pub fc: Linear,
    num_classes: usize,
    image_size: usize,
    weight_decay: f64,
}

impl ResNetV2 {
    /// The features before the head: `[n, 2048]`.
    fn features(&self, images: Tensor<4>) -> Tensor<2> {
        let x = self.conv1.forward(images);
        let padded = x.pad([(0, 0), (0, 0), (1, 1), (1, 1)], PadMode::Constant(0.0));
        let mut x = self.maxpool.forward(padded);
        for block in self
            .layer1
            .iter()
            .chain(&self.layer2)
            .chain(&self.layer3)
            .chain(&self.layer4)
        {
            x = block.forward(x);
        }
        let x = self.post_bn.forward_relu(x);
        self.avgpool.forward(x).flatten(1, 3)
    }
}

features_classifier!(ResNetV2);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nets::ImageClassifier;
    use crate::params::count_params;

    /// Keras's `ResNet50V2(weights=None).count_params()`: 25,613,800, of which 45,440 are the
    /// batch norms' moving statistics (`non_trainable_params`), which are not parameters here.
    #[test]
    fn resnet50v2_has_kerass_parameter_count() {
        let model = ResNetV2Config::resnet50v2(1000).init(&Device::flex());
        assert_eq!(count_params(&model).trainable, 25_613_800 - 45_440);
    }

    #[test]
    #[should_panic(expected = "at least one block in each of its four stages, not [3, 4, 0, 3]")]
    fn a_stage_without_blocks_is_refused() {
        ResNetV2Config::new([3, 4, 0, 3]).init(&Device::flex());
    }

    #[test]
    fn depths_are_kerass() {
        let blocks = |depth| ResNetV2Config::of_depth(depth, 10).map(|config| config.blocks);
        assert_eq!(blocks(101), Some([3, 4, 23, 3]));
        assert_eq!(blocks(152), Some([3, 8, 36, 3]));
        assert_eq!(blocks(18), None);
    }

    /// Each stage ends at its stride: 224 to 112 (stem), 56 (pool), 28, 14, 7, 7.
    #[test]
    fn stages_end_at_their_strides() {
        let model = ResNetV2Config::new([2, 2, 2, 2])
            .with_num_classes(3)
            .init(&Device::flex());
        let strided = |layer: &[PreActBottleneck]| {
            layer.iter().map(|b| b.conv2.stride[0]).collect::<Vec<_>>()
        };
        assert_eq!(strided(&model.layer1), [1, 2]);
        assert_eq!(strided(&model.layer4), [1, 1]);
        let first_shortcuts = [&model.layer1, &model.layer2, &model.layer3, &model.layer4]
            .map(|layer| (layer[0].shortcut.is_some(), layer[1].shortcut.is_some()));
        assert_eq!(first_shortcuts, [(true, false); 4]);
        assert!(model.layer3[1].subsample.is_some() && model.layer4[1].subsample.is_none());
        let logits = model.forward(Tensor::zeros([1, 3, 64, 64], &Device::flex()));
        assert_eq!(logits.dims(), [1, 3]);
    }
}
