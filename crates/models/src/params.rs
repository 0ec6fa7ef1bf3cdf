//! [`ParamCounts`]: a module's float tensors counted as Keras counts them, trainable
//! parameters apart from batch norm's moving statistics.

use burn::module::{Module, ModuleVisitor, Param, ParamId};
use burn::tensor::Tensor;

/// A module's float tensors split as Keras reports them: trainable parameters, and the
/// batch-norm moving statistics (`running_mean`, `running_var`) that Burn's own
/// `num_params` counts alongside them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParamCounts {
    /// Values an optimizer updates.
    pub trainable: usize,
    /// Moving-average values (two per batch-norm channel).
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

/// `sum over decayed W of decay * sum(W^2) / 2`, shape `[1]`, differentiable; `None` when
/// `rule` decays nothing.
///
/// The sums of squares are taken first and combined after, one scale per decay value: on a
/// fused GPU the element-wise ops on `[1]` between two reductions are a kernel each, while
/// those after the last reduction are one.
pub fn l2_penalty<M: Module>(module: &M, rule: impl Fn(&str) -> f64) -> Option<Tensor<1>> {
    struct Penalty<F> {
        path: Vec<String>,
        rule: F,
        /// Each decayed parameter's decay and sum of squares, in visiting order.
        sums: Vec<(f64, Tensor<1>)>,
    }
    impl<F: Fn(&str) -> f64> ModuleVisitor for Penalty<F> {
        fn enter_module(&mut self, name: &str, _: &str) {
            self.path.push(name.to_string());
        }
        fn exit_module(&mut self, _: &str, _: &str) {
            self.path.pop();
        }
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let path = self.path.join(".");
            let decay = (self.rule)(&path);
            if decay != 0.0 && !is_moving_statistic(&path) {
                self.sums.push((decay, param.val().square().sum()));
            }
        }
    }
    let mut visitor = Penalty {
        path: Vec::new(),
        rule,
        sums: Vec::new(),
    };
    module.visit(&mut visitor);
    let mut decays: Vec<f64> = visitor.sums.iter().map(|(decay, _)| *decay).collect();
    decays.sort_by(f64::total_cmp);
    decays.dedup();
    decays
        .into_iter()
        .map(|decay| {
            let sums = visitor.sums.iter().filter(|(d, _)| *d == decay);
            let sum = sums.map(|(_, s)| s.clone()).reduce(|a, b| a + b);
            sum.expect("a decay taken from the sums")
                .mul_scalar(decay / 2.0)
        })
        .reduce(|a, b| a + b)
}

/// [`l2_penalty`]'s value, a constant: the graph cut after it, so that backward takes nothing
/// of it; for a loss whose penalties' gradients the update adds
/// ([`ImageClassifier::loss_decay_in_update`](crate::ImageClassifier::loss_decay_in_update)).
/// Computing it on the parameters' inner tensors instead launched as many kernels (lavapipe,
/// 2026-11-29: the CIFAR-10 net's forward pass 41 either way, 34 with the penalty tracked).
///
/// Take it after the data term (`ClassifierLoss::plus_penalty_value` does): its `[1]`-sized
/// sums and scales then come after the loss's last reduction and fuse with the addition to the
/// loss (the CIFAR-10 net's step on lavapipe: 87 launches, against 95 with the penalty taken
/// first, where they ran as kernels of one op each between reductions).
pub(crate) fn l2_penalty_value<M: Module>(
    module: &M,
    rule: impl Fn(&str) -> f64,
) -> Option<Tensor<1>> {
    l2_penalty(module, rule).map(Tensor::detach)
}

fn is_moving_statistic(path: &str) -> bool {
    path.ends_with("running_mean") || path.ends_with("running_var")
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

#[cfg(test)]
mod tests {
    use super::*;
    use burn::nn::{Linear, LinearConfig};
    use burn::tensor::Device;

    /// Two decays over three tensors (the third decayed like the first), against the sum on
    /// the host, and its gradient `decay · W`.
    #[test]
    fn l2_penalty_sums_each_decay_times_half_the_squares() {
        #[derive(Module, Debug)]
        struct Two {
            first: Linear,
            second: Linear,
        }
        let device = Device::flex().autodiff();
        let model = Two {
            first: LinearConfig::new(3, 4).init(&device),
            second: LinearConfig::new(4, 2).init(&device),
        };
        let rule = |path: &str| match path {
            "first.weight" | "second.weight" => 0.1,
            "first.bias" => 0.3,
            _ => 0.0,
        };
        let squares = |t: Tensor<1>| -> f64 {
            let values = t.into_data().convert::<f64>().try_to_vec::<f64>().unwrap();
            values.iter().map(|v| v * v).sum()
        };
        let weights = |linear: &Linear| linear.weight.val().flatten::<1>(0, 1);
        let want = 0.1 / 2.0 * (squares(weights(&model.first)) + squares(weights(&model.second)))
            + 0.3 / 2.0 * squares(model.first.bias.as_ref().unwrap().val());
        let penalty = l2_penalty(&model, rule).expect("decayed parameters");
        let got = penalty.clone().into_scalar::<f32>() as f64;
        assert!((got - want).abs() <= 1e-6 * want, "{got} against {want}");

        let grads = penalty.backward();
        let bias = model.first.bias.as_ref().unwrap().val();
        let bias_grad = bias
            .grad(&grads)
            .unwrap()
            .into_data()
            .try_to_vec::<f32>()
            .unwrap();
        let bias = bias.inner().into_data().try_to_vec::<f32>().unwrap();
        for (g, b) in bias_grad.iter().zip(&bias) {
            assert!(
                (g - 0.3 * b).abs() <= 1e-6,
                "bias gradient {g} against {}",
                0.3 * b
            );
        }
        assert!(l2_penalty(&model, |_| 0.0).is_none());
    }
}
