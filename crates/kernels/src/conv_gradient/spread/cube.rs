//! The spread in one kernel on Burn's CubeCL backend (unfused: `CubeBackend`; under fusion
//! this runs as `fusion.rs`'s deferred operation).

use burn::backend::TensorMetadata;
use burn::backend::cubecl::dtype_to_storage_type;
use burn::backend::ops::FloatTensorOps;
use burn::tensor::Shape;
use burn_cubecl::CubeBackend;
use burn_cubecl::cubecl;
use burn_cubecl::kernel::untile;
use burn_cubecl::ops::numeric::empty_device_contiguous_dtype;
use burn_cubecl::tensor::CubeTensor;
use cubecl::calculate_cube_count_elemwise;
use cubecl::prelude::*;

use super::{ConvSpread, spread_by_padding, spread_shape};

/// One thread per value of the spread, laid out `[n, h, w, c]` (channels last, as Burn's
/// convolution reads its input): the gradient's value where the place falls on the stride,
/// read through the gradient's strides, zero between.
#[cube(launch_unchecked, address_type = "dynamic")]
fn spread_kernel<E: Numeric>(
    grad: &Tensor<E>,
    spread: &mut Tensor<E>,
    stride_h: usize,
    stride_w: usize,
    #[define(E)] _dtype: ElemType,
) {
    let (height, width, channels) = (spread.shape(1), spread.shape(2), spread.shape(3));
    if ABSOLUTE_POS >= spread.shape(0) * height * width * channels {
        terminate!();
    }
    let (place, channel) = (ABSOLUTE_POS / channels, ABSOLUTE_POS % channels);
    let (row, x) = (place / width, place % width);
    let (image, y) = (row / height, row % height);
    let mut value = E::from_int(0);
    if y % stride_h == 0 && x % stride_w == 0 {
        value = grad[image * grad.stride(0)
            + channel * grad.stride(1)
            + (y / stride_h) * grad.stride(2)
            + (x / stride_w) * grad.stride(3)];
    }
    let at = image * spread.stride(0)
        + y * spread.stride(1)
        + x * spread.stride(2)
        + channel * spread.stride(3);
    spread[at] = value;
}

impl ConvSpread for CubeBackend {
    /// By `spread_kernel`, viewed back as `[n, c, h, w]`; a quantized gradient by Burn's ops.
    fn towers_conv_spread(grad: CubeTensor, stride: [usize; 2]) -> CubeTensor {
        if !grad.dtype.is_float() {
            return spread_by_padding::<Self>(grad, stride);
        }
        let grad = untile(grad);
        let [n, c, h, w] = spread_shape(&grad.shape(), stride).dims();
        let (client, dtype) = (grad.client.clone(), grad.dtype);
        let spread = empty_device_contiguous_dtype(
            client.clone(),
            grad.device.clone(),
            Shape::new([n, h, w, c]),
            dtype,
        );
        let count = spread.meta.num_elements();
        let cube_dim = CubeDim::new(&client, count);
        let cube_count = calculate_cube_count_elemwise(&client, count, cube_dim);
        let address = grad
            .required_address_type()
            .max(spread.required_address_type());
        let [stride_h, stride_w] = stride;
        // SAFETY: `launch_unchecked` leaves out the bounds checks of the kernel's indexing;
        // the kernel keeps within both tensors itself: it returns at once past the spread's
        // last value, writes each value of the spread at its own place through the spread's
        // strides, and reads the gradient at `y / stride_h`, `x / stride_w`, which lie below
        // its `oh`, `ow` since the spread's height and width are `s·(o - 1) + 1`. Both tensors
        // live on `client`'s device, as the kernel's arguments, and the dtype defined is theirs.
        unsafe {
            spread_kernel::launch_unchecked(
                &client,
                cube_count,
                cube_dim,
                address,
                grad.into_tensor_arg(),
                spread.clone().into_tensor_arg(),
                stride_h,
                stride_w,
                dtype_to_storage_type(dtype),
            );
        }
        Self::float_permute(spread, &[0, 3, 1, 2])
    }
}
