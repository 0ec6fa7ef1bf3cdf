//! [`kernels_channels_last`]: a model's convolution kernels laid out in memory as Burn's GPU
//! convolutions read them.
//!
//! Why: Burn's CubeCL convolutions read a kernel `[out, c, kh, kw]` with its channels last in
//! memory (`[out, kh, kw, c]`) and copy any kernel that does not lie so, at every forward pass
//! (one copy per convolution larger than 1x1: ResNet-50's forward pass on lavapipe made 17,
//! Inception v3's 63). The weight gradients of `conv_gradient` come out laid so; an update
//! `w - lr·g` keeps the layout its inputs share (burn-cubecl-fusion gives a tie to the
//! contiguous order), so a kernel laid so once stays so from update to update.

use burn::module::{Module, ModuleMapper, Param};
use burn::tensor::Tensor;

use crate::cubecl_device::on_cubecl;

/// `model` with every parameter of rank 4 on Burn's CubeCL devices (wgpu, CUDA, ROCm, ...)
/// laid out channels last in memory: the same values and shape `[out, c, kh, kw]`, the same
/// parameter ids and trainability. One copy of each such parameter; the others, and every
/// parameter elsewhere (flex, ndarray), as they are.
pub fn kernels_channels_last<M: Module>(model: M) -> M {
    model.map(&mut ChannelsLast)
}

struct ChannelsLast;

impl ModuleMapper for ChannelsLast {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let (id, value, mapper) = param.consume();
        if D != 4 || !on_cubecl(&value.device()) {
            return Param::from_mapped_value(id, value, mapper);
        }
        let (trainable, autodiff) = (value.is_require_grad(), value.is_autodiff());
        // Laid out off the autodiff graph, then a leaf again.
        let kernel = Tensor::<4>::from_dispatch(value.inner().into_dispatch());
        let [out, c, kh, kw] = kernel.dims();
        // A reshape of the permuted view copies it in its logical order, `[out, kh, kw, c]`;
        // the reshape back and the permutation back are views.
        let laid = (kernel.permute([0, 2, 3, 1]))
            .reshape([out, kh * kw * c])
            .reshape([out, kh, kw, c])
            .permute([0, 3, 1, 2]);
        let laid = Tensor::<D>::from_dispatch(laid.into_dispatch());
        let laid = match autodiff {
            true => laid.autodiff().set_require_grad(trainable),
            false => laid,
        };
        Param::from_mapped_value(id, laid, mapper)
    }
}
