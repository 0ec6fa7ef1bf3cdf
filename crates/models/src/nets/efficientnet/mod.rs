//! EfficientNet B0-B7 (Tan & Le 2019) in torchvision's layout (`efficientnet_b0` ..) or
//! keras.applications' (`EfficientNetB0` ..; [`EfficientNetLayout`]), written as Burn users
//! write models, of `towers_kernels::nn`'s layers. Its parameters have readable paths
//! (`stages.2.1.depthwise.conv.weight`); torchvision's `state_dict` keys and Keras's layer
//! names are in `weights/efficientnet_torch_names.rs` and `weights/efficientnet_keras_names.rs`.
//!
//! - `mod.rs`: [`EfficientNet`], its stem, stages of blocks and head, and
//!   [`EfficientNetConfig`] with the eight variants.
//! - `layout.rs`: [`EfficientNetLayout`], and the convolutions, batch norms and head of each.
//! - `input_normalization.rs`: [`InputNormalization`], Keras's layers before the stem.
//! - `mb_conv.rs`: [`MbConv`], the block.
//! - `squeeze_excitation.rs`: [`SqueezeExcitation`], the block's channel gate (MobileNetV3's
//!   too).

mod input_normalization;
mod layout;
mod mb_conv;
mod squeeze_excitation;

use burn::config::Config;
use burn::module::Module;
use burn::nn::{Dropout, DropoutConfig};
use burn::tensor::{Device, Tensor};
use towers_kernels::nn::Linear;
use towers_kernels::nn::pool::{AdaptiveAvgPool2d, AdaptiveAvgPool2dConfig};
use towers_kernels::silu;

pub use input_normalization::{InputNormalization, InputNormalizationConfig};
pub use layout::EfficientNetLayout;
pub use mb_conv::{MbConv, MbConvConfig};
pub use squeeze_excitation::{SqueezeExcitation, SqueezeExcitationConfig, SqueezeGate};

use crate::nets::{ConvBn, divisible_by_8, features_classifier};

/// One stage of EfficientNet-B0, as both libraries list them.
struct Stage {
    expansion: usize,
    kernel: usize,
    stride: usize,
    channels_out: usize,
    blocks: usize,
}

const fn stage(expansion: usize, kernel: usize, stride: usize, out: usize, blocks: usize) -> Stage {
    Stage {
        expansion,
        kernel,
        stride,
        channels_out: out,
        blocks,
    }
}

/// EfficientNet-B0's seven stages; the larger variants widen and deepen them.
const STAGES: [Stage; 7] = [
    stage(1, 3, 1, 16, 1),
    stage(6, 3, 2, 24, 2),
    stage(6, 5, 2, 40, 2),
    stage(6, 3, 2, 80, 3),
    stage(6, 5, 1, 112, 3),
    stage(6, 5, 2, 192, 4),
    stage(6, 3, 1, 320, 1),
];

/// The stages: the last convolution follows them in torchvision's `features`.
pub(crate) const EFFICIENTNET_STAGES: usize = STAGES.len();

/// The blocks of each stage of each variant B0-B7, as both libraries deepen them.
pub(crate) fn variants_stage_blocks() -> impl Iterator<Item = Vec<usize>> {
    VARIANTS.iter().map(|&(_, depth, _, _)| {
        let config = EfficientNetConfig::new().with_depth(depth);
        STAGES
            .iter()
            .map(|stage| config.blocks(stage.blocks))
            .collect()
    })
}

/// Whether the blocks of `stage` have an expanding convolution (all but the first stage's),
/// or `None` past the last stage.
pub(crate) fn stage_expands(stage: usize) -> Option<bool> {
    STAGES.get(stage).map(|stage| stage.expansion != 1)
}

/// The stem's channels of B0.
const STEM: usize = 32;
/// Keras's last convolution's channels of B0 (torchvision's: four times the last stage's).
const TOP: usize = 1280;

