//! What one training step costs the host, counted rather than timed: the kernels it launches
//! (CubeCL's launch observer, `cubecl_runtime::logging::LaunchObservation`, which sees every
//! launch of the process on the thread that issues it) and its host syncs (reads and flushes,
//! which CubeCL does not report: counted where the towers make them,
//! `towers_multigpu::host_syncs`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use cubecl_runtime::logging::{LaunchObservation, LaunchObserver};
use towers_multigpu::{HostSyncs, host_syncs};

#[cfg(feature = "fusion")]
use crate::fusion_blocks::BlockLaunches;

/// Set (to anything), [`count`] also prints each kernel launch on stderr as it happens, and
/// under fusion each block's operations before its launches: the step in the order it runs,
/// to see where fusion splits it and what runs alone.
pub const TRACE_VAR: &str = "TOWERS_BENCH_TRACE";

/// Launches per kernel name, and under fusion per block kind (`fusion_blocks.rs`).
#[derive(Default)]
struct Launches {
    per_kernel: Mutex<BTreeMap<&'static str, u64>>,
    #[cfg(feature = "fusion")]
    by_block: Arc<BlockLaunches>,
    /// Whether each launch is printed ([`TRACE_VAR`]).
    traced: bool,
}

impl LaunchObserver for Launches {
    fn launched(&self, kernel: &'static str) {
        if self.traced {
            let thread = std::thread::current().id();
            eprintln!("{thread:?}     launch {}", short_kernel_name(kernel));
        }
        let mut counts = (self.per_kernel.lock()).unwrap_or_else(|poisoned| poisoned.into_inner());
        *counts.entry(kernel).or_default() += 1;
        #[cfg(feature = "fusion")]
        self.by_block.launched();
    }
}

/// `kernel`'s name without module paths, keeping its first type argument, which tells kernels
/// of one name apart: `burn_cubecl::kernel::binary::kernel_binop::KernelBinop<burn_cubecl::
/// kernel::binary::AddOp>` is `KernelBinop<AddOp>`, a matmul `MatmulEntry<TensorArgs>` (plain)
/// or `MatmulEntry<FusedMatmulArgs>` (element-wise ops fused in).
pub fn short_kernel_name(kernel: &str) -> String {
    let last_segment = |path: &str| path.rsplit("::").next().unwrap_or(path).trim().to_string();
    match kernel.split_once('<') {
        None => last_segment(kernel),
        Some((head, args)) => {
            let first = args.split([',', '<', '>']).next().unwrap_or(args);
            format!("{}<{}>", last_segment(head), last_segment(first))
        }
    }
}

/// What `steps` calls of a step cost the host.
pub struct StepCounts {
    /// Kernel launches per kernel name, most launched first.
    pub launches: Vec<(&'static str, u64)>,
    /// Reads and flushes.
    pub syncs: HostSyncs,
    /// Under Burn's fusion, the launches per block that made them: a block of one operation by
    /// that operation's name, larger ones together as fused (`fusion_blocks.rs`); most first,
    /// empty without fusion.
    pub by_block: Vec<(String, u64)>,
}

impl StepCounts {
    /// Every kernel launch.
    pub fn total_launches(&self) -> u64 {
        self.launches.iter().map(|(_, n)| n).sum()
    }

    /// Launches per [`short_kernel_name`] (kernels of one short name added up), most launched
    /// first: what the benches print.
    pub fn by_short_name(&self) -> Vec<(String, u64)> {
        let mut by_name = BTreeMap::<String, u64>::new();
        for (kernel, launches) in &self.launches {
            *by_name.entry(short_kernel_name(kernel)).or_default() += launches;
        }
        let mut rows: Vec<_> = by_name.into_iter().collect();
        rows.sort_by_key(|(name, n)| (std::cmp::Reverse(*n), name.clone()));
        rows
    }
}

/// The kernel launches and host syncs of `steps` calls of `step`.
pub fn count(steps: usize, mut step: impl FnMut()) -> StepCounts {
    let traced = std::env::var_os(TRACE_VAR).is_some();
    let launches = Arc::new(Launches {
        #[cfg(feature = "fusion")]
        by_block: Arc::new(BlockLaunches::new(traced)),
        traced,
        ..Launches::default()
    });
    let observation = LaunchObservation::new(launches.clone());
    #[cfg(feature = "fusion")]
    let blocks = burn_fusion::observer::FusionObservation::new(launches.by_block.clone());
    let before = host_syncs();
    for _ in 0..steps {
        step();
    }
    let syncs = host_syncs().since(before);
    drop(observation);
    #[cfg(feature = "fusion")]
    drop(blocks);
    let counts = std::mem::take(&mut *launches.per_kernel.lock().expect("no observer panicked"));
    let mut per_kernel: Vec<_> = counts.into_iter().collect();
    per_kernel.sort_by_key(|&(name, n)| (std::cmp::Reverse(n), name));
    StepCounts {
        launches: per_kernel,
        syncs,
        #[cfg(feature = "fusion")]
        by_block: launches.by_block.take(),
        #[cfg(not(feature = "fusion"))]
        by_block: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::{HostSyncs, StepCounts, short_kernel_name};

    #[test]
    fn launches_by_short_name_add_up_kernels_of_one_name_most_first() {
        let counts = StepCounts {
            launches: vec![
                ("a::Copy", 1),
                ("b::Fuse<x::A>", 5),
                ("c::Copy", 2),
                ("d::Fuse<y::B>", 4),
            ],
            syncs: HostSyncs::default(),
            by_block: Vec::new(),
        };
        let want = [("Fuse<A>", 5), ("Fuse<B>", 4), ("Copy", 3)];
        let want: Vec<_> = want.iter().map(|&(n, c)| (n.to_string(), c)).collect();
        assert_eq!(counts.by_short_name(), want);
    }

    #[test]
    fn short_names_keep_the_kernel_and_its_first_type_argument() {
        let cases = [
            (
                "burn_cubecl::kernel::binary::kernel_binop::KernelBinop<burn_cubecl::kernel::binary::AddOp>",
                "KernelBinop<AddOp>",
            ),
            (
                "cubek_matmul::multi_level::matmul_entry::MatmulEntry<burn_cubecl_fusion::optim::matmul::args::FusedMatmulArgs, cubecl_core::DynamicScalar<cubek_matmul::__Lhs>>",
                "MatmulEntry<FusedMatmulArgs>",
            ),
            (
                "cubek_reduce::launch::base::reduce_kernel::ReduceKernel<cubek_reduce::components::args::TensorArgs>",
                "ReduceKernel<TensorArgs>",
            ),
            (
                "burn_cubecl_fusion::optim::elemwise::optimization::elemwise_fuse::ElemwiseFuse",
                "ElemwiseFuse",
            ),
        ];
        for (name, short) in cases {
            assert_eq!(short_kernel_name(name), short, "{name}");
        }
    }
}
