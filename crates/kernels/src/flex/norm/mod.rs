//! Normalization on flex: batch norm then ReLU, on the batch's statistics or given ones
//! (`batch_norm`), group norm from its pieces (`group_norm`), layer norm (`layer_norm`), and
//! local response normalization (`lrn`).

pub(crate) mod batch_norm;
pub(crate) mod group_norm;
pub(crate) mod layer_norm;
pub(crate) mod lrn;
