//! TEMPORARY stand-in (fallback only) until the AMX kernel lands.

#[derive(Clone, Copy)]
pub(crate) struct Strided<'a> {
    pub data: &'a [f32],
    pub row_stride: usize,
    pub col_stride: usize,
}

pub(crate) struct PackedLhs {
    m: usize,
    k: usize,
    values: Vec<f32>,
}

fn round(x: f32) -> f32 {
    half::bf16::from_f32(x).to_f32()
}

impl PackedLhs {
    pub(crate) fn new(m: usize, k: usize, lhs: Strided) -> Self {
        let mut values = Vec::with_capacity(m * k);
        for r in 0..m {
            for c in 0..k {
                values.push(round(lhs.data[r * lhs.row_stride + c * lhs.col_stride]));
            }
        }
        Self { m, k, values }
    }
}

pub(crate) fn multiply_bf16(
    dst: &mut [f32],
    lhs: &PackedLhs,
    rhs: Strided,
    n: usize,
    accumulate: bool,
) {
    let (m, k) = (lhs.m, lhs.k);
    let mut b = Vec::with_capacity(k * n);
    for r in 0..k {
        for c in 0..n {
            b.push(round(rhs.data[r * rhs.row_stride + c * rhs.col_stride]));
        }
    }
    assert_eq!(dst.len(), m * n);
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            lhs.values.as_ptr(),
            1,
            k as isize,
            b.as_ptr(),
            1,
            n as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}
