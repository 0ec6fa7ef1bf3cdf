//! MobileNetV3 (Howard et al. 2019), Large and Small, in torchvision's layout
//! (`mobilenet_v3_large`, `mobilenet_v3_small`) or keras.applications' (`MobileNetV3Large`,
//! `MobileNetV3Small`; [`MobileNetLayout`]), at width 1, written as Burn users write models, of
//! `towers_kernels::nn`'s layers. Its parameters have readable paths
//! (`blocks.3.se.reduce.weight`); torchvision's `state_dict` keys and Keras's layer names are
//! in `weights/mobilenet_v3_torch_names.rs` and `weights/mobilenet_v3_keras_names.rs`.
//!
//! - `mod.rs`: [`MobileNetV3`], its stem, blocks and head, and [`MobileNetV3Config`].
//! - `block.rs`: [`MobileNetV3Block`], the block.
//! - `units.rs`: its convolutions and batch norms in each layout, and its gates.

mod block;
mod units;

use burn::config::Config;
use burn::module::Module;
use burn::nn::{Dropout, DropoutConfig};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Tensor};
use towers_kernels::hard_swish;
use towers_kernels::nn::Linear;
use towers_kernels::nn::pool::{AdaptiveAvgPool2d, AdaptiveAvgPool2dConfig};

pub use block::{MobileNetV3Block, MobileNetV3BlockConfig};

use crate::nets::{ConvBn, MobileNetLayout, divisible_by_8, features_classifier};

/// One block as both libraries list it: the depthwise kernel's side, the expanded and output
/// channels, a squeeze-excitation gate or not, hard swish (else ReLU), the stride.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BlockSetting {
    kernel: usize,
    expanded: usize,
    out: usize,
    squeeze_excitation: bool,
    hard_swish: bool,
    stride: usize,
}

impl BlockSetting {
    /// Whether the block has a squeeze-excitation gate.
    pub(crate) fn has_squeeze_excitation(&self) -> bool {
        self.squeeze_excitation
    }
}

/// A [`BlockSetting`] in the papers' table order.
const fn block(
    k: usize,
    exp: usize,
    out: usize,
    se: bool,
    hs: bool,
    stride: usize,
) -> BlockSetting {
    BlockSetting {
        kernel: k,
        expanded: exp,
        out,
        squeeze_excitation: se,
        hard_swish: hs,
        stride,
    }
}

/// MobileNetV3-Large's 15 blocks (torchvision's `_mobilenet_v3_conf("mobilenet_v3_large")`).
const LARGE: [BlockSetting; 15] = [
    block(3, 16, 16, false, false, 1),
    block(3, 64, 24, false, false, 2),
    block(3, 72, 24, false, false, 1),
    block(5, 72, 40, true, false, 2),
    block(5, 120, 40, true, false, 1),
    block(5, 120, 40, true, false, 1),
    block(3, 240, 80, false, true, 2),
    block(3, 200, 80, false, true, 1),
    block(3, 184, 80, false, true, 1),
    block(3, 184, 80, false, true, 1),
    block(3, 480, 112, true, true, 1),
    block(3, 672, 112, true, true, 1),
    block(5, 672, 160, true, true, 2),
    block(5, 960, 160, true, true, 1),
    block(5, 960, 160, true, true, 1),
];

/// MobileNetV3-Small's 11 blocks.
const SMALL: [BlockSetting; 11] = [
    block(3, 16, 16, true, false, 2),
    block(3, 72, 24, false, false, 2),
    block(3, 88, 24, false, false, 1),
    block(5, 96, 40, true, true, 2),
    block(5, 240, 40, true, true, 1),
    block(5, 240, 40, true, true, 1),
    block(5, 120, 48, true, true, 1),
    block(5, 144, 48, true, true, 1),
    block(5, 288, 96, true, true, 2),
    block(5, 576, 96, true, true, 1),
    block(5, 576, 96, true, true, 1),
];

/// The stem's channels.
const STEM: usize = 16;

