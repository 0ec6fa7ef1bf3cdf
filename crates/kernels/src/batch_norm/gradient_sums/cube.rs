//! The gradient sums in one kernel on Burn's CubeCL backend (unfused: `CubeBackend`; under
//! fusion this runs as `fusion.rs`'s deferred operation).

use burn::backend::TensorMetadata;
use burn::backend::cubecl::dtype_to_storage_type;
use burn::tensor::Shape;
use burn_cubecl::CubeBackend;
use burn_cubecl::cubecl;
use burn_cubecl::kernel::untile;
use burn_cubecl::ops::numeric::empty_device_contiguous_dtype;
use burn_cubecl::tensor::CubeTensor;
use cubecl::calculate_cube_count_elemwise;
use cubecl::prelude::*;

use super::GradientSums;

/// One thread per piece and channel, neighbouring threads on neighbouring channels (where
/// Burn's convolutions leave the values of one place side by side): the piece's rows of `dy`
/// and `x` `[n, c, h, w]` read through their strides, both sums kept in f32, written at the
/// piece's row of `sums` `[pieces, 2c]`, `Σ dy` in column `channel`, `Σ dy · x̂` in
/// `c + channel`.
#[cube(launch_unchecked, address_type = "dynamic")]
fn gradient_sums_kernel<E: Numeric>(
    dy: &Tensor<E>,
    x: &Tensor<E>,
    mean: &Tensor<E>,
    inv_std: &Tensor<E>,
    sums: &mut Tensor<E>,
    rows_per_piece: usize,
    #[define(E)] _dtype: ElemType,
) {
    let channels = x.shape(1);
    if ABSOLUTE_POS >= sums.shape(0) * channels {
        terminate!();
    }
    let (piece, channel) = (ABSOLUTE_POS / channels, ABSOLUTE_POS % channels);
    let (width, places) = (x.shape(3), x.shape(2) * x.shape(3));
    let first = piece * rows_per_piece;
    let end = min(first + rows_per_piece, x.shape(0) * places);
    let centre = f32::cast_from(mean[channel * mean.stride(1)]);
    let mut dy_sum = f32::from_int(0);
    let mut dy_centred_sum = f32::from_int(0);
    for row in first..end {
        let (image, place) = (row / places, row % places);
        let (y, x_at) = (place / width, place % width);
        let grad = f32::cast_from(
            dy[image * dy.stride(0)
                + channel * dy.stride(1)
                + y * dy.stride(2)
                + x_at * dy.stride(3)],
        );
        let value = f32::cast_from(
            x[image * x.stride(0) + channel * x.stride(1) + y * x.stride(2) + x_at * x.stride(3)],
        );
        dy_sum += grad;
        dy_centred_sum += grad * (value - centre);
    }
    let scale = f32::cast_from(inv_std[channel * inv_std.stride(1)]);
    let (row_at, column_stride) = (piece * sums.stride(0), sums.stride(1));
    sums[row_at + channel * column_stride] = E::cast_from(dy_sum);
    sums[row_at + (channels + channel) * column_stride] = E::cast_from(dy_centred_sum * scale);
}

impl GradientSums for CubeBackend {
    /// By `gradient_sums_kernel`.
    fn towers_batch_norm_gradient_sums(
        dy: CubeTensor,
        x: CubeTensor,
        mean: CubeTensor,
        inv_std: CubeTensor,
        rows_per_piece: usize,
    ) -> CubeTensor {
        let [dy, x, mean, inv_std] = [dy, x, mean, inv_std].map(untile);
        let [n, c, h, w] = x.shape().dims();
        let (client, dtype) = (x.client.clone(), x.dtype);
        let pieces = (n * h * w).div_ceil(rows_per_piece);
        let sums = empty_device_contiguous_dtype(
            client.clone(),
            x.device.clone(),
            Shape::new([pieces, 2 * c]),
            dtype,
        );
        let count = pieces * c;
        let cube_dim = CubeDim::new(&client, count);
        let cube_count = calculate_cube_count_elemwise(&client, count, cube_dim);
        let address = [&dy, &x, &sums]
            .map(|t| t.required_address_type())
            .into_iter()
            .max()
            .expect("three tensors");
        // SAFETY: `launch_unchecked` leaves out the bounds checks of the kernel's indexing;
        // the kernel keeps within every tensor itself: it returns at once past the last piece's
        // last channel, reads `dy` and `x` (of one shape, `[n, c, h, w]`) at rows below
        // `n·h·w` and a channel below `c`, through their strides, `mean` and `inv_std` (`[1,
        // c]`) at that channel, and writes its own two places of `sums` (`[pieces, 2c]`). All
        // live on `client`'s device, as the kernel's arguments, and the dtype defined is theirs.
        unsafe {
            gradient_sums_kernel::launch_unchecked(
                &client,
                cube_count,
                cube_dim,
                address,
                dy.into_tensor_arg(),
                x.into_tensor_arg(),
                mean.into_tensor_arg(),
                inv_std.into_tensor_arg(),
                sums.clone().into_tensor_arg(),
                rows_per_piece,
                dtype_to_storage_type(dtype),
            );
        }
        sums
    }
}
