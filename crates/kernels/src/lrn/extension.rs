//! The backend extension behind [`super::lrn_by_band`], its forward pass, and which devices it
//! routes.

use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, Dispatch, TensorMetadata};
use burn::tensor::{Shape, Tensor};

use super::lrn_band;

pub(super) use routing::LrnByBand;

/// The extension, apart: its expansion names `NdArray`, deprecated in Burn 0.22.
mod routing {
    #![allow(deprecated)]

    use burn::backend::tensor::FloatTensor;
    use burn::backend::{Backend, backend_extension};

    /// The LRN by a band product: Burn's ops forward; under autodiff, the backward pass of
    /// `backward.rs`.
    #[backend_extension(Cube, Autodiff)]
    pub(crate) trait LrnByBand: Backend {
        /// See [`crate::lrn_by_band`]; `band` is [`crate::lrn_band`]'s, `alpha` in it.
        fn towers_lrn_by_band(
            x: FloatTensor<Self>,
            band: FloatTensor<Self>,
            bias: f64,
            beta: f64,
        ) -> FloatTensor<Self> {
            super::forward::<Self>(x, band, bias, beta).output
        }
    }

    impl LrnByBand for burn::backend::Cube {}
}

/// The LRN of `x` on a CubeCL device.
pub(super) fn lrn(x: &Tensor<4>, radius: usize, [bias, alpha, beta]: [f64; 3]) -> Tensor<4> {
    // In `x`'s float type: the backend's product takes its operands as they are.
    let band = lrn_band(x.dims()[1], radius, alpha, &x.device()).cast(x.dtype());
    Tensor::from_dispatch(<Dispatch as LrnByBand>::towers_lrn_by_band(
        x.clone().into_dispatch(),
        band.into_dispatch(),
        bias,
        beta,
    ))
}

/// The forward pass's output, and what the backward pass reads: the window sums with the bias,
/// `s`, and the factor the input was scaled by, `p = s^-beta`.
pub(super) struct Forward<B: Backend> {
    pub(super) output: FloatTensor<B>,
    pub(super) sums: FloatTensor<B>,
    pub(super) factor: FloatTensor<B>,
}

/// `x · (bias + band(x²))^-beta`.
pub(super) fn forward<B: Backend>(
    x: FloatTensor<B>,
    band: FloatTensor<B>,
    bias: f64,
    beta: f64,
) -> Forward<B> {
    let squares = B::float_mul(x.clone(), x.clone());
    let sums = B::float_add_scalar(across_channels::<B>(squares, band), bias.into());
    let factor = B::float_powf_scalar(sums.clone(), (-beta).into());
    Forward {
        output: B::float_mul(x, factor.clone()),
        sums,
        factor,
    }
}

/// `t` (`[n, c, h, w]`) summed over each channel's window: as rows `[n, h·w, c]` times the band
/// (symmetric, so it sums from the right the windows it sums from the left), laid back as
/// `[n, c, h, w]`, its channels last in memory.
pub(super) fn across_channels<B: Backend>(
    t: FloatTensor<B>,
    band: FloatTensor<B>,
) -> FloatTensor<B> {
    let [n, c, h, w] = t.shape().dims();
    let rows = B::float_reshape(
        B::float_permute(t, &[0, 2, 3, 1]),
        Shape::new([n, h * w, c]),
    );
    let band = B::float_reshape(band, Shape::new([1, c, c]));
    let sums = B::float_reshape(B::float_matmul(rows, band), Shape::new([n, h, w, c]));
    B::float_permute(sums, &[0, 3, 1, 2])
}