/// Which MobileNetV3.
#[derive(Config, Debug, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MobileNetV3Variant {
    /// MobileNetV3-Large: 15 blocks, 960 channels last, a hidden layer of 1280 in the head.
    Large,
    /// MobileNetV3-Small: 11 blocks, 576 channels last, a hidden layer of 1024.
    Small,
}

impl std::str::FromStr for MobileNetV3Variant {
    type Err = String;

    /// `large` or `small`, as a command line names them.
    fn from_str(name: &str) -> Result<Self, String> {
        match name {
            "large" => Ok(Self::Large),
            "small" => Ok(Self::Small),
            other => Err(format!("`{other}` is no MobileNetV3: `large` or `small`")),
        }
    }
}

impl MobileNetV3Variant {
    /// Its blocks.
    pub(crate) fn blocks(self) -> &'static [BlockSetting] {
        match self {
            Self::Large => &LARGE,
            Self::Small => &SMALL,
        }
    }

    /// The head's hidden features.
    fn hidden(self) -> usize {
        match self {
            Self::Large => 1280,
            Self::Small => 1024,
        }
    }
}

/// A MobileNetV3's variant, head and layout.
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct MobileNetV3Config {
    /// Large or Small.
    pub variant: MobileNetV3Variant,
    /// The classes of the logits (the ImageNet models: 1000).
    #[config(default = 1000)]
    pub num_classes: usize,
    /// The side of the square images the model expects (any side of 32 or more works).
    #[config(default = 224)]
    pub image_size: usize,
    /// The width multiplier (Keras's `alpha`, torchvision's `width_mult`), the channels rounded
    /// to multiples of 8 as each library rounds them: torchvision scales every layer's
    /// channels; Keras keeps the stem's 16, scales the blocks' outputs, expands each block's
    /// input by the block's ratio, and widens the hidden layer only above 1. Keras ships
    /// ImageNet weights for 0.75 and 1.
    #[config(default = 1.0)]
    pub width: f64,
    /// Keras's "minimalistic" MobileNetV3 (`minimalistic=True`): every depthwise kernel 3x3,
    /// ReLU everywhere, no squeeze-excitation gates. Keras ships ImageNet weights for it at
    /// width 1.
    #[config(default = false)]
    pub minimalistic: bool,
    /// The head's hidden layer (Keras's 1x1 `conv_2`, torchvision's `classifier.0`) and its
    /// activation. Without it the dropout and the logits take the pooled features, as in the
    /// transfer models Keras users build on the network without its top
    /// (`include_top=False`, pooling, then a `Dense`). `matching_keras_file` builds a Keras
    /// file's.
    #[config(default = true)]
    pub hidden_layer: bool,
    /// The dropout before the logits (both libraries' 0.2).
    #[config(default = 0.2)]
    pub dropout: f64,
    /// L2 penalty on every weight, bias and batch-norm scale and offset, added to the loss
    /// (torchvision's reference recipe: 1e-5, there in its optimizer).
    #[config(default = 0.0)]
    pub weight_decay: f64,
    /// torchvision's layout or keras.applications'. In Keras's, the network takes pixels in
    /// `[0, 255]` and scales them to `[-1, 1]` itself (Keras's `include_preprocessing`).
    #[config(default = "MobileNetLayout::Torchvision")]
    pub layout: MobileNetLayout,
}

impl MobileNetV3Config {
    /// torchvision's `mobilenet_v3_large`.
    pub fn large() -> Self {
        Self::new(MobileNetV3Variant::Large)
    }

    /// torchvision's `mobilenet_v3_small`.
    pub fn small() -> Self {
        Self::new(MobileNetV3Variant::Small)
    }

