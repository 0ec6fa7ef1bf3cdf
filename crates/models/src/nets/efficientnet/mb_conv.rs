//! [`MbConv`]: EfficientNet's block (Tan & Le 2019), MobileNetV2's inverted residual with
//! SiLU, a squeeze-excitation gate and stochastic depth: a 1x1 expansion, a depthwise
//! convolution, the gate, a linear 1x1 projection, and the input added back where the shapes
//! allow, the block's own output dropped for whole images at random in training.

use burn::config::Config;
use burn::module::Module;
use burn::nn::{Dropout, DropoutConfig};
use burn::tensor::{Device, Tensor};
use towers_kernels::silu;

use crate::layers::drop_examples;
use crate::nets::ConvBn;
use crate::nets::efficientnet::layout::EfficientNetLayout;
use crate::nets::efficientnet::squeeze_excitation::{SqueezeExcitation, SqueezeExcitationConfig};

/// [`MbConv`]'s shape.
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct MbConvConfig {
    /// `[in, out]` channels.
    pub channels: [usize; 2],
    /// The expansion: the depthwise convolution works on `expansion · in` channels. At 1 the
    /// block has no expanding convolution (each EfficientNet's first stage).
    pub expansion: usize,
    /// The depthwise convolution's side (3 or 5).
    pub kernel: usize,
    /// The depthwise convolution's stride.
    #[config(default = 1)]
    pub stride: usize,
    /// The probability that a training image skips the block (its output dropped, its input
    /// passed on): where the block adds its input back.
    #[config(default = 0.0)]
    pub stochastic_depth: f64,
    /// The batch norms' epsilon and momentum (as Burn counts it).
    #[config(default = "[1e-5, 0.1]")]
    pub batch_norm: [f64; 2],
    /// Whose padding and initializers.
    #[config(default = "EfficientNetLayout::Torchvision")]
    pub layout: EfficientNetLayout,
}

impl MbConvConfig {
    /// A new [`MbConv`], initialized as its layout's library initializes it.
    pub fn init(&self, device: &Device) -> MbConv {
        let [c_in, c_out] = self.channels;
        let hidden = c_in * self.expansion;
        let unit = |channels, kernel, stride, depthwise| {
            let layout = self.layout;
            layout.conv_bn(channels, kernel, stride, depthwise, self.batch_norm, device)
        };
        MbConv {
            expand: (self.expansion != 1).then(|| unit([c_in, hidden], 1, 1, false)),
            depthwise: unit([hidden, hidden], self.kernel, self.stride, true),
            se: SqueezeExcitationConfig::new(hidden, (c_in / 4).max(1))
                .with_layout(self.layout)
                .init(device),
            project: unit([hidden, c_out], 1, 1, false),
            stochastic_depth: DropoutConfig::new(self.stochastic_depth).init(),
            residual: self.stride == 1 && c_in == c_out,
        }
    }
}

/// `x + drop(project(se(silu(depthwise(silu(expand(x)))))))`, the sum (and the drop) only at
/// stride 1 with as many channels out as in.
#[derive(Module, Debug)]
pub struct MbConv {
    /// 1x1, `in` to `expansion · in`, then SiLU (Keras's `_expand_conv`); none at expansion 1.
    pub expand: Option<ConvBn>,
    /// Depthwise at the block's stride, then SiLU (`_dwconv`).
    pub depthwise: ConvBn,
    /// The channel gate (`_se_reduce`, `_se_expand`).
    pub se: SqueezeExcitation,
    /// 1x1 to `out`, without an activation (`_project_conv`).
    pub project: ConvBn,
    /// Drops the block's output for whole images (Keras's `Dropout` of `noise_shape`
    /// `(None, 1, 1, 1)`, torchvision's `StochasticDepth(p, "row")`).
    pub stochastic_depth: Dropout,
    /// Whether the input is added to the projection.
    pub(crate) residual: bool,
}

impl MbConv {
    /// `[n, in, h, w]` to `[n, out, h / stride, w / stride]` (rounded up).
    pub fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        let expanded = match &self.expand {
            Some(expand) => silu(expand.forward(x.clone())),
            None => x.clone(),
        };
        let gated = self.se.forward(silu(self.depthwise.forward(expanded)));
        let y = self.project.forward(gated);
        match self.residual {
            true => x + drop_examples(&self.stochastic_depth, y),
            false => y,
        }
    }
}
