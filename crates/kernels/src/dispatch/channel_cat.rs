//! [`cat_channels`]: images joined along their channels (Inception's branches), laid out as
//! Burn's GPU convolutions read them.

use burn::tensor::Tensor;

use crate::cubecl_device::on_cubecl;

/// `Tensor::cat(tensors, 1)` of images `[n, c_i, h, w]`: on Burn's CubeCL devices joined as
/// `[n, h, w, c]` and viewed back, so that the result lies channels last in memory, where
/// Burn's convolutions leave their outputs and read their inputs (joined along dimension 1,
/// it lay channels first, and each convolution reading it copied it: Inception v3's forward
/// pass on lavapipe, 63 copies); elsewhere `Tensor::cat` as it is.
///
/// # Panics
///
/// As `Tensor::cat`: no tensors, or tensors of other batch or image sizes.
pub fn cat_channels(tensors: Vec<Tensor<4>>) -> Tensor<4> {
    if !tensors.first().is_some_and(|t| on_cubecl(&t.device())) {
        return Tensor::cat(tensors, 1);
    }
    let channels_last = tensors.into_iter().map(|t| t.permute([0, 2, 3, 1]));
    Tensor::cat(channels_last.collect(), 3).permute([0, 3, 1, 2])
}
