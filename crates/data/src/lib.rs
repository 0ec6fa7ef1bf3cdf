//! towers-data: the threaded input pipeline of burn-towers.
mod batch;
mod error;

pub use batch::{BatchSlice, HostBatch, split_sizes};
pub use error::{Error, Result};
