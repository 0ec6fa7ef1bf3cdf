//! MobileNetV2 (Sandler et al. 2018) in torchvision's layout (`mobilenet_v2`) or
//! keras.applications' (`MobileNetV2`; [`MobileNetLayout`]), written as Burn users write
//! models, of `towers_kernels::nn`'s layers. Its parameters have readable paths
//! (`blocks.3.depthwise.conv.weight`); torchvision's `state_dict` keys and Keras's layer names
//! are in `weights/mobilenet_torch_names.rs` and `weights/mobilenet_keras_names.rs`.
//!
//! - `mod.rs`: [`MobileNetV2`], its stem, 17 blocks and head, and [`MobileNetV2Config`].
//! - `layout.rs`: [`MobileNetLayout`], and the convolutions, batch norms and head of each.
//! - `conv_bn.rs`: [`ConvBn`], a convolution and its batch norm.
//! - `inverted_residual.rs`: [`InvertedResidual`], the block.

mod conv_bn;
mod inverted_residual;
mod layout;

use burn::config::Config;
use burn::module::Module;
use burn::nn::{Dropout, DropoutConfig};
use burn::tensor::{Device, Tensor};
use towers_kernels::nn::Linear;
use towers_kernels::nn::pool::{AdaptiveAvgPool2d, AdaptiveAvgPool2dConfig};

pub use conv_bn::{ConvBn, ConvBnConfig};
pub use inverted_residual::{InvertedResidual, InvertedResidualConfig};
pub use layout::MobileNetLayout;

use crate::nets::features_classifier;

/// MobileNetV2's stages, as both libraries list them: expansion, output channels (at width
/// 1), blocks, the first block's stride.
const STAGES: [(usize, usize, usize, usize); 7] = [
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
];

/// MobileNetV2's blocks, of all stages: 17.
pub(crate) const MOBILENET_V2_BLOCKS: usize = {
    let (mut blocks, mut stage) = (0, 0);
    while stage < STAGES.len() {
        blocks += STAGES[stage].2;
        stage += 1;
    }
    blocks
};

/// The stem's channels at width 1.
const STEM: usize = 32;
/// The last convolution's channels at width 1 and below.
const LAST: usize = 1280;

/// A MobileNetV2's width, head and layout.
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct MobileNetV2Config {
    /// The classes of the logits (the ImageNet models: 1000).
    #[config(default = 1000)]
    pub num_classes: usize,
    /// The width multiplier (Keras's `alpha`, torchvision's `width_mult`): every layer's
    /// channels scaled and rounded to a multiple of 8, the last convolution's 1280 only
    /// widened. Keras ships ImageNet weights for 0.35, 0.5, 0.75, 1.0, 1.3 and 1.4.
    #[config(default = 1.0)]
    pub width: f64,
    /// The side of the square images the model expects (any side of 32 or more works).
    #[config(default = 224)]
    pub image_size: usize,
    /// L2 penalty on every weight, bias and batch-norm scale and offset, added to the loss
    /// (torchvision's reference recipe: 4e-5, there in its optimizer).
    #[config(default = 0.0)]
    pub weight_decay: f64,
    /// torchvision's layout or keras.applications'.
    #[config(default = "MobileNetLayout::Torchvision")]
    pub layout: MobileNetLayout,
}

impl MobileNetV2Config {
    /// keras.applications' `MobileNetV2` of `num_classes` (`MobileNetLayout::Keras`), whose
    /// weights Keras's files hold ([`KerasSource`](crate::weights::KerasSource)).
    pub fn keras(num_classes: usize) -> Self {
        Self::new()
            .with_num_classes(num_classes)
            .with_layout(MobileNetLayout::Keras)
    }

    /// `channels` at this width, rounded as both libraries' `_make_divisible` rounds: to the
    /// nearest multiple of 8, never below 8 nor more than 10% down.
    fn scaled(&self, channels: usize) -> usize {
        divisible_by_8(channels as f64 * self.width)
    }

    /// A block's output channels at this width: [`scaled`](Self::scaled), but Keras truncates
    /// the scaled count to an integer first (`int(filters * alpha)`).
    fn block_channels(&self, channels: usize) -> usize {
        let scaled = channels as f64 * self.width;
        divisible_by_8(match self.layout {
            MobileNetLayout::Keras => scaled.trunc(),
            _ => scaled,
        })
    }

    /// A new MobileNetV2, initialized as its layout's library initializes it.
    pub fn init(&self, device: &Device) -> MobileNetV2 {
        let layout = self.layout;
        let mut channels = self.scaled(STEM);
        let stem = ConvBnConfig::new([3, channels], 3)
            .with_stride(2)
            .with_layout(layout)
            .init(device);
        let mut blocks = Vec::new();
        for (expansion, out, count, stride) in STAGES {
            let out = self.block_channels(out);
            for i in 0..count {
                let block = InvertedResidualConfig::new([channels, out], expansion)
                    .with_stride(if i == 0 { stride } else { 1 })
                    .with_layout(layout)
                    .init(device);
                blocks.push(block);
                channels = out;
            }
        }
        let last = match self.width > 1.0 {
            true => self.scaled(LAST),
            false => LAST,
        };
        MobileNetV2 {
            stem,
            blocks,
            last_conv: ConvBnConfig::new([channels, last], 1)
                .with_layout(layout)
                .init(device),
            avgpool: AdaptiveAvgPool2dConfig::new([1, 1]).init(),
            dropout: DropoutConfig::new(layout.dropout()).init(),
            fc: layout.classifier(last, self.num_classes, device),
            num_classes: self.num_classes,
            image_size: self.image_size,
            weight_decay: self.weight_decay,
            layout,
        }
    }
}

