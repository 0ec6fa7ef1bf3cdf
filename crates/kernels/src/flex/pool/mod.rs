//! Pooling on flex: max pooling keeping each output's argmax (`max_pool`; with padding,
//! `padded_max_pool`), average pooling at stride 1 by window sums (`avg_pool`), average
//! pooling at any stride and adaptive average pooling by separable window means
//! (`window_mean`), and batch norm, ReLU and max pooling in one kernel (`batch_norm_max_pool`);
//! Burn's count of pooled outputs (`output_size`).

pub(crate) mod avg_pool;
pub(crate) mod batch_norm_max_pool;
pub(crate) mod max_pool;
mod output_size;
pub(crate) mod padded_max_pool;
pub(crate) mod window_mean;
