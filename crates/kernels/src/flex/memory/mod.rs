//! What every kernel family uses: output buffers zeroed and strided inputs copied on rayon's
//! threads (`buffers`), images in f32 or rounded to bf16 (`pixels`), and the shape and lane
//! helpers below (and a scaled row addition the resizing and pooling kernels share).

pub(crate) mod buffers;
pub(crate) mod pixels;

use burn_flex::FlexTensor;
use multiversion::multiversion;

/// Floats the elementwise kernels' reductions (batch norm, the fused bias+ReLU) sum side by
/// side: one AVX-512 register, two AVX2 ones. One sum in order keeps the compiler to one value
/// at a time.
pub(crate) const SUM_LANES: usize = 16;

/// The four dimensions of an `[n, c, h, w]` tensor.
pub(crate) fn dims4(x: &FlexTensor) -> [usize; 4] {
    let shape = x.layout().shape();
    [shape[0], shape[1], shape[2], shape[3]]
}

/// The five dimensions of an `[n, c, d, h, w]` tensor.
pub(crate) fn dims5(x: &FlexTensor) -> [usize; 5] {
    let shape = x.layout().shape();
    [shape[0], shape[1], shape[2], shape[3], shape[4]]
}

/// `values` split into its even and odd elements (`even`, `odd`: `values.len() / 2` each, or
/// as many as the shortest of the three allows).
#[inline(always)]
pub(crate) fn deinterleave<T: Copy>(values: &[T], even: &mut [T], odd: &mut [T]) {
    for ((even, odd), pair) in even
        .iter_mut()
        .zip(odd.iter_mut())
        .zip(values.chunks_exact(2))
    {
        *even = pair[0];
        *odd = pair[1];
    }
}

/// `out += scale · x`, value by value.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
pub(crate) fn add_scaled(out: &mut [f32], x: &[f32], scale: f32) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o += scale * v;
    }
}
