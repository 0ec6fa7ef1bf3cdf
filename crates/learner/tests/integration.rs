//! towers-learner's integration tests, one binary: each file of this folder is a module of it,
//! so the crate and Burn are linked once for all of them.

mod layers;
mod learner;
