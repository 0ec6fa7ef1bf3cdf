//! [`on_cubecl`]: whether a device is one of Burn's CubeCL devices, where the batch norm and
//! the convolutions take backward passes of their own, an L2 penalty's sums are joined, and
//! layers work over the channels last in memory, where the convolutions leave them.

use burn::tensor::Device;

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
