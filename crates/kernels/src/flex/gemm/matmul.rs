//! A dense layer's product `x · w` in bf16 on flex, forward and backward: operands rounded to
//! bf16, products summed in f32 ([`crate::flex::gemm::bf16_gemm`], on AMX tiles or with AVX-512 BF16 where
//! the CPU has them).
//! Flex's own bf16 product converts both operands to f32, multiplies in f32 and rounds the
//! result back to bf16: three passes more than this, and no faster than f32.

use burn::tensor::TensorData;
use burn_flex::FlexTensor;
use rayon::prelude::*;

use crate::flex::gemm::bf16_gemm::{PackedLhs, Strided, multiply_bf16};

/// `x · w` for `x` `[n, k]` and `w` `[k, m]`: `[n, m]`.
pub(crate) fn forward(x: FlexTensor, w: FlexTensor) -> FlexTensor {
    let (x, w) = (x.to_contiguous(), w.to_contiguous());
    let ([n, k], [_, m]) = (dims2(&x), dims2(&w));
    let (x, w): (&[f32], &[f32]) = (x.storage(), w.storage());
    let y = product(n, m, |rows, dst| {
        let lhs = PackedLhs::new(
            rows.len(),
            k,
            Strided::row_major(&x[rows.start * k..rows.end * k], k),
        );
        multiply_bf16(dst, &lhs, Strided::row_major(w, m), m, false);
    });
    FlexTensor::from_data(TensorData::new(y, [n, m]))
}

/// The gradient of `x` given `grad = ∂L/∂y` (`[n, m]`): `grad · wᵀ`, `[n, k]`.
pub(crate) fn x_grad(w: FlexTensor, grad: FlexTensor) -> FlexTensor {
    let (w, grad) = (w.to_contiguous(), grad.to_contiguous());
    let ([k, m], [n, _]) = (dims2(&w), dims2(&grad));
    let (w, grad): (&[f32], &[f32]) = (w.storage(), grad.storage());
    let dx = product(n, k, |rows, dst| {
        let lhs = PackedLhs::new(
            rows.len(),
            m,
            Strided::row_major(&grad[rows.start * m..rows.end * m], m),
        );
        multiply_bf16(dst, &lhs, Strided::transposed(w, m), k, false);
    });
    FlexTensor::from_data(TensorData::new(dx, [n, k]))
}

/// The gradient of `w` given `grad`: `xᵀ · grad`, `[k, m]`.
pub(crate) fn w_grad(x: FlexTensor, grad: FlexTensor) -> FlexTensor {
    let (x, grad) = (x.to_contiguous(), grad.to_contiguous());
    let ([n, k], [_, m]) = (dims2(&x), dims2(&grad));
    let (x, grad): (&[f32], &[f32]) = (x.storage(), grad.storage());
    let dw = product(k, m, |rows, dst| {
        // Rows `rows` of xᵀ: columns of x, read through strides.
        let lhs = Strided::transposed(&x[rows.start.min(x.len())..], k);
        let lhs = PackedLhs::new(rows.len(), n, lhs);
        multiply_bf16(dst, &lhs, Strided::row_major(grad, m), m, false);
    });
    FlexTensor::from_data(TensorData::new(dw, [k, m]))
}

/// A `[rows, columns]` f32 result, its rows shared among rayon's threads: `part(rows, dst)`
/// fills the rows `rows`.
fn product(
    rows: usize,
    columns: usize,
    part: impl Fn(std::ops::Range<usize>, &mut [f32]) + Sync,
) -> Vec<f32> {
    let mut out = vec![0f32; rows * columns];
    let share = rows.div_ceil(rayon::current_num_threads()).max(1);
    out.par_chunks_mut((share * columns).max(1))
        .enumerate()
        .for_each(|(i, dst)| {
            let first = i * share;
            part(first..first + dst.len() / columns.max(1), dst)
        });
    out
}

fn dims2(x: &FlexTensor) -> [usize; 2] {
    let shape = x.layout().shape();
    [shape[0], shape[1]]
}
