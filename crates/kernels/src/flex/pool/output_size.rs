//! Pooled sizes as Burn (and PyTorch) count them.

/// The outputs of one axis of `size` places, padded by `padding` before and after, pooled in
/// windows of `kernel` at `stride`; in ceil mode a last window cut short counts, unless it
/// starts in the trailing padding or past it.
pub(crate) fn pooled_size(
    size: usize,
    kernel: usize,
    padding: usize,
    stride: usize,
    ceil_mode: bool,
) -> usize {
    let padded = size + 2 * padding;
    if padded < kernel {
        return usize::from(ceil_mode);
    }
    if !ceil_mode {
        return (padded - kernel) / stride + 1;
    }
    let out = (padded - kernel).div_ceil(stride) + 1;
    if (out - 1) * stride >= size + padding {
        out - 1
    } else {
        out
    }
}
