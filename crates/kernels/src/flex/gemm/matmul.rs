//! A dense layer's product `x · w` on flex, forward and backward, in an [`Arithmetic`]: f32 by
//! gemm, or operands rounded to bf16 and products summed in f32
//! ([`crate::flex::gemm::bf16_gemm`], on AMX tiles or with AVX-512 BF16 where the CPU has
//! them).
//!
//! Flex's own bf16 product converts both operands to f32, multiplies in f32 and rounds the
//! result back to bf16: three passes more than this, and no faster than f32. Its f32 product
//! makes its output with `FlexTensor::empty`, which zeroes a byte vector and then copies it
//! whole into an aligned one on the calling thread (cubecl-environment 0.11.3's
//! `Bytes::from_bytes_vec` checks the vector's declared alignment, 1, not its pointer's): a
//! transformer's `[2048, 3072]` activation, 25 MB, zeroed and copied for nothing.

use burn::tensor::TensorData;
use burn_flex::FlexTensor;

use crate::flex::gemm::arithmetic::Arithmetic;
use crate::flex::gemm::bf16_gemm::{PackedLhs, Strided, multiply_bf16};
use crate::flex::gemm::gemm_f32::{View, gemm_f32_on};
use crate::flex::memory::buffers::{zeroed_chunks, zeros};

/// `x · w` for `x` `[n, k]` and `w` `[k, m]`: `[n, m]`.
pub(crate) fn forward(x: FlexTensor, w: FlexTensor, arithmetic: Arithmetic) -> FlexTensor {
    let (x, w) = (x.to_contiguous(), w.to_contiguous());
    let ([n, k], [_, m]) = (dims2(&x), dims2(&w));
    let y = multiply(
        arithmetic,
        [n, k, m],
        Operand::rows(x.storage(), k),
        Operand::rows(w.storage(), m),
    );
    FlexTensor::from_data(TensorData::new(y, [n, m]))
}

/// The gradient of `x` given `grad = ∂L/∂y` (`[n, m]`): `grad · wᵀ`, `[n, k]`.
pub(crate) fn x_grad(w: FlexTensor, grad: FlexTensor, arithmetic: Arithmetic) -> FlexTensor {
    let (w, grad) = (w.to_contiguous(), grad.to_contiguous());
    let ([k, m], [n, _]) = (dims2(&w), dims2(&grad));
    let dx = multiply(
        arithmetic,
        [n, m, k],
        Operand::rows(grad.storage(), m),
        Operand::transposed(w.storage(), m),
    );
    FlexTensor::from_data(TensorData::new(dx, [n, k]))
}

/// The gradient of `w` given `grad`: `xᵀ · grad`, `[k, m]`.
pub(crate) fn w_grad(x: FlexTensor, grad: FlexTensor, arithmetic: Arithmetic) -> FlexTensor {
    let (x, grad) = (x.to_contiguous(), grad.to_contiguous());
    let ([n, k], [_, m]) = (dims2(&x), dims2(&grad));
    let dw = multiply(
        arithmetic,
        [k, n, m],
        Operand::transposed(x.storage(), k),
        Operand::rows(grad.storage(), m),
    );
    FlexTensor::from_data(TensorData::new(dw, [k, m]))
}

/// A contiguous matrix, read row by row (`lead` values a row) or as the transpose of one
/// (`lead` values a row of what it transposes: a column of it).
#[derive(Clone, Copy)]
struct Operand<'a> {
    values: &'a [f32],
    lead: usize,
    transposed: bool,
}

impl<'a> Operand<'a> {
    fn rows(values: &'a [f32], lead: usize) -> Self {
        Self {
            values,
            lead,
            transposed: false,
        }
    }

    fn transposed(values: &'a [f32], lead: usize) -> Self {
        Self {
            transposed: true,
            ..Self::rows(values, lead)
        }
    }

    /// The matrix from row `first` on.
    fn past_rows(self, first: usize) -> Self {
        let start = if self.transposed {
            first
        } else {
            first * self.lead
        };
        Self {
            values: &self.values[start.min(self.values.len())..],
            ..self
        }
    }

    fn bf16(self) -> Strided<'a> {
        match self.transposed {
            true => Strided::transposed(self.values, self.lead),
            false => Strided::row_major(self.values, self.lead),
        }
    }

    fn f32(self) -> View<*const f32> {
        match self.transposed {
            true => View::columns(self.values.as_ptr(), self.lead),
            false => View::rows(self.values.as_ptr(), self.lead),
        }
    }
}

/// Multiply-adds from which an f32 product runs on all threads: flex's threshold for a parallel
/// gemm (192³), under which splitting costs more than it saves.
const SHARED_WORK: usize = 192 * 192 * 192;

/// `lhs · rhs` (`[rows, depth] · [depth, columns]`) in `arithmetic`. In f32 one gemm call, on
/// rayon's threads from [`SHARED_WORK`] on, as flex's product calls it (gemm's split of the
/// product shares its packed operands among the threads); in bf16 the result's rows shared
/// among rayon's threads.
fn multiply(
    arithmetic: Arithmetic,
    [rows, depth, columns]: [usize; 3],
    lhs: Operand,
    rhs: Operand,
) -> Vec<f32> {
    if arithmetic == Arithmetic::F32 {
        let mut out = zeros(rows * columns);
        let parallelism = match rows * depth * columns < SHARED_WORK {
            true => gemm::Parallelism::None,
            false => gemm::Parallelism::Rayon(0),
        };
        // SAFETY: `out` holds `rows × columns` values; `lhs` reaches `rows × depth` values of
        // its slice, `rhs` `depth × columns` of its own (the shapes the callers read from the
        // tensors); `out` is a buffer of its own.
        unsafe {
            let dst = View::rows(out.as_mut_ptr(), columns);
            let dims = [rows, columns, depth];
            gemm_f32_on(parallelism, dims, dst, false, lhs.f32(), rhs.f32());
        }
        return out;
    }
    let share = rows.div_ceil(rayon::current_num_threads()).max(1);
    zeroed_chunks(rows * columns, (share * columns).max(1), |i, dst| {
        let part = dst.len() / columns.max(1);
        let lhs = PackedLhs::new(part, depth, lhs.past_rows(i * share).bf16());
        multiply_bf16(dst, &lhs, rhs.bf16(), columns, false);
    })
}

fn dims2(x: &FlexTensor) -> [usize; 2] {
    let shape = x.layout().shape();
    [shape[0], shape[1]]
}
