//! Pooling on flex: max pooling keeping each output's argmax (`max_pool`), average pooling at
//! stride 1 by window sums (`avg_pool`), and batch norm, ReLU and max pooling in one kernel
//! (`batch_norm_max_pool`).

pub(crate) mod avg_pool;
pub(crate) mod batch_norm_max_pool;
pub(crate) mod max_pool;
