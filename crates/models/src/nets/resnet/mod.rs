//! ResNet (He et al. 2015) in torchvision's layout (`torchvision/models/resnet.py`, v1.5: a
//! bottleneck's stride on its 3x3) or keras.applications' (v1: on its first 1x1, with biases;
//! [`ResNetLayout`]), written as Burn users write models: Burn's layer names and configs, from
//! `towers_kernels::nn` (burn-towers' kernels where they apply). Its parameter paths are
//! torchvision's `state_dict` keys but for the batch norms' `gamma`/`beta` (`weight`, `bias`
//! there) and the shortcut's `downsample.conv`/`.bn` (`downsample.0`/`.1`), so torchvision's
//! state dicts load (`weights/resnet_torch_names.rs`); Keras's layer names are in
//! `weights/resnet_keras_names.rs`.
//!
//! - `mod.rs`: [`ResNet`], its stem, four stages of blocks and head, and [`ResNetConfig`].
//! - `layout.rs`: [`ResNetLayout`], and the convolutions and batch norms of each.
//! - `residual_block.rs`: [`ResidualBlock`], what a stage needs of its blocks.
//! - `basic_block.rs`, `bottleneck.rs`: the two blocks; `downsample.rs`: the shortcut.
//! - `v2.rs`: [`ResNetV2`], keras.applications' pre-activation ResNet (`ResNet50V2`), of
//!   `pre_act_bottleneck.rs`'s [`PreActBottleneck`]s.

mod basic_block;
mod bottleneck;
mod downsample;
mod layout;
mod pre_act_bottleneck;
mod residual_block;
mod v2;

use burn::config::Config;
use burn::module::Module;
use burn::nn::PaddingConfig2d;
use burn::tensor::{Device, Tensor};
use towers_kernels::nn::conv::Conv2d;
use towers_kernels::nn::pool::{
    AdaptiveAvgPool2d, AdaptiveAvgPool2dConfig, MaxPool2d, MaxPool2dConfig,
};
use towers_kernels::nn::{BatchNorm, Linear};

pub use basic_block::BasicBlock;
pub use bottleneck::Bottleneck;
pub use downsample::{Downsample, DownsampleConfig};
pub use layout::ResNetLayout;
pub use pre_act_bottleneck::{PreActBottleneck, PreActBottleneckConfig};
pub use residual_block::ResidualBlock;
pub use v2::{ResNetV2, ResNetV2Config};

use crate::nets::features_classifier;

/// The blocks of each stage of ResNet-50 and ResNet-34 (of [`BasicBlock`]s), and of
/// keras.applications' `ResNet50` and `ResNet50V2`.
pub(crate) const STAGES_50: [usize; 4] = [3, 4, 6, 3];
/// Panics unless each of the four stages `blocks` lists has a block.
pub(crate) fn assert_stages_have_blocks(blocks: [usize; 4]) {
    assert!(
        blocks.iter().all(|&b| b > 0),
        "a ResNet has at least one block in each of its four stages, not {blocks:?}"
    );
}

/// The blocks of each stage of ResNet-101 (`ResNet101`, `ResNet101V2`).
pub(crate) const STAGES_101: [usize; 4] = [3, 4, 23, 3];
/// The blocks of each stage of ResNet-152 (`ResNet152`, `ResNet152V2`).
pub(crate) const STAGES_152: [usize; 4] = [3, 8, 36, 3];

/// ResNet-18 and -34: [`BasicBlock`]s.
pub type ResNet18 = ResNet<BasicBlock>;
/// ResNet-50, -101 and -152: [`Bottleneck`]s.
pub type ResNet50 = ResNet<Bottleneck>;

/// A ResNet's depth and head.
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct ResNetConfig {
    /// The blocks of each of the four stages: `[2, 2, 2, 2]` for ResNet-18, `[3, 4, 6, 3]` for
    /// ResNet-34 and -50, `[3, 4, 23, 3]` for ResNet-101.
    pub blocks: [usize; 4],
    /// The classes of the logits (torchvision's ImageNet models: 1000).
    #[config(default = 1000)]
    pub num_classes: usize,
    /// The side of the square images the model expects (any side of 32 or more works; this is
    /// what the trainer and the benchmarks feed it).
    #[config(default = 224)]
    pub image_size: usize,
    /// L2 penalty on every weight, bias and batch-norm scale and offset, added to the loss
    /// (torchvision's reference recipe: 1e-4, there in its optimizer).
    #[config(default = 0.0)]
    pub weight_decay: f64,
    /// torchvision's layout (its `resnet50`) or keras.applications' (its `ResNet50`).
    #[config(default = "ResNetLayout::Torchvision")]
    pub layout: ResNetLayout,
}

impl ResNetConfig {
    /// ResNet-18's stages (with [`BasicBlock`]s: [`ResNet18`]).
    pub fn resnet18(num_classes: usize) -> Self {
        Self::new([2, 2, 2, 2]).with_num_classes(num_classes)
    }

