//! towers-train
