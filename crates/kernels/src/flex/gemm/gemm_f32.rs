//! f32 matrix products by the `gemm` crate, on the calling thread or on rayon's, its nineteen
//! positional arguments named once for the kernels that call it.

/// A matrix for [`gemm_f32`]: its first element and the strides between rows and columns.
pub(crate) struct View<P> {
    pub ptr: P,
    pub row_stride: usize,
    pub col_stride: usize,
}

impl<P> View<P> {
    /// A matrix whose rows are `row_stride` apart and whose columns are contiguous.
    pub(crate) fn rows(ptr: P, row_stride: usize) -> Self {
        Self {
            ptr,
            row_stride,
            col_stride: 1,
        }
    }

    /// A matrix whose columns are `col_stride` apart and whose rows are contiguous.
    pub(crate) fn columns(ptr: P, col_stride: usize) -> Self {
        Self {
            ptr,
            row_stride: 1,
            col_stride,
        }
    }
}

/// `dst (m × n) = lhs (m × k) · rhs (k × n)`, or `dst +=` that when `accumulate`, on the
/// calling thread.
///
/// # Safety
/// Every element the strides reach for these dimensions lies inside its matrix's allocation,
/// and `dst` overlaps neither operand.
pub(crate) unsafe fn gemm_f32(
    dims: [usize; 3],
    dst: View<*mut f32>,
    accumulate: bool,
    lhs: View<*const f32>,
    rhs: View<*const f32>,
) {
    // SAFETY: the caller's contract.
    unsafe { gemm_f32_on(gemm::Parallelism::None, dims, dst, accumulate, lhs, rhs) }
}

/// [`gemm_f32`] on `parallelism`'s threads (gemm's own split of the product).
///
/// # Safety
/// As [`gemm_f32`]'s.
pub(crate) unsafe fn gemm_f32_on(
    parallelism: gemm::Parallelism,
    [m, n, k]: [usize; 3],
    dst: View<*mut f32>,
    accumulate: bool,
    lhs: View<*const f32>,
    rhs: View<*const f32>,
) {
    let stride = |s: usize| s as isize;
    // SAFETY: the caller's contract; alpha 1 and beta 1 make `dst = dst + lhs · rhs` when
    // `accumulate` (gemm reads `dst`), `dst = lhs · rhs` otherwise.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.ptr,
            stride(dst.col_stride),
            stride(dst.row_stride),
            accumulate,
            lhs.ptr,
            stride(lhs.col_stride),
            stride(lhs.row_stride),
            rhs.ptr,
            stride(rhs.col_stride),
            stride(rhs.row_stride),
            1.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        );
    }
}
