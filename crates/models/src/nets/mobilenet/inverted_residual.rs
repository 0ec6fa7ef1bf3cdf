//! [`InvertedResidual`]: MobileNetV2's block (Sandler et al. 2018): a 1x1 expansion, a 3x3
//! depthwise convolution, a linear 1x1 projection, and the input added back where the shapes
//! allow.

use burn::config::Config;
use burn::module::Module;
use burn::tensor::{Device, Tensor};

use crate::nets::mobilenet::conv_bn::{ConvBn, ConvBnConfig};
use crate::nets::mobilenet::layout::MobileNetLayout;

/// [`InvertedResidual`]'s shape.
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct InvertedResidualConfig {
    /// `[in, out]` channels.
    pub channels: [usize; 2],
    /// The expansion: the depthwise convolution works on `expansion · in` channels. At 1 the
    /// block has no expanding convolution (MobileNetV2's first block).
    pub expansion: usize,
    /// The depthwise convolution's stride.
    #[config(default = 1)]
    pub stride: usize,
    /// Whose padding, constants and initializers.
    #[config(default = "MobileNetLayout::Torchvision")]
    pub layout: MobileNetLayout,
}

impl InvertedResidualConfig {
    /// A new [`InvertedResidual`], initialized as its layout's library initializes it.
    pub fn init(&self, device: &Device) -> InvertedResidual {
        let [c_in, c_out] = self.channels;
        let hidden = c_in * self.expansion;
        let unit = |channels, kernel| ConvBnConfig::new(channels, kernel).with_layout(self.layout);
        InvertedResidual {
            expand: (self.expansion != 1).then(|| unit([c_in, hidden], 1).init(device)),
            depthwise: unit([hidden, hidden], 3)
                .with_stride(self.stride)
                .with_depthwise(true)
                .init(device),
            project: unit([hidden, c_out], 1).init(device),
            residual: self.stride == 1 && c_in == c_out,
        }
    }
}

/// `x + project(relu6(depthwise(relu6(expand(x)))))`, the sum only at stride 1 with as many
/// channels out as in.
#[derive(Module, Debug)]
pub struct InvertedResidual {
    /// 1x1, `in` to `expansion · in`, then ReLU6 (Keras's `block_N_expand`); none at
    /// expansion 1.
    pub expand: Option<ConvBn>,
    /// 3x3 depthwise at the block's stride, then ReLU6 (`_depthwise`).
    pub depthwise: ConvBn,
    /// 1x1 to `out`, without an activation (`_project`).
    pub project: ConvBn,
    /// Whether the input is added to the projection.
    pub(crate) residual: bool,
}

impl InvertedResidual {
    /// `[n, in, h, w]` to `[n, out, h / stride, w / stride]` (rounded up).
    pub fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        let expanded = match &self.expand {
            Some(expand) => expand.forward_relu6(x.clone()),
            None => x.clone(),
        };
        let y = self.project.forward(self.depthwise.forward_relu6(expanded));
        match self.residual {
            true => x + y,
            false => y,
        }
    }
}
