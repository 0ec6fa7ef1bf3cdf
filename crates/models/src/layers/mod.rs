//! The layers the nets are built of, as TF-slim names them, on the kernels of
//! `towers-kernels`: [`BasicConv`] (convolution, batch norm, ReLU), [`OffsetBatchNorm`],
//! [`Lrn`], [`dropout`] with seeded masks (and [`drop_examples`], stochastic depth), and the
//! [`truncated_normal`] initializer.

mod basic_conv;
mod batch_norm;
mod dropout;
mod init;
mod lrn;

pub use basic_conv::{BasicConv, BasicConvConfig};
pub use batch_norm::{OffsetBatchNorm, OffsetBatchNormConfig};
pub use dropout::{drop_examples, dropout, with_dropout_seed, with_example_dropout};
pub use init::truncated_normal;
pub(crate) use init::{glorot_uniform, zeros};
pub use lrn::{Lrn, LrnConfig};