    /// ResNet-34's stages (with [`BasicBlock`]s: [`ResNet18`]).
    pub fn resnet34(num_classes: usize) -> Self {
        Self::new(STAGES_50).with_num_classes(num_classes)
    }

    /// ResNet-50's stages (with [`Bottleneck`]s: [`ResNet50`]).
    pub fn resnet50(num_classes: usize) -> Self {
        Self::new(STAGES_50).with_num_classes(num_classes)
    }

    /// ResNet-101's stages (with [`Bottleneck`]s: [`ResNet50`]).
    pub fn resnet101(num_classes: usize) -> Self {
        Self::new(STAGES_101).with_num_classes(num_classes)
    }

    /// ResNet-152's stages (with [`Bottleneck`]s: [`ResNet50`]).
    pub fn resnet152(num_classes: usize) -> Self {
        Self::new(STAGES_152).with_num_classes(num_classes)
    }

    /// keras.applications' `ResNet50` (`ResNetLayout::Keras`), whose weights Keras's files
    /// hold ([`KerasSource`](crate::weights::KerasSource)).
    pub fn keras_resnet50(num_classes: usize) -> Self {
        Self::resnet50(num_classes).with_layout(ResNetLayout::Keras)
    }

    /// A new ResNet of `Block`s, initialized as its layout's library initializes it
    /// ([`ResNetLayout`]; batch norms at scale 1 and offset 0).
    ///
    /// Panics if a stage has no block (Keras refuses those too): the logits' input would not
    /// be the last stage's channels.
    pub fn init<Block: ResidualBlock>(&self, device: &Device) -> ResNet<Block> {
        assert_stages_have_blocks(self.blocks);
        let layout = self.layout;
        let mut channels = 64;
        let mut stage = |planes: usize, blocks: usize, stride: usize| -> Vec<Block> {
            (0..blocks)
                .map(|i| {
                    let block_stride = if i == 0 { stride } else { 1 };
                    let block =
                        Block::new_in_layout(channels, planes, block_stride, layout, device);
                    channels = planes * Block::EXPANSION;
                    block
                })
                .collect()
        };
        let [b1, b2, b3, b4] = self.blocks;
        let (layer1, layer2, layer3, layer4) = (
            stage(64, b1, 1),
            stage(128, b2, 2),
            stage(256, b3, 2),
            stage(512, b4, 2),
        );
        ResNet {
            conv1: layout.conv([3, 64], 7, 2, device),
            bn1: layout.batch_norm(64, device),
            maxpool: MaxPool2dConfig::new([3, 3])
                .with_strides([2, 2])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .init(),
            layer1,
            layer2,
            layer3,
            layer4,
            avgpool: AdaptiveAvgPool2dConfig::new([1, 1]).init(),
            fc: layout.classifier(512 * Block::EXPANSION, self.num_classes, device),
            num_classes: self.num_classes,
            image_size: self.image_size,
            weight_decay: self.weight_decay,
        }
    }
}

/// A ResNet: stem (7x7/2 convolution, batch norm, ReLU, 3x3/2 max pool padded by 1: Keras's
/// zeros pad as the pool's own padding would, after a ReLU), four stages of
/// `Block`s (64, 128, 256, 512 planes; the last three start at stride 2), global average pool,
/// a dense layer to the logits.
#[derive(Module, Debug)]
pub struct ResNet<Block> {
    /// The stem's 7x7/2 convolution.
    pub conv1: Conv2d,
    /// Its batch norm.
    pub bn1: BatchNorm,
    /// The stem's 3x3/2 max pool (padded by 1).
    pub maxpool: MaxPool2d,
    /// 64 planes.
    pub layer1: Vec<Block>,
    /// 128 planes, from stride 2.
    pub layer2: Vec<Block>,
    /// 256 planes, from stride 2.
    pub layer3: Vec<Block>,
    /// 512 planes, from stride 2.
    pub layer4: Vec<Block>,
    /// Global average pool.
    pub avgpool: AdaptiveAvgPool2d,
    /// The logits.
    pub fc: Linear,
    num_classes: usize,
    image_size: usize,
    weight_decay: f64,
}

impl<Block: ResidualBlock> ResNet<Block> {
    /// The features before the head: `[n, 512 * EXPANSION]`.
    fn features(&self, images: Tensor<4>) -> Tensor<2> {
        let x = self.bn1.forward_relu(self.conv1.forward(images));
        let mut x = self.maxpool.forward(x);
        for block in self
            .layer1
            .iter()
            .chain(&self.layer2)
            .chain(&self.layer3)
            .chain(&self.layer4)
        {
            x = block.forward(x);
        }
        self.avgpool.forward(x).flatten(1, 3)
    }
}

features_classifier!(ResNet<Block>, Block: ResidualBlock);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "at least one block in each of its four stages, not [2, 2, 2, 0]")]
    fn a_stage_without_blocks_is_refused() {
        ResNetConfig::new([2, 2, 2, 0]).init::<BasicBlock>(&Device::flex());
    }
}
