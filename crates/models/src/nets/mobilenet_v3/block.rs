//! [`MobileNetV3Block`]: MobileNetV3's block (Howard et al. 2019), MobileNetV2's inverted
//! residual with a 3x3 or 5x5 depthwise convolution, ReLU or hard swish, and in some blocks a
//! squeeze-excitation gate: a 1x1 expansion, the depthwise convolution, the gate, a linear 1x1
//! projection, and the input added back where the shapes allow.

use burn::config::Config;
use burn::module::Module;
use burn::tensor::activation::relu;
use burn::tensor::{Device, Tensor};
use towers_kernels::hard_swish;

use crate::nets::efficientnet::SqueezeExcitation;
use crate::nets::mobilenet_v3::units::{conv_bn, squeeze_excitation};
use crate::nets::{ConvBn, MobileNetLayout, divisible_by_8};

/// [`MobileNetV3Block`]'s shape.
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct MobileNetV3BlockConfig {
    /// `[in, out]` channels.
    pub channels: [usize; 2],
    /// The depthwise convolution's channels. Equal to `in`, the block has no expanding
    /// convolution (each MobileNetV3's first block).
    pub expanded: usize,
    /// The depthwise convolution's side (3 or 5).
    pub kernel: usize,
    /// The depthwise convolution's stride.
    #[config(default = 1)]
    pub stride: usize,
    /// Whether a squeeze-excitation gate follows the depthwise convolution, of
    /// `divisible_by_8(expanded / 4)` channels.
    #[config(default = false)]
    pub squeeze_excitation: bool,
    /// Hard swish after the expansion and the depthwise convolution (else ReLU).
    #[config(default = false)]
    pub hard_swish: bool,
    /// Whose padding, constants and initializers.
    #[config(default = "MobileNetLayout::Torchvision")]
    pub layout: MobileNetLayout,
}

impl MobileNetV3BlockConfig {
    /// A new [`MobileNetV3Block`], initialized as its layout's library initializes it.
    pub fn init(&self, device: &Device) -> MobileNetV3Block {
        let ([c_in, c_out], hidden, layout) = (self.channels, self.expanded, self.layout);
        let squeezed = divisible_by_8(hidden as f64 / 4.0);
        MobileNetV3Block {
            expand: (hidden != c_in).then(|| conv_bn(layout, [c_in, hidden], 1, [1, 1], device)),
            depthwise: conv_bn(
                layout,
                [hidden; 2],
                self.kernel,
                [self.stride, hidden],
                device,
            ),
            se: (self.squeeze_excitation)
                .then(|| squeeze_excitation(layout, [hidden, squeezed], device)),
            project: conv_bn(layout, [hidden, c_out], 1, [1, 1], device),
            hard_swish: self.hard_swish,
            residual: self.stride == 1 && c_in == c_out,
        }
    }
}

/// `x + project(se(act(depthwise(act(expand(x))))))`, `act` ReLU or hard swish, the sum only
/// at stride 1 with as many channels out as in.
#[derive(Module, Debug)]
pub struct MobileNetV3Block {
    /// 1x1, `in` to the expanded channels, then the activation (Keras's `expand`); none where
    /// they are equal.
    pub expand: Option<ConvBn>,
    /// Depthwise at the block's stride, then the activation (`depthwise`).
    pub depthwise: ConvBn,
    /// The channel gate (`squeeze_excite`), in some blocks.
    pub se: Option<SqueezeExcitation>,
    /// 1x1 to `out`, without an activation (`project`).
    pub project: ConvBn,
    /// Whether the activation is hard swish (else ReLU).
    pub(crate) hard_swish: bool,
    /// Whether the input is added to the projection.
    pub(crate) residual: bool,
}

impl MobileNetV3Block {
    /// `[n, in, h, w]` to `[n, out, h / stride, w / stride]` (rounded up).
    pub fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        let expanded = match &self.expand {
            Some(expand) => self.activate(expand.forward(x.clone())),
            None => x.clone(),
        };
        let mut y = self.activate(self.depthwise.forward(expanded));
        if let Some(se) = &self.se {
            y = se.forward(y);
        }
        let y = self.project.forward(y);
        match self.residual {
            true => x + y,
            false => y,
        }
    }

    /// The block's activation.
    fn activate(&self, x: Tensor<4>) -> Tensor<4> {
        match self.hard_swish {
            true => hard_swish(x),
            false => relu(x),
        }
    }
}
