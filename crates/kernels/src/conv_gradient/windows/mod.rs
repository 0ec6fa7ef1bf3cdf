//! The input's windows laid out as rows, the operand of the weight gradient's product
//! (`backward.rs`): `[n·oh·ow, c·kh·kw]`, each output place's window of the zero-padded input,
//! its channels, then its rows and columns of taps: the product's `[out, c·kh·kw]` is the
//! kernel's gradient as the kernel lies, `[out, c, kh, kw]`.
//!
//! As a backend extension, so that Burn's CubeCL devices lay the rows in one kernel of ours
//! (`cube.rs`, queued lazily under fusion by `fusion.rs`): Burn's ops take three passes over
//! the input where it is padded (a fill, the input assigned into it, the windows copied out as
//! rows), and Burn has no windows-as-rows op (its own im2col, burn-cubecl's `wgrad_im2col`,
//! is internal to its tuned weight gradient and assigns one slice per tap). The same rows by
//! Burn's ops ([`rows_by_views`]) where the kernel does not apply: a 1x1 window without padding
//! (a view of an input laid channels last), a quantized input.
//!
//! - `cube.rs`: the kernel, on `CubeBackend`.
//! - `fusion.rs`: the kernel deferred on Burn's fusion backend.

mod cube;
mod fusion;

use burn::backend::Backend;
use burn::backend::TensorMetadata;
use burn::backend::tensor::FloatTensor;
use burn::tensor::Shape;
use burn::tensor::ops::PadMode;

use super::ConvShape;

/// Where a convolution's windows lie: its kernel's size, stride and zero padding, and how many
/// there are (the output's places, as the output gradient's shape has them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Windows {
    /// `[kh, kw]`.
    pub(crate) kernel: [usize; 2],
    pub(crate) shape: ConvShape,
    /// `[oh, ow]`.
    pub(crate) places: [usize; 2],
}

impl Windows {
    /// Whether each window is one place of the input: a 1x1 kernel without padding.
    pub(crate) fn is_pointwise(self) -> bool {
        self.kernel == [1, 1] && self.shape.flat_padding() == [0; 4]
    }

    /// The rows' shape `[n·oh·ow, c·kh·kw]` for an input of shape `[n, c, h, w]`.
    fn rows_shape(self, input: &Shape) -> Shape {
        let [n, c, _, _] = input.dims();
        let [oh, ow] = self.places;
        let [kh, kw] = self.kernel;
        Shape::new([n * oh * ow, c * kh * kw])
    }
}

/// The windows of `x` `[n, c, h, w]` as rows `[n·oh·ow, c·kh·kw]`.
pub(crate) trait ConvWindows: Backend {
    fn towers_conv_windows(x: FloatTensor<Self>, windows: Windows) -> FloatTensor<Self>;
}

/// The rows by Burn's ops: the input zero-padded, two `unfold` views (each puts its window's
/// places last, as PyTorch's does: `[n, c, oh, ow, kh, kw]`), and one copy into rows
/// `[n, oh, ow, c, kh, kw]`.
pub(crate) fn rows_by_views<B: Backend>(x: FloatTensor<B>, windows: Windows) -> FloatTensor<B> {
    let rows = windows.rows_shape(&x.shape());
    let ((top, bottom), (left, right)) = windows.shape.padding;
    let [kh, kw] = windows.kernel;
    let [sh, sw] = windows.shape.stride;
    let padded = match top + bottom + left + right {
        0 => x,
        _ => B::float_pad(
            x,
            &[(0, 0), (0, 0), (top, bottom), (left, right)],
            PadMode::Constant(0.0),
        ),
    };
    let unfolded = B::float_unfold(B::float_unfold(padded, 2, kh, sh), 3, kw, sw);
    B::float_reshape(B::float_permute(unfolded, &[0, 2, 3, 1, 4, 5]), rows)
}
