//! [`Rectifier`]: the ReLU or ReLU6 a batch norm's output may go through in the same op.

#[cfg(feature = "gpu")]
use burn::backend::tensor::FloatTensor;
#[cfg(feature = "gpu")]
use burn::backend::{Backend, TensorMetadata, get_or_init_device_settings};

/// A rectifier after a batch norm, in the same op: forward in the batch norm's element-wise
/// expression, backward as a mask that the batch norm's kernels apply to the output's gradient
/// as they read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rectifier {
    /// `max(x, 0)`; the gradient passes where the output is `> 0` (Burn's `relu_backward`).
    Relu,
    /// `min(max(x, 0), 6)`; the gradient passes where `0 < output < 6` (TF's `relu6` gradient,
    /// and flex's: Burn's clamp also passes it at an input of exactly 0 or 6).
    Relu6,
}

/// Where ReLU6 caps its output.
#[cfg(feature = "gpu")]
pub(crate) const RELU6_CAP: f32 = 6.0;

/// Its ops, on the backends the batch norm's extension routes.
#[cfg(feature = "gpu")]
impl Rectifier {
    /// Whether the output is capped (ReLU6): the kernels' compile-time flag.
    pub(crate) fn capped(self) -> bool {
        self == Rectifier::Relu6
    }

    /// The rectified `x`.
    pub(crate) fn forward<B: Backend>(self, x: FloatTensor<B>) -> FloatTensor<B> {
        match self {
            Rectifier::Relu => B::relu(x),
            Rectifier::Relu6 => B::float_clamp(x, 0f32.into(), RELU6_CAP.into()),
        }
    }

    /// `dy` (the gradient of the rectifier's `output`) where it passes, 0 elsewhere.
    pub(crate) fn backward<B: Backend>(
        self,
        output: FloatTensor<B>,
        dy: FloatTensor<B>,
    ) -> FloatTensor<B> {
        match self {
            Rectifier::Relu => B::relu_backward(output, dy),
            Rectifier::Relu6 => {
                let bool_dtype = get_or_init_device_settings::<B>(&output.device()).bool_dtype;
                let cut = B::float_greater_equal_elem(output.clone(), RELU6_CAP.into(), bool_dtype);
                B::float_mask_fill(B::relu_backward(output, dy), cut, 0f32.into())
            }
        }
    }
}
