//! towers-kernels' integration tests, one binary: each file of this folder is a module of it.

mod attention;
mod drop_in;
mod dropout;
mod gru;
mod interpolate;
mod layers;
mod loss;
mod lstm;
mod pools;
mod recurrent;
mod scaled_attention;
mod transformer;
