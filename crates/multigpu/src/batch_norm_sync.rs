//! Batch-norm running statistics across towers.
//!
//! Each tower normalizes with the statistics of its own slice (as TF's towers did; this is not
//! synchronized batch norm), so a model with batch norm does not get exactly the full-batch
//! gradient. What the towers must agree on is the running mean and variance used at inference.
//! After every update they are made equal on every replica and on the model, either as the
//! weighted mean over towers or as tower 0's.
//!
//! The statistics are the float tensors whose path ends in `running_mean` or `running_var`,
//! the fields of burn-nn's `BatchNorm`. They are `RunningState`s, which in Burn 0.22 are a
//! buffer shared by every clone and fork of a module, plus updates pending per thread that are
//! only folded into the buffer later. The towers therefore give each replica buffers of its own
//! (`valid().train()` before `fork`), fold each tower's pending update in on its own thread
//! ([`commit`]), read them with a [`ModuleVisitor`] and write the result back with a
//! [`ModuleMapper`].

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::tensor::{Device, Tensor};

/// What happens to batch-norm running statistics after each update.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BatchNormSync {
    /// The mean over towers, weighted by the examples each tower saw since the last update.
    /// The running mean is then the one a single device would hold after the whole batch; the
    /// running variance is the weighted mean of the towers' variances (it lacks the spread
    /// between the towers' means).
    #[default]
    Average,
    /// Tower 0's statistics, copied to every replica: what TF's multi-GPU Inception trainer did
    /// (it ran the batch-norm update ops of the first tower only).
    FirstTower,
}

/// The last path component of the tensors this module keeps in sync.
const RUNNING_STATS: [&str; 2] = ["running_mean", "running_var"];

/// One replica's running statistics, flattened, in visiting order.
#[derive(Clone)]
pub(crate) struct RunningStats(Vec<(ParamId, Tensor<1>)>);

impl RunningStats {
    /// Whether the model has no running statistics.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The tensors, in visiting order.
    pub(crate) fn into_values(self) -> Vec<Tensor<1>> {
        self.0.into_iter().map(|(_, t)| t).collect()
    }

    /// The same tensors (ids, order and sizes) with other `values`.
    pub(crate) fn with_values(self, values: Vec<Tensor<1>>) -> Self {
        RunningStats(
            self.0
                .into_iter()
                .zip(values)
                .map(|((id, _), t)| (id, t))
                .collect(),
        )
    }

    /// The same statistics on `device`.
    pub(crate) fn into_device(self, device: &Device) -> Self {
        RunningStats(
            self.0
                .into_iter()
                .map(|(id, t)| (id, t.to_device(device)))
                .collect(),
        )
    }
}

/// Folds the updates pending in `replica`'s running statistics into their values.
///
/// `RunningState` keys a pending update by the thread that made it and folds it in on that
/// thread's next update, or on `valid()`/`train()`. A tower's thread ends with its step, so its
/// update would otherwise stay pending, and the next step's thread would read the stale value.
pub(crate) fn commit<M: Module>(replica: &M) {
    drop(replica.valid());
}

struct Reader {
    /// Every float tensor, not only the running statistics.
    all: bool,
    path: Vec<String>,
    stats: Vec<(ParamId, Tensor<1>)>,
}

impl ModuleVisitor for Reader {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if self.all
            || self
                .path
                .last()
                .is_some_and(|name| RUNNING_STATS.contains(&name.as_str()))
        {
            self.stats.push((param.id, param.val().flatten(0, D - 1)));
        }
    }
}

/// The running statistics of `module` (their committed values: see [`commit`]).
pub(crate) fn read<M: Module>(module: &M) -> RunningStats {
    read_where(module, false)
}

/// Every float tensor of `module`, running statistics included: all that a copy of it takes.
/// ([`write`] puts them back.)
pub(crate) fn read_all<M: Module>(module: &M) -> RunningStats {
    read_where(module, true)
}

fn read_where<M: Module>(module: &M, all: bool) -> RunningStats {
    let mut reader = Reader {
        all,
        path: Vec::new(),
        stats: Vec::new(),
    };
    module.visit(&mut reader);
    RunningStats(reader.stats)
}

impl BatchNormSync {
    /// The statistics every replica should hold, on `device`, from each tower's statistics and
    /// the examples it saw.
    pub(crate) fn combine(
        self,
        towers: Vec<RunningStats>,
        examples: &[usize],
        device: &Device,
    ) -> RunningStats {
        let mut towers = towers.into_iter();
        let first = towers.next().expect("at least one tower");
        let to_device = |stats: RunningStats| stats.into_device(device).0;
        match self {
            BatchNormSync::FirstTower => RunningStats(to_device(first)),
            BatchNormSync::Average => {
                let total: usize = examples.iter().sum();
                let weight = |i: usize| examples[i] as f64 / total as f64;
                let mut sum: Vec<(ParamId, Tensor<1>)> = to_device(first)
                    .into_iter()
                    .map(|(id, t)| (id, t.mul_scalar(weight(0))))
                    .collect();
                for (i, stats) in towers.enumerate() {
                    for ((id, acc), (their_id, t)) in sum.iter_mut().zip(to_device(stats)) {
                        debug_assert_eq!(*id, their_id, "replicas visit their stats in one order");
                        *acc = acc.clone() + t.mul_scalar(weight(i + 1));
                    }
                }
                RunningStats(sum)
            }
        }
    }
}

struct Writer<'a> {
    stats: &'a RunningStats,
}

impl ModuleMapper for Writer<'_> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let Some((_, value)) = self.stats.0.iter().find(|(id, _)| *id == param.id) else {
            return param;
        };
        let (id, old, mapper) = param.consume();
        // A trainable parameter written with a new value must stay trainable.
        let value = value
            .clone()
            .to_device(&old.device())
            .reshape(old.dims())
            .set_require_grad(old.is_require_grad());
        Param::from_mapped_value(id, value, mapper)
    }
}

/// `module` with its running statistics replaced by `stats` (moved to each one's device).
pub(crate) fn write<M: Module>(module: M, stats: &RunningStats) -> M {
    module.map(&mut Writer { stats })
}
