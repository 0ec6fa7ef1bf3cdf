//! Running state across towers: batch-norm statistics, and any other tensor a training forward
//! pass updates without training it (a user's own `RunningState`: a moving average, a
//! counter kept as a float).
//!
//! Each tower normalizes with the statistics of its own slice (as TF's towers did; this is not
//! synchronized batch norm), so a model with batch norm does not get exactly the full-batch
//! gradient. What the towers must agree on is the running state used at inference. After every
//! update it is made equal on every replica and on the model, either as the weighted mean over
//! towers or as tower 0's ([`BatchNormSync`]).
//!
//! Which tensors are running state ([`RunningStates`]): by default, every float tensor that is
//! not trained and that the first training step changed on tower 0, found by comparing its
//! values before and after that step ([`Detection`]); frozen weights do not change, so they are
//! left alone. Or only the tensors of given names, with a warning naming every other tensor the
//! first step changed. Burn 0.22's `RunningState` is a buffer shared by every clone and fork of a
//! module, plus updates pending per thread that are only folded into the buffer later. The
//! towers therefore give each replica buffers of its own (`valid().train()` before `fork`),
//! fold each tower's pending update in on its own thread ([`commit`]), read the state with a
//! [`ModuleVisitor`] and write the result back with a [`ModuleMapper`].

use std::collections::HashSet;

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::tensor::{Device, Tensor};
use serde::{Deserialize, Serialize};

use crate::stderr_line::eprint_line;

/// What happens to running state (batch-norm statistics and the like, see [`RunningStates`])
/// after each update; named `average` and `first_tower` in config files. More may come
/// (`#[non_exhaustive]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum BatchNormSync {
    /// The mean over towers, weighted by the weights of the parts each tower took since the
    /// last update ([`TowerBatch::weights`](crate::TowerBatch::weights): their examples unless
    /// the batch weighs its parts otherwise, e.g. by tokens or, in towers-learner, as its
    /// `with_weight` says). Weighted by examples, the running mean is the one a single device
    /// would hold after the whole batch; the running variance is the weighted mean of the
    /// towers' variances (it lacks the spread between the towers' means).
    #[default]
    Average,
    /// Tower 0's statistics, copied to every replica: what TF's multi-GPU Inception trainer did
    /// (it ran the batch-norm update ops of the first tower only).
    FirstTower,
}

/// Which tensors the towers keep in sync as running state. More ways to name them may come
/// (`#[non_exhaustive]`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunningStates {
    /// Every float tensor that is not trained and that the first training step changed on
    /// tower 0: batch norm's `running_mean` and `running_var`, and any `RunningState` of the
    /// model's own. Frozen weights do not change, so they are left alone.
    #[default]
    Changed,
    /// Only the tensors whose name (the last part of their path, e.g. `running_mean`) is one of
    /// these. Any other tensor that the first step changed keeps a value per replica, and a
    /// warning names it.
    Named(Vec<String>),
}

/// Which tensors are running state, as far as the towers know.
#[derive(Clone, Debug)]
pub(crate) enum Selection {
    /// Not known before the first step: every float tensor that is not trained.
    Undecided,
    /// These tensors.
    Ids(HashSet<ParamId>),
}

impl Selection {
    fn selects(&self, id: ParamId, trained: bool) -> bool {
        match self {
            Selection::Undecided => !trained,
            Selection::Ids(ids) => ids.contains(&id),
        }
    }
}

/// One replica's running state, flattened, in visiting order.
#[derive(Clone)]
pub(crate) struct RunningStats(Vec<(ParamId, Tensor<1>)>);

impl RunningStats {
    /// Whether the model has no running state.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Only the tensors `selection` selects (all of these are untrained).
    pub(crate) fn select(mut self, selection: &Selection) -> Self {
        self.0.retain(|(id, _)| selection.selects(*id, false));
        self
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

struct Reader<'a> {
    /// `None`: every float tensor, trained or not.
    selection: Option<&'a Selection>,
    path: Vec<String>,
    stats: Vec<(ParamId, String, Tensor<1>)>,
}

impl ModuleVisitor for Reader<'_> {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let value = param.val();
        let selected = (self.selection)
            .is_none_or(|selection| selection.selects(param.id, value.is_require_grad()));
        if selected {
            let flat = value.flatten(0, D - 1);
            self.stats.push((param.id, self.path.join("."), flat));
        }
    }
}

