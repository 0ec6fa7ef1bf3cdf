//! burn-towers: tower-style data-parallel training for Burn.
pub use towers_data as data;
pub use towers_kernels as kernels;
pub use towers_models as models;
pub use towers_multigpu as multigpu;
pub use towers_train as train;

#[cfg(feature = "mimalloc")]
mod allocator;

/// The global allocator of the binaries linking this crate (feature `mimalloc`, on by default):
/// it keeps the memory a training step frees for the next step's tensors.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: allocator::TowersAllocator = allocator::TowersAllocator;
