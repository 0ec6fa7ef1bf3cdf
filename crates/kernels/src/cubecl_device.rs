//! [`on_cubecl`]: whether a device is one of Burn's CubeCL devices, where the batch norm and
//! the convolutions take backward passes of their own, an L2 penalty's sums are joined, and
//! layers work over the channels last in memory, where the convolutions leave them
//! ([`channel_columns`]).

use burn::tensor::Device;
#[cfg(feature = "gpu")]
use burn::{
    backend::{Backend, TensorMetadata, tensor::FloatTensor},
    tensor::Shape,
};

/// Whether `device` (autodiff over it included) is one of Burn's CubeCL devices (wgpu, CUDA,
/// ROCm, Metal, Vulkan), where each op is a kernel launch, and whose convolutions write their
/// outputs channels last in memory (`[n, h, w, c]`, NCHW by shape): a layer after them that
/// reshapes over the channels does best to take them there.
#[cfg(feature = "gpu")]
pub fn on_cubecl(device: &Device) -> bool {
    use burn::backend::DispatchDevice;
    matches!(
        device.clone().inner().as_dispatch(),
        DispatchDevice::Cube(_)
    )
}

/// Without a GPU backend, no device is.
#[cfg(not(feature = "gpu"))]
pub fn on_cubecl(_device: &Device) -> bool {
    false
}

#[cfg(feature = "gpu")]
/// `x` `[n, c, ...]` as `[n · ..., c]`: the values of each channel in a column. A view where
/// `x` lies channels last, as Burn's GPU convolutions write their outputs and element-wise ops
/// keep them; a copy otherwise. The batch norm's per-channel sums take their input so (as the
/// rows `[c, n · ...]` Burn's batch norm reduces, ResNet-50's step on lavapipe at batch 2
/// launched 159 copies more, 113 kernels in all), the convolutions' gradients their output
/// gradient's rows (`[n·h·w, out]`).
pub(crate) fn channel_columns<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    let shape = x.shape();
    let channels = shape[1];
    let rank = shape.num_dims();
    let channels_last: Vec<usize> = [0].into_iter().chain(2..rank).chain([1]).collect();
    let columns = Shape::new([shape.num_elements() / channels, channels]);
    B::float_reshape(B::float_permute(x, &channels_last), columns)
}
