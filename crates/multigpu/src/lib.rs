//! towers-multigpu
