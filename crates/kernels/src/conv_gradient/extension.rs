//! The backend extension behind [`super::conv2d_by_product`]: Burn's CubeCL devices
//! ([`crate::cubecl_device::on_cubecl`]).

pub(super) use routing::ConvByProduct;

/// The extension, apart: its expansion names `NdArray`, deprecated in Burn 0.22.
mod routing {
    #![allow(deprecated)]

    use burn::backend::tensor::FloatTensor;
    use burn::backend::{Backend, backend_extension};

    use crate::conv_gradient::ConvShape;

    /// A convolution without bias, groups or dilation: Burn's forward; under autodiff, the
    /// backward pass of `backward.rs`. `padding` is `[top, bottom, left, right]`.
    #[backend_extension(Cube, Autodiff)]
    pub(crate) trait ConvByProduct: Backend {
        fn towers_conv2d_by_product(
            x: FloatTensor<Self>,
            weight: FloatTensor<Self>,
            stride: [usize; 2],
            padding: [usize; 4],
        ) -> FloatTensor<Self> {
            let shape = ConvShape::from_flat(stride, padding);
            Self::conv2d(x, weight, None, shape.options())
        }
    }

    impl ConvByProduct for burn::backend::Cube {}
}
