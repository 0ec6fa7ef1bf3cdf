//! burn-towers' integration tests, one binary: each file of this folder is a module of it, so
//! the crates and Burn are linked once for all of them. The fuzz targets (`fuzz/`) are a binary
//! of their own.

mod gpu;
mod harnesses;
mod keras_applications;
mod reference_outputs;
mod remote;
mod tf_inception_v3;
