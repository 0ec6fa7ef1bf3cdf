//! towers-train's integration tests, one binary: each file of this folder is a module of it,
//! so the crate and Burn are linked once for all of them. Ctrl-C's test (`ctrl_c.rs`) is a
//! binary of its own: the signal and the thread list it checks are the whole process's.

mod cifar10;
mod faults;
mod layers;
#[cfg(feature = "mpi")]
mod mpi_train;
mod pretrained;
mod resume;
mod signals;
mod tf_runs;
mod torchvision_resnet_eval;
