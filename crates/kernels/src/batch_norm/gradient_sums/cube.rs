//! The gradient sums in one kernel on Burn's CubeCL backend (unfused: `CubeBackend`; under
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

use super::{GradientSums, ROWS_PER_PIECE, pieces_shape};
use crate::batch_norm::rectifier::{RELU6_CAP, Rectifier};

/// One thread per piece and channel, neighbouring threads on neighbouring channels (where
/// Burn's convolutions leave the values of one place side by side): the piece's rows of `dy`
/// and `x` `[n, c, h, w]` read through their strides, both sums kept in f32, compensated,
/// written at the piece's row of `sums` `[pieces, 2c]`, `Σ dy` in column `channel`,
/// `Σ dy · x̂` in `c + channel`. With a rectifier's `output` (`[n, c, h, w]`), each `dy` counts
/// as 0 where the output is `<= 0`, or `>= 6` where `capped` (ReLU6): the rectifier's backward
/// pass, taken in as the kernel reads.
#[cube(launch_unchecked, address_type = "dynamic")]
fn gradient_sums_kernel<E: Numeric>(
    dy: &Tensor<E>,
    output: ComptimeOption<&Tensor<E>>,
    #[comptime] capped: bool,
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
    let centre = f32::cast_from(mean[channel * mean.stride(1)]);
    let (mut dy_sum, mut dy_lost) = (f32::from_int(0), f32::from_int(0));
    let (mut dy_centred_sum, mut dy_centred_lost) = (f32::from_int(0), f32::from_int(0));
    let first = piece * rows_per_piece;
    for row in first..min(first + rows_per_piece, x.shape(0) * x.shape(2) * x.shape(3)) {
        let grad = f32::cast_from(dy[at(dy, row, channel)]);
        #[comptime]
        let grad = match output {
            ComptimeOption::Some(output) => {
                let value = f32::cast_from(output[at(output, row, channel)]);
                let mut cut = value <= f32::from_int(0);
                if capped {
                    cut = cut || value >= f32::new(RELU6_CAP);
                }
                select(cut, f32::from_int(0), grad)
            }
            ComptimeOption::None => grad,
        };
        let value = f32::cast_from(x[at(x, row, channel)]);
        compensated_add(&mut dy_sum, &mut dy_lost, grad);
        compensated_add(
            &mut dy_centred_sum,
            &mut dy_centred_lost,
            grad * (value - centre),
        );
    }
    let scale = f32::cast_from(inv_std[channel * inv_std.stride(1)]);
    let (row_at, column_stride) = (piece * sums.stride(0), sums.stride(1));
    sums[row_at + channel * column_stride] = E::cast_from(dy_sum);
    sums[row_at + (channels + channel) * column_stride] = E::cast_from(dy_centred_sum * scale);
}

/// Where `row` (an image's place, `image·h·w + y·w + x`) of `channel` lies in `t` `[n, c, h,
/// w]`, through its strides.
#[cube]
fn at<E: Numeric>(t: &Tensor<E>, row: usize, channel: usize) -> usize {
    let places = t.shape(2) * t.shape(3);
    let (image, place) = (row / places, row % places);
    let (y, x) = (place / t.shape(3), place % t.shape(3));
    image * t.stride(0) + channel * t.stride(1) + y * t.stride(2) + x * t.stride(3)
}

/// `sum += value`, Kahan's way: `lost` keeps what each addition rounded away and adds it back
/// with the next value, so that a piece's sum is off by a rounding or two, not by one per
/// value summed in a row (up to 256 here). The GPU test holds the parameters' gradients to a
/// millionth of a channel's terms from sums in f64: uncompensated, ours came out 1.2e-6 from
/// Burn's (lavapipe, 2026-12-05).
#[cube]
fn compensated_add(sum: &mut f32, lost: &mut f32, value: f32) {
    let corrected = value - *lost;
    let next = *sum + corrected;
    *lost = (next - *sum) - corrected;
    *sum = next;
}

impl GradientSums for CubeBackend {
    /// By `gradient_sums_kernel`.
    fn towers_batch_norm_gradient_sums(
        dy: CubeTensor,
        rectified: Option<(Rectifier, CubeTensor)>,
        x: CubeTensor,
        mean: CubeTensor,
        inv_std: CubeTensor,
    ) -> CubeTensor {
        let [dy, x, mean, inv_std] = [dy, x, mean, inv_std].map(untile);
        let capped = rectified
            .as_ref()
            .is_some_and(|(rectifier, _)| rectifier.capped());
        let output = rectified.map(|(_, output)| untile(output));
        if let Some(output) = &output {
            let what = "a rectifier's output beside its gradient";
            assert_eq!(output.shape(), dy.shape(), "{what}");
        }
        let (client, dtype) = (x.client.clone(), x.dtype);
        let sums = empty_device_contiguous_dtype(
            client.clone(),
            x.device.clone(),
            pieces_shape(&x.shape()),
            dtype,
        );
        let count = sums.shape()[0] * x.shape()[1];
        let cube_dim = CubeDim::new(&client, count);
        let cube_count = calculate_cube_count_elemwise(&client, count, cube_dim);
        let address = [&dy, &x, &sums]
            .into_iter()
            .chain(&output)
            .map(|t| t.required_address_type())
            .max()
            .expect("three tensors");
        // SAFETY: `launch_unchecked` leaves out the bounds checks of the kernel's indexing;
        // the kernel keeps within every tensor itself: it returns at once past the last piece's
        // last channel, reads `dy`, `x` and any rectifier's `output` (of one shape, `[n, c, h, w]`,
        // the output's checked above) at rows below `n·h·w` and a channel below `c`, through
        // their strides, `mean` and `inv_std` (`[1, c]`) at that channel, and writes its own
        // two places of `sums` (`[pieces, 2c]`). All live on `client`'s device, as the kernel's
        // arguments, and the dtype defined is theirs.
        unsafe {
            gradient_sums_kernel::launch_unchecked(
                &client,
                cube_count,
                cube_dim,
                address,
                dy.into_tensor_arg(),
                output.map(|output| output.into_tensor_arg()).into(),
                capped,
                x.into_tensor_arg(),
                mean.into_tensor_arg(),
                inv_std.into_tensor_arg(),
                sums.clone().into_tensor_arg(),
                ROWS_PER_PIECE,
                dtype_to_storage_type(dtype),
            );
        }
        sums
    }
}
