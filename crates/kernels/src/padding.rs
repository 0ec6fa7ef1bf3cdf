//! TF's (and Burn's) SAME padding, which the models' own formulations of Burn's layers need:
//! [`conv_images`](crate::conv_images) pads as `Conv2d` does, and the CIFAR-10 net's pools
//! check where SAME pads nothing before the start.

#[cfg(feature = "flex")]
use burn::nn::PaddingConfig3d;
use burn::nn::{PaddingConfig1d, PaddingConfig2d};

/// The (before, after) padding of the rows and of the columns, as `Conv2d` pads them.
pub(crate) fn conv_padding(
    config: &PaddingConfig2d,
    [h, w]: [usize; 2],
    [kh, kw]: [usize; 2],
    [sh, sw]: [usize; 2],
) -> ((usize, usize), (usize, usize)) {
    match *config {
        PaddingConfig2d::Valid => ((0, 0), (0, 0)),
        PaddingConfig2d::Explicit(top, left, bottom, right) => ((top, bottom), (left, right)),
        PaddingConfig2d::Same => (same_padding(h, kh, sh), same_padding(w, kw, sw)),
    }
}

/// A 1D layer's padding as a one-row image's: none above or below (SAME pads a one-row image's
/// rows by nothing too).
pub(crate) fn row_padding(padding: &PaddingConfig1d) -> PaddingConfig2d {
    match *padding {
        PaddingConfig1d::Same => PaddingConfig2d::Same,
        PaddingConfig1d::Valid => PaddingConfig2d::Valid,
        PaddingConfig1d::Explicit(left, right) => PaddingConfig2d::Explicit(0, left, 0, right),
    }
}

/// A 3D layer's padding of depth, rows and columns (the same before and after); `None` for a
/// SAME padding that would be uneven, which Burn's layer refuses.
#[cfg(feature = "flex")]
pub(crate) fn symmetric_padding_3d(
    config: &PaddingConfig3d,
    dims: [usize; 3],
    kernel: [usize; 3],
    stride: [usize; 3],
) -> Option<[usize; 3]> {
    match *config {
        PaddingConfig3d::Valid => Some([0; 3]),
        PaddingConfig3d::Explicit(depth, rows, cols) => Some([depth, rows, cols]),
        PaddingConfig3d::Same => symmetric(std::array::from_fn(|i| {
            same_padding(dims[i], kernel[i], stride[i])
        })),
    }
}

/// Each axis's padding where every axis pads as much after as before; `None` otherwise.
#[cfg(feature = "flex")]
pub(crate) fn symmetric<const N: usize>(sides: [(usize, usize); N]) -> Option<[usize; N]> {
    let even = sides.iter().all(|(before, after)| before == after);
    even.then(|| sides.map(|(before, _)| before))
}

/// TF's (and Burn's) SAME padding of one side: the output has `ceil(size / stride)` places,
/// the padding is split with the odd one after.
pub fn same_padding(size: usize, kernel: usize, stride: usize) -> (usize, usize) {
    let needed = (size.div_ceil(stride).max(1) - 1) * stride + kernel;
    let total = needed.saturating_sub(size);
    (total / 2, total - total / 2)
}
