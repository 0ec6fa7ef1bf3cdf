//! [`Pixels`]: a batch's values as the convolutions read them, in f32 or already rounded to
//! bf16.
//!
//! In bf16, a batch norm whose output only convolutions read may hand it on rounded
//! ([`crate::flex::norm::batch_norm::forward`]): the convolutions round their inputs to bf16 anyway, so
//! their products are the same bits, and the tensor is half the bytes to write, to keep for the
//! backward pass and to pack. The direct vector convolution, the weight gradient's planes and
//! the windows (im2col) take either; the rest take f32, and [`widened`] gives it to them.

use std::ops::Range;

use burn::tensor::{DType, TensorData};
use burn_flex::FlexTensor;
use half::bf16;
use half::slice::HalfFloatSliceExt;
use multiversion::multiversion;
use rayon::prelude::*;

#[cfg(target_arch = "x86_64")]
use crate::flex::memory::buffers::prefetch;

/// A contiguous tensor's values: f32, or bf16 bit patterns.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Pixels<'a> {
    F32(&'a [f32]),
    Bf16(&'a [u16]),
}

impl<'a> Pixels<'a> {
    /// The values of a contiguous f32 or bf16 `x`.
    pub(crate) fn of(x: &'a FlexTensor) -> Self {
        match x.dtype() {
            DType::BF16 => Pixels::Bf16(x.storage::<bf16>().reinterpret_cast()),
            _ => Pixels::F32(x.storage()),
        }
    }

    pub(crate) fn len(self) -> usize {
        match self {
            Pixels::F32(x) => x.len(),
            Pixels::Bf16(x) => x.len(),
        }
    }

    /// The values at `range`.
    pub(crate) fn slice(self, range: Range<usize>) -> Self {
        match self {
            Pixels::F32(x) => Pixels::F32(&x[range]),
            Pixels::Bf16(x) => Pixels::Bf16(&x[range]),
        }
    }

    /// Asks for the cache lines of the values at `range` to be brought to cache, as `HINT`
    /// says ([`prefetch`]).
    #[cfg(target_arch = "x86_64")]
    pub(crate) fn prefetch<const HINT: i32>(self, range: Range<usize>) {
        match self {
            Pixels::F32(x) => prefetch::<HINT, _>(x, range),
            Pixels::Bf16(x) => prefetch::<HINT, _>(x, range),
        }
    }

    /// The values in chunks of `size` (the last may be shorter), for rayon's threads.
    pub(crate) fn par_chunks(self, size: usize) -> impl IndexedParallelIterator<Item = Self> {
        let size = size.max(1);
        let chunks = (0..self.len().div_ceil(size)).into_par_iter();
        chunks.map(move |k| self.slice(k * size..((k + 1) * size).min(self.len())))
    }

    /// The bf16 values' bits.
    ///
    /// # Panics
    /// On f32 values.
    pub(crate) fn bf16(self) -> &'a [u16] {
        match self {
            Pixels::Bf16(x) => x,
            Pixels::F32(_) => panic!("f32 values where bf16 ones were expected"),
        }
    }

    /// The values as f32: in place, or widened from bf16 into `buffer`.
    pub(crate) fn to_f32<'b>(self, buffer: &'b mut Vec<f32>) -> &'b [f32]
    where
        'a: 'b,
    {
        match self {
            Pixels::F32(values) => values,
            Pixels::Bf16(bits) => {
                buffer.resize(bits.len(), 0.0);
                widen_into(buffer, bits);
                buffer
            }
        }
    }

    /// The f32 values.
    ///
    /// # Panics
    /// On bf16 values: the kernels that read only f32 get [`widened`] tensors.
    pub(crate) fn f32(self) -> &'a [f32] {
        match self {
            Pixels::F32(x) => x,
            Pixels::Bf16(_) => panic!("bf16 images reached a kernel that reads f32 only"),
        }
    }
}

/// `values` = the f32s of bf16 `bits` (each one's bits the high half of an f32's), exactly;
/// of one length.
#[multiversion(targets("x86_64+avx512f+avx512bw", "x86_64+avx2"))]
pub(crate) fn widen_into(values: &mut [f32], bits: &[u16]) {
    assert_eq!(values.len(), bits.len());
    for (value, &bits) in values.iter_mut().zip(bits) {
        *value = f32::from_bits(u32::from(bits) << 16);
    }
}

/// `x` in f32: bf16 values widened exactly (each one's bits the high half of an f32's), on
/// rayon's threads; any other `x` as it is.
pub(crate) fn widened(x: FlexTensor) -> FlexTensor {
    if x.dtype() != DType::BF16 {
        return x;
    }
    let x = x.to_contiguous();
    let shape = x.layout().shape().to_vec();
    let bits: &[u16] = x.storage::<bf16>().reinterpret_cast();
    let mut values = vec![0f32; bits.len()];
    values
        .par_chunks_mut(1 << 14)
        .zip(bits.par_chunks(1 << 14))
        .for_each(|(values, bits)| widen_into(values, bits));
    FlexTensor::from_data(TensorData::new(values, shape))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widening_is_exact_and_chunks_cover_the_values() {
        let values = [1.0f32, -2.5, 3.0e-3, 65504.0, 0.0, -0.0, 1.0e30];
        let halves: Vec<bf16> = values.iter().map(|&v| bf16::from_f32(v)).collect();
        let x = FlexTensor::from_data(TensorData::new(halves.clone(), [values.len()]));
        let wide = widened(x.clone());
        assert_eq!(wide.dtype(), DType::F32);
        let expected: Vec<f32> = halves.iter().map(|h| h.to_f32()).collect();
        assert_eq!(wide.storage::<f32>(), expected.as_slice());
        let chunks: Vec<usize> = Pixels::of(&x).par_chunks(3).map(|c| c.len()).collect();
        assert_eq!(chunks, [3, 3, 1]);
    }
}