    /// A new MobileNetV3, initialized as its layout's library initializes it.
    pub fn init(&self, device: &Device) -> MobileNetV3 {
        let layout = self.layout;
        let stem = self.stem_channels();
        let (blocks, channels) = self.blocks(stem, device);
        let last = 6 * channels;
        // Initialized in this order, the network's from before the head could go without its
        // hidden layer: a seed gives the same weights.
        let stem = units::conv_bn(layout, [3, stem], 3, [2, 1], device);
        let last_conv = units::conv_bn(layout, [channels, last], 1, [1, 1], device);
        let (hidden, fc) = self.head(last, device);
        MobileNetV3 {
            stem,
            blocks,
            last_conv,
            avgpool: AdaptiveAvgPool2dConfig::new([1, 1]).init(),
            hidden,
            dropout: DropoutConfig::new(self.dropout).init(),
            fc,
            hard_swish: !self.minimalistic,
            num_classes: self.num_classes,
            image_size: self.image_size,
            weight_decay: self.weight_decay,
            layout,
        }
    }

    /// The blocks after a stem of `stem` channels, and their output's channels.
    fn blocks(&self, stem: usize, device: &Device) -> (Vec<MobileNetV3Block>, usize) {
        let mut blocks = Vec::new();
        let (mut channels, mut channels_at_1) = (stem, STEM);
        for setting in self.variant.blocks() {
            let expanded = self.expanded(channels, channels_at_1, setting.expanded);
            let out = divisible_by_8(setting.out as f64 * self.width);
            let kernel = if self.minimalistic { 3 } else { setting.kernel };
            let block = MobileNetV3BlockConfig::new([channels, out], expanded, kernel)
                .with_stride(setting.stride)
                .with_squeeze_excitation(setting.squeeze_excitation && !self.minimalistic)
                .with_hard_swish(setting.hard_swish && !self.minimalistic)
                .with_layout(self.layout)
                .init(device);
            blocks.push(block);
            (channels, channels_at_1) = (out, setting.out);
        }
        (blocks, channels)
    }

    /// The hidden layer (if built with one) and the logits, on `pooled` features.
    fn head(&self, pooled: usize, device: &Device) -> (Option<Linear>, Linear) {
        let layout = self.layout;
        let hidden = self.hidden_layer.then(|| self.hidden_features());
        let hidden_layer = hidden.map(|features| layout.classifier(pooled, features, device));
        let fc = layout.classifier(hidden.unwrap_or(pooled), self.num_classes, device);
        (hidden_layer, fc)
    }

    /// The stem's channels: torchvision scales them, Keras keeps 16.
    fn stem_channels(&self) -> usize {
        match self.layout {
            MobileNetLayout::Keras => STEM,
            _ => divisible_by_8(STEM as f64 * self.width),
        }
    }

    /// A block's expanded channels, of `expanded_at_1` at width 1, whose input has `channels`
    /// (`channels_at_1` at width 1): torchvision scales `expanded_at_1`, Keras its input by the
    /// block's ratio (`_depth(infilters * expansion)`).
    fn expanded(&self, channels: usize, channels_at_1: usize, expanded_at_1: usize) -> usize {
        match self.layout {
            MobileNetLayout::Keras if expanded_at_1 == channels_at_1 => channels,
            MobileNetLayout::Keras => {
                let ratio = expanded_at_1 as f64 / channels_at_1 as f64;
                divisible_by_8(channels as f64 * ratio)
            }
            _ => divisible_by_8(expanded_at_1 as f64 * self.width),
        }
    }

    /// The head's hidden features: torchvision scales them, Keras only widens them above 1.
    fn hidden_features(&self) -> usize {
        let hidden = self.variant.hidden();
        match (self.layout, self.width > 1.0) {
            (MobileNetLayout::Keras, false) => hidden,
            _ => divisible_by_8(hidden as f64 * self.width),
        }
    }
}