/// `value` rounded to the nearest multiple of 8, but never below 8 nor more than 10% down
/// (`_make_divisible` of both libraries; the EfficientNets' `round_filters` too).
pub(crate) fn divisible_by_8(value: f64) -> usize {
    let rounded = (((value + 4.0) as usize) / 8 * 8).max(8);
    match (rounded as f64) < 0.9 * value {
        true => rounded + 8,
        false => rounded,
    }
}

/// MobileNetV2: a 3x3/2 convolution, 17 [`InvertedResidual`]s (the stages of `STAGES`), a 1x1
/// convolution (each with a batch norm and ReLU6), global average pool, dropout (torchvision's
/// layout), a dense layer to the logits.
#[derive(Module, Debug)]
pub struct MobileNetV2 {
    /// The stem's 3x3/2 convolution to 32 channels (Keras's `Conv1`, torchvision's
    /// `features.0`).
    pub stem: ConvBn,
    /// The 17 blocks (Keras's `expanded_conv`, `block_1` .. `block_16`; torchvision's
    /// `features.1` .. `features.17`).
    pub blocks: Vec<InvertedResidual>,
    /// The 1x1 convolution to 1280 channels (`Conv_1`, `features.18`).
    pub last_conv: ConvBn,
    /// Global average pool.
    pub avgpool: AdaptiveAvgPool2d,
    /// Before the logits: 0.2 in torchvision's layout, none in Keras's.
    pub dropout: Dropout,
    /// The logits (`predictions`, `classifier.1`).
    pub fc: Linear,
    num_classes: usize,
    image_size: usize,
    weight_decay: f64,
    /// Whose network this is: the weights of the other library's do not fit it, though their
    /// shapes do.
    #[module(skip)]
    layout: MobileNetLayout,
}

impl MobileNetV2 {
    /// Whose MobileNetV2 this is.
    pub fn layout(&self) -> MobileNetLayout {
        self.layout
    }

    /// The features before the logits' dense layer: `[n, 1280]` (at width 1), after the
    /// dropout.
    fn features(&self, images: Tensor<4>) -> Tensor<2> {
        let mut x = self.stem.forward_relu6(images);
        for block in &self.blocks {
            x = block.forward(x);
        }
        let x = self.last_conv.forward_relu6(x);
        let pooled = self.avgpool.forward(x).flatten(1, 3);
        crate::layers::dropout(&self.dropout, pooled)
    }
}

features_classifier!(MobileNetV2);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nets::ImageClassifier;
    use crate::params::count_params;

    /// Keras's `MobileNetV2(alpha, weights=None).count_params()` less its batch norms'
    /// moving statistics (`non_trainable_params`), and torchvision's
    /// `sum(p.numel() for p in mobilenet_v2(width_mult=w).parameters())` (Keras 3.15.1,
    /// torchvision 0.29.2).
    #[test]
    fn parameter_counts_are_the_libraries() {
        let count =
            |config: MobileNetV2Config| count_params(&config.init(&Device::flex())).trainable;
        assert_eq!(count(MobileNetV2Config::keras(1000)), 3_538_984 - 34_112);
        assert_eq!(count(MobileNetV2Config::new()), 3_504_872);
        assert_eq!(
            count(MobileNetV2Config::keras(1000).with_width(0.35)),
            1_677_128
        );
        assert_eq!(
            count(MobileNetV2Config::keras(1000).with_width(1.4)),
            6_108_776
        );
        assert_eq!(count(MobileNetV2Config::new().with_width(0.5)), 1_968_680);
        // Where Keras's truncation to an integer changes a block's channels (16, 32, 64 at
        // 0.56), the two libraries' networks differ.
        assert_eq!(
            count(MobileNetV2Config::keras(1000).with_width(0.56)),
            2_082_888
        );
        assert_eq!(count(MobileNetV2Config::new().with_width(0.56)), 2_130_056);
    }

    /// Each stride halves the side: 224 to 112 (stem), 56, 28, 14, 14 (no stride), 7, 7; the
    /// blocks add their input where they keep its shape (10 of the 17).
    #[test]
    fn strides_and_residuals_are_mobilenet_v2s() {
        let model = MobileNetV2Config::new()
            .with_num_classes(3)
            .init(&Device::flex());
        let strides: Vec<usize> = model
            .blocks
            .iter()
            .map(|b| b.depthwise.conv.stride[0])
            .collect();
        assert_eq!(strides, [1, 2, 1, 2, 1, 1, 2, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1]);
        let residuals = model.blocks.iter().filter(|b| b.residual).count();
        assert_eq!(residuals, 10);
        assert!(model.blocks[0].expand.is_none() && model.blocks[1].expand.is_some());
        let logits = model.forward(Tensor::zeros([1, 3, 64, 64], &Device::flex()));
        assert_eq!(logits.dims(), [1, 3]);
    }
}
