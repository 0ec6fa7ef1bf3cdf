//! Under Burn's fusion, each kernel launch put down to the block of operations that made it:
//! a block of one operation by that operation's name, a larger block as fused. The launches
//! per kernel (`step_counts.rs`) name a kernel (`KernelBinop<AddOp>`) but not the operation
//! that asked for it, nor whether fusion ran it alone; burn-fusion's observer
//! (`burn_fusion::observer`) sees each block start and end, with its operations, on the thread
//! that launches its kernels. Its search keeps a few independent blocks open at a time, so
//! which operations run alone can differ between two layers of one kind (`bench/HISTORY.md`,
//! "The towers' gradient sum against Burn's fusion blocks").

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};
use std::thread::{self, ThreadId};

use burn_fusion::observer::{BlockOperations, FusionObserver};
use burn_ir::OperationIr;

/// What [`BlockLaunches`] calls a block of several operations.
pub(crate) const FUSED: &str = "(several operations, fused)";

/// Launches per block kind: the one operation's name, or [`FUSED`]; fed by
/// [`BlockLaunches::launched`].
#[derive(Default)]
pub(crate) struct BlockLaunches {
    blocks: Mutex<Blocks>,
    /// Whether each block's operations are printed as it starts (`step_counts::TRACE_VAR`).
    traced: bool,
}

#[derive(Default)]
struct Blocks {
    /// The block each thread is running: its kind and its launches so far.
    running: HashMap<ThreadId, (String, u64)>,
    /// Launches per block kind, of the blocks that ran.
    ran: BTreeMap<String, u64>,
}

impl BlockLaunches {
    /// No launches yet; each block printed as it starts where `traced`.
    pub(crate) fn new(traced: bool) -> Self {
        Self {
            blocks: Mutex::default(),
            traced,
        }
    }

    /// A kernel launched on this thread: counted to the block the thread runs, if any.
    pub(crate) fn launched(&self) {
        if let Some((_, launches)) = self.blocks().running.get_mut(&thread::current().id()) {
            *launches += 1;
        }
    }

    /// The launches per block kind so far, most first; the counts start again.
    pub(crate) fn take(&self) -> Vec<(String, u64)> {
        let ran = std::mem::take(&mut self.blocks().ran);
        let mut rows: Vec<_> = ran.into_iter().filter(|&(_, n)| n > 0).collect();
        rows.sort_by_key(|(kind, n)| (std::cmp::Reverse(*n), kind.clone()));
        rows
    }

    /// The counts, even where a panic left the lock poisoned: `block_ran` must not panic
    /// (burn-fusion aborts the process then).
    fn blocks(&self) -> MutexGuard<'_, Blocks> {
        self.blocks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl FusionObserver for BlockLaunches {
    fn registered(&self, _: &OperationIr) {}

    fn block_starts(&self, block: BlockOperations<'_>) {
        if self.traced {
            let operations: Vec<_> = block.iter().map(operation_name).collect();
            eprintln!(
                "{:?} block {}",
                thread::current().id(),
                operations.join(" | ")
            );
        }
        let mut operations = block.iter();
        let kind = match (operations.len(), operations.next()) {
            (1, Some(operation)) => operation_name(operation),
            _ => FUSED.to_string(),
        };
        let running = &mut self.blocks().running;
        running.insert(thread::current().id(), (kind, 0));
    }

    fn block_ran(&self) {
        let mut blocks = self.blocks();
        if let Some((kind, launches)) = blocks.running.remove(&thread::current().id()) {
            *blocks.ran.entry(kind).or_default() += launches;
        }
    }
}

/// `operation`'s kind without its tensors, from its `Debug` form (burn-ir names no operation
/// otherwise): `NumericFloat(F32, Add(BinaryOpIr { lhs: .. }))` is `NumericFloat(F32, Add)`.
fn operation_name(operation: &OperationIr) -> String {
    let debug = format!("{operation:?}");
    let head = debug.split('{').next().unwrap_or(&debug).trim_end();
    // The last `(` opens the operation's own description (`BinaryOpIr`); those before it, the
    // kinds around it, which are closed again.
    match head.rsplit_once('(') {
        Some((kind, _)) => format!("{kind}{}", ")".repeat(kind.matches('(').count())),
        None => head.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::DType;
    use burn_ir::{BinaryOpIr, NumericOperationIr, OperationIr, TensorId, TensorIr};

    use super::operation_name;

    #[test]
    fn an_operation_is_named_by_its_kind_without_its_tensors() {
        let tensor = |id| TensorIr::uninit(TensorId::new(id), [2, 3].into(), DType::F32);
        let add = OperationIr::NumericFloat(
            DType::F32,
            NumericOperationIr::Add(BinaryOpIr {
                lhs: tensor(1),
                rhs: tensor(2),
                out: tensor(3),
            }),
        );
        assert_eq!(operation_name(&add), "NumericFloat(F32, Add)");
        assert_eq!(operation_name(&OperationIr::Drop(tensor(1))), "Drop");
    }
}