/// MobileNetV3: a 3x3/2 convolution, the variant's [`MobileNetV3Block`]s, a 1x1 convolution
/// to six times the last block's channels (each with a batch norm; the convolutions' hard
/// swish), global average pool, a hidden dense layer with hard swish (unless built without),
/// dropout, the logits.
#[derive(Module, Debug)]
pub struct MobileNetV3 {
    /// The stem's 3x3/2 convolution to 16 channels (Keras's `conv`, torchvision's
    /// `features.0`).
    pub stem: ConvBn,
    /// The blocks (Keras's `expanded_conv`, `expanded_conv_1`, ...; torchvision's
    /// `features.1`, ...).
    pub blocks: Vec<MobileNetV3Block>,
    /// The 1x1 convolution to 960 (Large) or 576 (Small) channels (`conv_1`, torchvision's
    /// last `features`).
    pub last_conv: ConvBn,
    /// Global average pool.
    pub avgpool: AdaptiveAvgPool2d,
    /// The head's hidden layer, 1280 (Large) or 1024 (Small) features (Keras's 1x1 `conv_2`
    /// with a bias, torchvision's `classifier.0`); none in a network built without
    /// ([`MobileNetV3Config::hidden_layer`]).
    pub hidden: Option<Linear>,
    /// Before the logits.
    pub dropout: Dropout,
    /// The logits (Keras's 1x1 `logits`, torchvision's `classifier.3`).
    pub fc: Linear,
    /// Whether the stem, the last convolution and the hidden layer end in hard swish (else
    /// ReLU: Keras's minimalistic network).
    hard_swish: bool,
    num_classes: usize,
    image_size: usize,
    weight_decay: f64,
    /// Whose network this is: the weights of the other library's do not fit it, though their
    /// shapes do.
    #[module(skip)]
    layout: MobileNetLayout,
}

impl MobileNetV3 {
    /// Whose MobileNetV3 this is.
    pub fn layout(&self) -> MobileNetLayout {
        self.layout
    }

    /// The features before the logits' dense layer: the hidden layer's (else the pooled
    /// features), after the dropout.
    fn features(&self, images: Tensor<4>) -> Tensor<2> {
        let images = match self.layout {
            // Keras's `Rescaling(1 / 127.5, offset=-1)`.
            MobileNetLayout::Keras => images.div_scalar(127.5).sub_scalar(1.0),
            _ => images,
        };
        let mut x = self.activate(self.stem.forward(images));
        for block in &self.blocks {
            x = block.forward(x);
        }
        let x = self.activate(self.last_conv.forward(x));
        let pooled = self.avgpool.forward(x).flatten(1, 3);
        let features = match &self.hidden {
            Some(hidden) => self.activate(hidden.forward(pooled)),
            None => pooled,
        };
        crate::layers::dropout(&self.dropout, features)
    }

    /// Hard swish, or ReLU in the minimalistic network.
    fn activate<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        match self.hard_swish {
            true => hard_swish(x),
            false => relu(x),
        }
    }
}

