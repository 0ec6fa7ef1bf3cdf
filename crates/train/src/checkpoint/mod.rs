//! Checkpoints: one checksummed file per step ([`Checkpoint`], `file.rs`) and the directory
//! that keeps the newest N and finds the newest valid one to resume from ([`CheckpointDir`],
//! `dir.rs`).

mod dir;
mod file;

pub use dir::{CheckpointDir, Restored};
pub use file::Checkpoint;
pub(crate) use file::MAGIC;
