//! towers-models
