//! towers-multigpu's integration tests, one binary: each file of this folder is a module of it,
//! so the crate and Burn are linked once for all of them.

mod gpu;
mod host_syncs;
mod layers;
mod loss_scaling;
#[cfg(feature = "mpi")]
mod mpi;
mod running_state;
mod stderr_line;
mod token_weights;
mod towers;
mod tuning;
mod weight_decay;