/// Each variant's width and depth coefficients, image side and dropout before the logits
/// (`EfficientNetB0` .. `B7` and `efficientnet_b0` .. `b7` alike).
const VARIANTS: [(f64, f64, usize, f64); 8] = [
    (1.0, 1.0, 224, 0.2),
    (1.0, 1.1, 240, 0.2),
    (1.1, 1.2, 260, 0.3),
    (1.2, 1.4, 300, 0.3),
    (1.4, 1.8, 380, 0.4),
    (1.6, 2.2, 456, 0.4),
    (1.8, 2.6, 528, 0.5),
    (2.0, 3.1, 600, 0.5),
];

/// An EfficientNet's scaling, head and layout; [`EfficientNetConfig::new`] is B0 in
/// torchvision's layout, [`EfficientNetConfig::b`] any of the eight.
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct EfficientNetConfig {
    /// The classes of the logits (the ImageNet models: 1000).
    #[config(default = 1000)]
    pub num_classes: usize,
    /// The width coefficient: every layer's channels scaled and rounded to a multiple of 8.
    #[config(default = 1.0)]
    pub width: f64,
    /// The depth coefficient: every stage's blocks scaled and rounded up.
    #[config(default = 1.0)]
    pub depth: f64,
    /// The side of the square images the model expects (any side of 32 or more works).
    #[config(default = 224)]
    pub image_size: usize,
    /// The dropout before the logits.
    #[config(default = 0.2)]
    pub dropout: f64,
    /// The last block's probability of skipping a training image; block `b` of `B` skips
    /// with `stochastic_depth · b / B` (both libraries' 0.2).
    #[config(default = 0.2)]
    pub stochastic_depth: f64,
    /// Batch norms of TF's epsilon 1e-3 and momentum 0.01 (Keras's 0.99) in torchvision's
    /// layout: its B5-B7 ([`b`](Self::b) sets it). Keras's layout always has them.
    #[config(default = false)]
    pub tf_batch_norms: bool,
    /// In Keras's layout, whether the network was built for the ImageNet weights
    /// ([`InputNormalizationConfig::imagenet_rescaling`]): keras.applications' files of
    /// weights only do not say, and a network built with `weights=None` and trained from
    /// scratch has not. The default, true, is the ImageNet network's and its fine-tuned
    /// models'. `matching_keras_file` takes it from a Keras file that keeps its model's
    /// configuration.
    #[config(default = true)]
    pub imagenet_rescaling: bool,
    /// L2 penalty on every weight, bias and batch-norm scale and offset, added to the loss
    /// (the paper's recipe: 1e-5).
    #[config(default = 0.0)]
    pub weight_decay: f64,
    /// torchvision's layout or keras.applications'.
    #[config(default = "EfficientNetLayout::Torchvision")]
    pub layout: EfficientNetLayout,
}

impl EfficientNetConfig {
    /// EfficientNet-B`variant` (0 to 7) in torchvision's layout: its width, depth, image side,
    /// dropout and batch-norm constants. Panics past 7.
    pub fn b(variant: usize) -> Self {
        let (width, depth, image_size, dropout) = *VARIANTS
            .get(variant)
            .unwrap_or_else(|| panic!("EfficientNet has variants B0 to B7, not B{variant}"));
        Self::new()
            .with_width(width)
            .with_depth(depth)
            .with_image_size(image_size)
            .with_dropout(dropout)
            .with_tf_batch_norms(variant >= 5)
    }

    /// keras.applications' `EfficientNetB0` of `num_classes` (`EfficientNetLayout::Keras`,
    /// built for the ImageNet weights), whose weights Keras's files hold
    /// ([`KerasSource`](crate::weights::KerasSource)). Other variants:
    /// `EfficientNetConfig::b(3).with_layout(EfficientNetLayout::Keras)`.
    pub fn keras(num_classes: usize) -> Self {
        Self::new()
            .with_num_classes(num_classes)
            .with_layout(EfficientNetLayout::Keras)
    }

    /// `channels` at this width, rounded as both libraries round (`round_filters`,
    /// `_make_divisible`, MobileNetV2's rounding): to the nearest multiple of 8, never below 8
    /// nor more than 10% down.
    fn scaled(&self, channels: usize) -> usize {
        divisible_by_8(channels as f64 * self.width)
    }

