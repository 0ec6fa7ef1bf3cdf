//! The windows as rows in one kernel on Burn's CubeCL backend (unfused: `CubeBackend`; under
//! fusion this runs as `fusion.rs`'s deferred operation).

use burn::backend::TensorMetadata;
use burn::backend::cubecl::dtype_to_storage_type;
use burn_cubecl::CubeBackend;
use burn_cubecl::cubecl;
use burn_cubecl::kernel::untile;
use burn_cubecl::ops::numeric::empty_device_contiguous_dtype;
use burn_cubecl::tensor::CubeTensor;
use cubecl::calculate_cube_count_elemwise;
use cubecl::prelude::*;

use super::{ConvWindows, Windows, rows_by_views};

/// One thread per value of the rows `[n·oh·ow, c·kh·kw]`: its window's place `(image, oy, ox)`
/// from the row, its channel and tap `(i, j)` from the column, and the input's value there,
/// read through the input's strides (Burn's convolutions leave it channels last in memory), or
/// zero where the window lies over the padding.
#[cube(launch_unchecked, address_type = "dynamic")]
// The window's geometry as plain scalars, one launch argument each.
#[allow(clippy::too_many_arguments)]
fn windows_kernel<E: Numeric>(
    input: &Tensor<E>,
    rows: &mut Tensor<E>,
    places_w: usize,
    places: usize,
    kernel_w: usize,
    taps: usize,
    stride_h: usize,
    stride_w: usize,
    top: usize,
    left: usize,
    #[define(E)] _dtype: ElemType,
) {
    let row_len = rows.shape(1);
    if ABSOLUTE_POS >= rows.shape(0) * row_len {
        terminate!();
    }
    let (row, column) = (ABSOLUTE_POS / row_len, ABSOLUTE_POS % row_len);
    let (image, place) = (row / places, row % places);
    let (channel, tap) = (column / taps, column % taps);
    // The place in the padded input.
    let y = (place / places_w) * stride_h + tap / kernel_w;
    let x = (place % places_w) * stride_w + tap % kernel_w;
    let inside = y >= top && y < top + input.shape(2) && x >= left && x < left + input.shape(3);
    let mut value = E::from_int(0);
    if inside {
        value = input[image * input.stride(0)
            + channel * input.stride(1)
            + (y - top) * input.stride(2)
            + (x - left) * input.stride(3)];
    }
    let at = row * rows.stride(0) + column * rows.stride(1);
    rows[at] = value;
}

impl ConvWindows for CubeBackend {
    /// By `windows_kernel`; a quantized input by Burn's ops.
    fn towers_conv_windows(x: CubeTensor, windows: Windows) -> CubeTensor {
        if !x.dtype.is_float() {
            return rows_by_views::<Self>(x, windows);
        }
        // A tensor a product left tiled in storage is read as rows again first (a plain
        // one as it is).
        let x = untile(x);
        let [places_h, places_w] = windows.places;
        let ((top, _), (left, _)) = windows.shape.padding;
        let (client, dtype) = (x.client.clone(), x.dtype);
        let rows = empty_device_contiguous_dtype(
            client.clone(),
            x.device.clone(),
            windows.rows_shape(&x.shape()),
            dtype,
        );
        let count = rows.meta.num_elements();
        let cube_dim = CubeDim::new(&client, count);
        let cube_count = calculate_cube_count_elemwise(&client, count, cube_dim);
        let address = x.required_address_type().max(rows.required_address_type());
        let [kernel_h, kernel_w] = windows.kernel;
        let [stride_h, stride_w] = windows.shape.stride;
        // SAFETY: `launch_unchecked` leaves out the bounds checks of the kernel's indexing;
        // the kernel keeps within both tensors itself: it returns at once past the rows' last
        // value, writes each value of the rows at its own place through the rows' strides,
        // and reads the input only where the window's place lies inside it (`inside`), at
        // coordinates below its shape, through its strides. Both tensors live on `client`'s
        // device, as the kernel's arguments, and the dtype defined is theirs.
        unsafe {
            windows_kernel::launch_unchecked(
                &client,
                cube_count,
                cube_dim,
                address,
                x.into_tensor_arg(),
                rows.clone().into_tensor_arg(),
                places_w,
                places_h * places_w,
                kernel_w,
                kernel_h * kernel_w,
                stride_h,
                stride_w,
                top,
                left,
                dtype_to_storage_type(dtype),
            );
        }
        rows
    }
}
