//! burn-towers: tower-style data-parallel training for Burn.
pub use towers_data as data;
pub use towers_models as models;
pub use towers_multigpu as multigpu;
pub use towers_train as train;