    /// A stage's blocks at this depth, rounded up as both libraries round.
    fn blocks(&self, blocks: usize) -> usize {
        (blocks as f64 * self.depth).ceil() as usize
    }

    /// A new EfficientNet, initialized as its layout's library initializes it.
    ///
    /// Panics unless the depth coefficient leaves each stage a block (is above 0: Keras
    /// refuses stages without blocks too).
    pub fn init(&self, device: &Device) -> EfficientNet {
        assert!(
            self.depth > 0.0,
            "an EfficientNet's depth coefficient leaves each stage at least one block: above 0, \
             not {}",
            self.depth
        );
        let layout = self.layout;
        let keras = layout == EfficientNetLayout::Keras;
        let batch_norm = layout.batch_norm_constants(self.tf_batch_norms);
        let mut channels = self.scaled(STEM);
        let stem = layout.conv_bn([3, channels], 3, 2, false, batch_norm, device);
        let total: usize = STAGES.iter().map(|stage| self.blocks(stage.blocks)).sum();
        let mut stages = Vec::new();
        let mut block_index = 0;
        for stage in &STAGES {
            let out = self.scaled(stage.channels_out);
            let mut blocks = Vec::new();
            for i in 0..self.blocks(stage.blocks) {
                let skip = self.stochastic_depth * block_index as f64 / total as f64;
                let block = MbConvConfig::new([channels, out], stage.expansion, stage.kernel)
                    .with_stride(if i == 0 { stage.stride } else { 1 })
                    .with_stochastic_depth(skip)
                    .with_batch_norm(batch_norm)
                    .with_layout(layout)
                    .init(device);
                blocks.push(block);
                channels = out;
                block_index += 1;
            }
            stages.push(blocks);
        }
        let top = match keras {
            true => self.scaled(TOP),
            false => 4 * channels,
        };
        let input =
            InputNormalizationConfig::new().with_imagenet_rescaling(self.imagenet_rescaling);
        EfficientNet {
            input_norm: keras.then(|| input.init(device)),
            stem,
            stages,
            top: layout.conv_bn([channels, top], 1, 1, false, batch_norm, device),
            avgpool: AdaptiveAvgPool2dConfig::new([1, 1]).init(),
            dropout: DropoutConfig::new(self.dropout).init(),
            fc: layout.classifier(top, self.num_classes, device),
            num_classes: self.num_classes,
            image_size: self.image_size,
            weight_decay: self.weight_decay,
            layout,
        }
    }
}

/// EfficientNet: in Keras's layout its input normalization, then a 3x3/2 convolution, the
/// stages of [`MbConv`] blocks, a 1x1 convolution (each with a batch norm and SiLU), global
/// average pool, dropout, a dense layer to the logits.
#[derive(Module, Debug)]
pub struct EfficientNet {
    /// Keras's `Rescaling`, `Normalization` (`normalization`) and ImageNet rescaling; none in
    /// torchvision's layout, whose images are normalized before.
    pub input_norm: Option<InputNormalization>,
    /// The stem's 3x3/2 convolution (Keras's `stem_conv`, torchvision's `features.0`).
    pub stem: ConvBn,
    /// The stages' blocks (Keras's `block1a` .. `block7a` at B0; torchvision's
    /// `features.1` .. `features.7`).
    pub stages: Vec<Vec<MbConv>>,
    /// The 1x1 convolution to the features (`top_conv`, `features.8` at B0).
    pub top: ConvBn,
    /// Global average pool.
    pub avgpool: AdaptiveAvgPool2d,
    /// Before the logits.
    pub dropout: Dropout,
    /// The logits (`predictions`, `classifier.1`).
    pub fc: Linear,
    num_classes: usize,
    image_size: usize,
    weight_decay: f64,
    /// Whose network this is: the weights of the other library's do not fit it, though their
    /// shapes do.
    #[module(skip)]
    layout: EfficientNetLayout,
}