features_classifier!(MobileNetV3);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nets::ImageClassifier;
    use crate::params::count_params;

    /// torchvision's `sum(p.numel() for p in mobilenet_v3_large().parameters())` (torchvision
    /// 0.29.2), and Small's; Keras's trainable counts are the same.
    #[test]
    fn parameter_counts_are_torchvisions() {
        let count =
            |config: MobileNetV3Config| count_params(&config.init(&Device::flex())).trainable;
        assert_eq!(count(MobileNetV3Config::large()), 5_483_032);
        assert_eq!(count(MobileNetV3Config::small()), 2_542_856);
        let keras = MobileNetV3Config::large().with_layout(MobileNetLayout::Keras);
        assert_eq!(count(keras), 5_483_032);
    }

    /// Keras's trainable counts of `MobileNetV3Large` and `Small` (`alpha`, `minimalistic`,
    /// Keras 3.15.1) and torchvision's of `width_mult` (0.29.2): the libraries scale widths
    /// otherwise, and both their counts are these layouts'.
    #[test]
    fn widths_and_the_minimalistic_networks_are_the_libraries() {
        let count =
            |config: MobileNetV3Config| count_params(&config.init(&Device::flex())).trainable;
        let keras = |config: MobileNetV3Config, width, minimalistic| {
            let config = config.with_layout(MobileNetLayout::Keras).with_width(width);
            count(config.with_minimalistic(minimalistic))
        };
        let (large, small) = (MobileNetV3Config::large, MobileNetV3Config::small);
        assert_eq!(keras(large(), 0.75, false), 3_993_528);
        assert_eq!(keras(large(), 1.0, true), 3_924_288);
        assert_eq!(keras(large(), 0.75, true), 3_050_312);
        assert_eq!(keras(large(), 1.3, false), 8_709_384);
        assert_eq!(keras(large(), 0.5, false), 2_689_904);
        assert_eq!(keras(small(), 0.75, false), 2_041_872);
        assert_eq!(keras(small(), 1.0, true), 2_044_736);
        assert_eq!(keras(small(), 1.3, false), 3_983_152);
        assert_eq!(count(large().with_width(0.75)), 3_377_576);
        assert_eq!(count(large().with_width(0.5)), 1_734_576);
        assert_eq!(count(large().with_width(1.3)), 8_713_472);
        assert_eq!(count(small().with_width(0.75)), 1_653_920);
    }

    /// Without the hidden layer, the network Keras builds without its top
    /// (`MobileNetV3Large(include_top=False)`: 2,971,952 trainable, Small's 927,008; Keras
    /// 3.15.1) and a dense layer of 5 classes on its pooled features.
    #[test]
    fn without_the_hidden_layer_the_logits_take_the_pooled_features() {
        let network = |config: MobileNetV3Config| {
            let config = config
                .with_layout(MobileNetLayout::Keras)
                .with_num_classes(5);
            config.with_hidden_layer(false).init(&Device::flex())
        };
        let (large, small) = (
            network(MobileNetV3Config::large()),
            network(MobileNetV3Config::small()),
        );
        assert_eq!(count_params(&large).trainable, 2_971_952 + 960 * 5 + 5);
        assert_eq!(count_params(&small).trainable, 927_008 + 576 * 5 + 5);
        assert!(small.hidden.is_none());
        let logits = small.forward(Tensor::zeros([1, 3, 64, 64], &Device::flex()));
        assert_eq!(logits.dims(), [1, 5]);
    }

    /// Large's strides halve 224 to 112 (stem), 56, 28, 14, 7; its gates, hard swishes and
    /// residuals are where torchvision puts them; Small's first block has a gate and a stride.
    #[test]
    fn blocks_are_the_papers() {
        let model = MobileNetV3Config::large()
            .with_num_classes(3)
            .init(&Device::flex());
        let strides: Vec<usize> = (model.blocks.iter())
            .map(|b| b.depthwise.conv.stride[0])
            .collect();
        assert_eq!(strides, [1, 2, 1, 2, 1, 1, 2, 1, 1, 1, 1, 1, 2, 1, 1]);
        let count = |f: fn(&MobileNetV3Block) -> bool| model.blocks.iter().filter(|b| f(b)).count();
        assert_eq!(count(|b| b.se.is_some()), 8);
        assert_eq!(count(|b| b.hard_swish), 9);
        assert_eq!(count(|b| b.residual), 10);
        assert!(model.blocks[0].expand.is_none() && model.blocks[1].expand.is_some());
        let gate = model.blocks[3].se.as_ref().unwrap();
        assert_eq!(gate.reduce.weight.dims(), [24, 72, 1, 1]);
        let logits = model.forward(Tensor::zeros([1, 3, 64, 64], &Device::flex()));
        assert_eq!(logits.dims(), [1, 3]);

        let small = MobileNetV3Config::small().init(&Device::flex());
        assert!(small.blocks[0].se.is_some() && small.blocks[0].expand.is_none());
        assert_eq!(small.blocks[0].depthwise.conv.stride, [2, 2]);
        assert_eq!(small.last_conv.conv.weight.dims(), [576, 96, 1, 1]);
        assert_eq!(small.hidden.unwrap().weight.dims(), [576, 1024]);
    }
}
