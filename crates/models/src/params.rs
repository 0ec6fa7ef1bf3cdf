//! [`ParamCounts`]: a module's float tensors counted as Keras counts them, trainable
//! parameters apart from batch norm's moving statistics.

use std::collections::HashSet;

use burn::module::{Module, ModuleVisitor, Param, ParamId};
use burn::tensor::Tensor;

/// A module's float tensors split as Keras reports them: trainable parameters, and the
/// statistics of data (batch norms' `running_mean` and `running_var`, Keras's
/// `Normalization`'s `adapted_mean` and `adapted_var`) that Burn's own `num_params` counts
/// alongside them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParamCounts {
    /// Values an optimizer updates.
    pub trainable: usize,
    /// Statistics of data: moving averages (two per batch-norm channel), adapted means and
    /// variances.
    pub moving: usize,
}

impl ParamCounts {
    fn add(&mut self, path: &str, count: usize) {
        match is_moving_statistic(path) {
            true => self.moving += count,
            false => self.trainable += count,
        }
    }
}

/// One parameter under weight decay: TF adds `decay * l2_loss(W)`, i.e. `decay * sum(W^2) / 2`,
/// to the loss.
#[derive(Debug, Clone, PartialEq)]
pub struct WeightDecay {
    /// Dotted module path, e.g. `local3.weight`.
    pub path: String,
    /// The parameter's id, as in gradients and optimizer state.
    pub id: ParamId,
    /// The decay coefficient.
    pub decay: f64,
}

/// The parameter and its decay, as the towers' `with_weight_decay` takes them.
impl From<WeightDecay> for (ParamId, f64) {
    fn from(term: WeightDecay) -> Self {
        (term.id, term.decay)
    }
}

/// Counts the trainable parameters and moving statistics of `module`.
pub fn count_params<M: Module>(module: &M) -> ParamCounts {
    walk(
        module,
        ParamCounts::default(),
        |counts, path, _, shape, _| counts.add(path, shape.iter().product()),
    )
}

/// Counts per top-level field of `module` (the blocks of a model), in visiting order.
pub(crate) fn count_params_by_field<M: Module>(module: &M) -> Vec<(String, ParamCounts)> {
    walk(
        module,
        Vec::new(),
        |fields: &mut Vec<(String, ParamCounts)>, path, _, shape, _| {
            let field = path.split('.').next().unwrap_or(path);
            if fields.last().is_none_or(|(name, _)| name != field) {
                fields.push((field.to_string(), ParamCounts::default()));
            }
            let (_, counts) = fields.last_mut().expect("pushed above");
            counts.add(path, shape.iter().product());
        },
    )
}

/// The parameters of `module` to which `rule` (given a dotted path) assigns a non-zero decay.
pub fn weight_decays<M: Module>(module: &M, rule: impl Fn(&str) -> f64) -> Vec<WeightDecay> {
    walk(
        module,
        Vec::new(),
        |found: &mut Vec<WeightDecay>, path, id, _, _| {
            let decay = rule(path);
            if decay != 0.0 && !is_moving_statistic(path) {
                found.push(WeightDecay {
                    path: path.to_string(),
                    id,
                    decay,
                });
            }
        },
    )
}

/// The dotted paths of `module`'s frozen parameters (`set_require_grad(false)`: never trained,
/// such as TF-slim's weights outside `--trainable_scopes`), moving statistics aside.
pub fn frozen_params<M: Module>(module: &M) -> Vec<String> {
    let frozen = frozen_ids(module);
    walk(
        module,
        Vec::new(),
        |paths: &mut Vec<String>, path, id, _, _| {
            if frozen.contains(&id) && !is_moving_statistic(path) {
                paths.push(path.to_string());
            }
        },
    )
}

/// A parameter an optimizer updates.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TrainedParam {
    /// Dotted module path, e.g. `local4.weight`.
    pub path: String,
    /// The parameter's id, as in gradients and optimizer state.
    pub id: ParamId,
    /// Its shape.
    pub shape: Vec<usize>,
}

/// `module`'s parameters an optimizer updates, in module order: the frozen ones (see
/// [`frozen_params`]) and moving statistics aside.
pub fn trained_params<M: Module>(module: &M) -> Vec<TrainedParam> {
    let frozen = frozen_ids(module);
    walk(
        module,
        Vec::new(),
        |found: &mut Vec<TrainedParam>, path, id, shape, _| {
            if !frozen.contains(&id) && !is_moving_statistic(path) {
                found.push(TrainedParam {
                    path: path.to_string(),
                    id,
                    shape: shape.to_vec(),
                });
            }
        },
    )
}

/// The ids of `module`'s tensors that take no gradient.
fn frozen_ids<M: Module>(module: &M) -> HashSet<ParamId> {
    struct FrozenIds(HashSet<ParamId>);
    impl ModuleVisitor for FrozenIds {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if !param.val().is_require_grad() {
                self.0.insert(param.id);
            }
        }
    }
    let mut frozen = FrozenIds(HashSet::new());
    module.visit(&mut frozen);
    frozen.0
}

/// Whether the tensor at `path` is a statistic of data rather than a parameter: a batch
/// norm's moving mean or variance, or the adapted ones of Keras's `Normalization`
/// ([`InputNormalization`](crate::InputNormalization)).
pub fn is_moving_statistic(path: &str) -> bool {
    ["running_mean", "running_var", "adapted_mean", "adapted_var"]
        .iter()
        .any(|statistic| path.ends_with(statistic))
}

/// Reads a visited tensor's values (as f32, from its device) when called.
pub(crate) type ReadValues<'a> = &'a dyn Fn() -> Vec<f32>;

/// Visits every float tensor of `module` with its dotted path, id, shape and a reader of its
/// values, folding into `state`.
pub(crate) fn walk<M: Module, S>(
    module: &M,
    state: S,
    f: impl FnMut(&mut S, &str, ParamId, &[usize], ReadValues),
) -> S {
    struct Walk<S, F> {
        path: Vec<String>,
        state: S,
        f: F,
    }
    impl<S, F: FnMut(&mut S, &str, ParamId, &[usize], ReadValues)> ModuleVisitor for Walk<S, F> {
        fn enter_module(&mut self, name: &str, _: &str) {
            self.path.push(name.to_string());
        }
        fn exit_module(&mut self, _: &str, _: &str) {
            self.path.pop();
        }
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let shape = param.lazy_shape();
            let path = self.path.join(".");
            let values = || {
                let data = param.val().into_data().convert::<f32>();
                data.try_into_vec().expect("converted to f32")
            };
            (self.f)(
                &mut self.state,
                &path,
                param.id,
                &shape.dims::<D>(),
                &values,
            );
        }
    }
    let mut visitor = Walk {
        path: Vec::new(),
        state,
        f,
    };
    module.visit(&mut visitor);
    visitor.state
}

/// Every float tensor of `module` (parameters and moving statistics): path, shape, values.
pub(crate) fn walk_values<M: Module>(module: &M) -> Vec<(String, Vec<usize>, Vec<f32>)> {
    walk(module, Vec::new(), |all, path, _, shape, values| {
        all.push((path.to_string(), shape.to_vec(), values()))
    })
}
