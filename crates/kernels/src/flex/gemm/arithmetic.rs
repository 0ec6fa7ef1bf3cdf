//! What a product computes in: f32, or operands rounded to bf16 summed in f32.

/// What a convolution's or dense layer's matrix products compute in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Arithmetic {
    F32,
    /// Operands rounded to bf16, products summed in f32.
    Bf16,
}

impl Arithmetic {
    pub(crate) fn new(bf16: bool) -> Self {
        if bf16 {
            Arithmetic::Bf16
        } else {
            Arithmetic::F32
        }
    }
}