/// The running state of `module` that `selection` selects (committed values: see [`commit`]).
pub(crate) fn read<M: Module>(module: &M, selection: &Selection) -> RunningStats {
    read_where(module, Some(selection))
}

/// Every float tensor of `module`, running state included: all that a copy of it takes.
/// ([`write`] puts them back.)
pub(crate) fn read_all<M: Module>(module: &M) -> RunningStats {
    read_where(module, None)
}

fn read_where<M: Module>(module: &M, selection: Option<&Selection>) -> RunningStats {
    let stats = read_with_paths(module, selection).into_iter();
    RunningStats(stats.map(|(id, _, t)| (id, t)).collect())
}

fn read_with_paths<M: Module>(
    module: &M,
    selection: Option<&Selection>,
) -> Vec<(ParamId, String, Tensor<1>)> {
    let mut reader = Reader {
        selection,
        path: Vec::new(),
        stats: Vec::new(),
    };
    module.visit(&mut reader);
    reader.stats
}

/// Tower 0's untrained tensors before the first step: which of them the step changes is the
/// model's running state.
pub(crate) struct Detection {
    before: Vec<(ParamId, String, Vec<u32>)>,
}

impl Detection {
    /// The untrained tensors of `model` (tower 0's replica), as they are before the first step.
    pub(crate) fn before<M: Module>(model: &M) -> Self {
        Self {
            before: bits(model),
        }
    }

    /// What is running state by `rule`, from tower 0's replica `after` the first step; under
    /// [`RunningStates::Named`], a warning for each changed tensor that the names leave out.
    pub(crate) fn decide<M: Module>(self, after: &M, rule: &RunningStates) -> Selection {
        let after = bits(after);
        let changed = (self.before.into_iter().zip(after))
            .filter(|(before, after)| before.2 != after.2)
            .map(|(before, _)| (before.0, before.1));
        let ids = match rule {
            RunningStates::Changed => changed.map(|(id, _)| id).collect(),
            RunningStates::Named(names) => {
                let named = |path: &str| names.iter().any(|n| path.rsplit('.').next() == Some(n));
                let (kept, left): (Vec<_>, Vec<_>) = changed.partition(|(_, path)| named(path));
                for (_, path) in left {
                    eprint_line(&format!(
                        "warning: `{path}` is running state (the first training step changed \
                         it, and it is not trained), but not among the names the towers keep \
                         in sync ({names:?}): each replica keeps its own"
                    ));
                }
                kept.into_iter().map(|(id, _)| id).collect()
            }
        };
        Selection::Ids(ids)
    }
}

/// The bits of every untrained float tensor of `model`, with its id and path.
fn bits<M: Module>(model: &M) -> Vec<(ParamId, String, Vec<u32>)> {
    let tensors = read_with_paths(model, Some(&Selection::Undecided));
    (tensors.into_iter())
        .map(|(id, path, t)| {
            let values = t.into_data().convert::<f32>();
            let values = values.try_into_vec::<f32>().expect("converted to f32");
            (id, path, values.into_iter().map(f32::to_bits).collect())
        })
        .collect()
}

impl BatchNormSync {
    /// The statistics every replica should hold, on `device`, from each tower's statistics and
    /// the weight of the parts it took.
    pub(crate) fn combine(
        self,
        towers: Vec<RunningStats>,
        weights: &[f64],
        device: &Device,
    ) -> RunningStats {
        let mut towers = towers.into_iter();
        let first = towers.next().expect("at least one tower");
        let to_device = |stats: RunningStats| stats.into_device(device).0;
        match self {
            BatchNormSync::FirstTower => RunningStats(to_device(first)),
            BatchNormSync::Average => {
                let total: f64 = weights.iter().sum();
                let weight = |i: usize| weights[i] / total;
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
        // A trainable parameter written with a new value must stay trainable, and be a leaf of
        // the graph (the value may come out of a computation, e.g. a flattening).
        let value = value
            .clone()
            .detach()
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