impl EfficientNet {
    /// Whose EfficientNet this is.
    pub fn layout(&self) -> EfficientNetLayout {
        self.layout
    }

    /// The features before the logits' dense layer: `[n, 1280]` (B0), after the dropout.
    fn features(&self, images: Tensor<4>) -> Tensor<2> {
        let images = match &self.input_norm {
            Some(norm) => norm.forward(images),
            None => images,
        };
        let mut x = silu(self.stem.forward(images));
        for block in self.stages.iter().flatten() {
            x = block.forward(x);
        }
        let x = silu(self.top.forward(x));
        let pooled = self.avgpool.forward(x).flatten(1, 3);
        crate::layers::dropout(&self.dropout, pooled)
    }
}

features_classifier!(EfficientNet);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nets::ImageClassifier;
    use crate::params::count_params;

    /// torchvision's `sum(p.numel() for p in efficientnet_bN().parameters())`, equal to Keras's
    /// `EfficientNetBN(weights=None)`'s trainable count for every N (torchvision 0.29.2,
    /// Keras 3.15.1); Keras's B0 keeps 42,023 values more: two per batch-norm channel, and
    /// its `Normalization`'s mean, variance (ours) and count (not ours).
    #[test]
    fn parameter_counts_are_the_libraries() {
        let counts = [
            5_288_548, 7_794_184, 9_109_994, 12_233_232, 19_341_616, 30_389_784, 43_040_704,
            66_347_960,
        ];
        for (variant, expected) in counts.into_iter().enumerate() {
            let config = EfficientNetConfig::b(variant);
            let count = count_params(&config.init(&Device::flex()));
            assert_eq!(count.trainable, expected, "B{variant}");
        }
        let keras = count_params(&EfficientNetConfig::keras(1000).init(&Device::flex()));
        assert_eq!(keras.trainable, 5_288_548);
        assert_eq!(keras.moving, 42_023 - 1);
    }

    /// B0: 16 blocks, strides 224 to 112 (stem), 56, 28, 14, 14 (no stride), 7, 7; residuals
    /// where the shape is kept (9 of 16), each skipping more often than the one before; B7's
    /// stages deepened 3.1 times, rounded up.
    #[test]
    fn stages_strides_and_skips_are_efficientnets() {
        let model = EfficientNetConfig::new()
            .with_num_classes(3)
            .init(&Device::flex());
        let blocks: Vec<&MbConv> = model.stages.iter().flatten().collect();
        let strides: Vec<usize> = blocks.iter().map(|b| b.depthwise.conv.stride[0]).collect();
        assert_eq!(strides, [1, 2, 1, 2, 1, 2, 1, 1, 1, 1, 1, 2, 1, 1, 1, 1]);
        let kernels: Vec<usize> = blocks
            .iter()
            .map(|b| b.depthwise.conv.kernel_size[0])
            .collect();
        assert_eq!(kernels, [3, 3, 3, 5, 5, 3, 3, 3, 5, 5, 5, 5, 5, 5, 5, 3]);
        let residual: Vec<&&MbConv> = blocks.iter().filter(|b| b.residual).collect();
        assert_eq!(residual.len(), 9);
        assert_eq!(blocks[15].stochastic_depth.prob, 0.2 * 15.0 / 16.0);
        assert!(blocks[0].expand.is_none() && blocks[1].expand.is_some());
        let logits = model.forward(Tensor::zeros([1, 3, 64, 64], &Device::flex()));
        assert_eq!(logits.dims(), [1, 3]);
        let b7 = EfficientNetConfig::b(7).init(&Device::flex());
        let depths: Vec<usize> = b7.stages.iter().map(Vec::len).collect();
        assert_eq!(depths, [4, 7, 7, 10, 10, 13, 4]);
    }

    #[test]
    #[should_panic(expected = "depth coefficient leaves each stage at least one block")]
    fn a_depth_without_blocks_is_refused() {
        EfficientNetConfig::new()
            .with_depth(0.0)
            .init(&Device::flex());
    }
}
