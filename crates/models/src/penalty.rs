//! [`l2_penalty`]: TF's `decay · Σ W² / 2` over a module's decayed parameters, differentiable
//! or (for a loss whose penalties' gradients the update adds) as a value alone, joined on GPUs.

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::Tensor;
use towers_kernels::{joined_sum_of_squares, joins_square_sums};

use crate::params::{is_moving_statistic, weight_decays};

/// `sum over decayed W of decay * sum(W^2) / 2`, shape `[1]`, differentiable; `None` when
/// `rule` decays nothing.
///
/// The sums of squares are taken first and combined after, one scale per decay value: on a
/// fused GPU the element-wise ops on `[1]` between two reductions are a kernel each, while
/// those after the last reduction are one.
pub fn l2_penalty<M: Module>(module: &M, rule: impl Fn(&str) -> f64) -> Option<Tensor<1>> {
    let sums = decayed(module, rule, Form::SquareSum);
    penalty(sums, |sums| sums.into_iter().reduce(|a, b| a + b))
}

/// [`l2_penalty`]'s value, a constant: the graph cut before it, so that backward takes nothing
/// of it; for a loss whose penalties' gradients the update adds
/// ([`ImageClassifier::loss_decay_in_update`](crate::ImageClassifier::loss_decay_in_update)).
/// On a GPU, with enough decayed tensors ([`joins_square_sums`]), each decay's tensors are
/// joined and summed in a few kernels ([`joined_sum_of_squares`]; lavapipe, 2026-11-30: the
/// value of Inception v3's 98 decayed tensors in 12 launches against 346).
///
/// Take it after the data term (`ClassifierLoss::plus_penalty_value` does): its `[1]`-sized
/// sums and scales then come after the loss's last reduction and fuse with the addition to the
/// loss (the CIFAR-10 net's step on lavapipe: 87 launches, against 95 with the penalty taken
/// first, where they ran as kernels of one op each between reductions).
pub(crate) fn l2_penalty_value<M: Module>(
    module: &M,
    rule: impl Fn(&str) -> f64,
) -> Option<Tensor<1>> {
    let count = weight_decays(module, &rule).len();
    let joined = (module.devices().first()).is_some_and(|device| joins_square_sums(device, count));
    match joined {
        true => penalty(decayed(module, rule, Form::Flat), joined_sum_of_squares),
        false => l2_penalty(module, rule).map(Tensor::detach),
    }
}

/// What [`decayed`] takes of each tensor.
#[derive(Clone, Copy)]
enum Form {
    /// `Σ W²` over the tensor in its own shape (a sum over several short dimensions, right on
    /// every device where none is long: see `towers_kernels::long_sum`), differentiable.
    SquareSum,
    /// The values flattened and detached, to be joined.
    Flat,
}

/// Each decayed parameter of `module` under `rule`, in visiting order: its decay and `form`.
fn decayed<M: Module>(module: &M, rule: impl Fn(&str) -> f64, form: Form) -> Vec<(f64, Tensor<1>)> {
    struct Decayed<F> {
        path: Vec<String>,
        rule: F,
        form: Form,
        found: Vec<(f64, Tensor<1>)>,
    }
    impl<F: Fn(&str) -> f64> ModuleVisitor for Decayed<F> {
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
                let taken = match self.form {
                    Form::SquareSum => param.val().square().sum(),
                    Form::Flat => param.val().detach().flatten(0, D - 1),
                };
                self.found.push((decay, taken));
            }
        }
    }
    let mut visitor = Decayed {
        path: Vec::new(),
        rule,
        form,
        found: Vec::new(),
    };
    module.visit(&mut visitor);
    visitor.found
}

/// `Σ decay/2 · sum(tensors of that decay)` over the decay values of `decayed`.
fn penalty(
    decayed: Vec<(f64, Tensor<1>)>,
    sum: impl Fn(Vec<Tensor<1>>) -> Option<Tensor<1>>,
) -> Option<Tensor<1>> {
    let mut decays: Vec<f64> = decayed.iter().map(|(decay, _)| *decay).collect();
    decays.sort_by(f64::total_cmp);
    decays.dedup();
    (decays.into_iter())
        .map(|decay| {
            let tensors = (decayed.iter())
                .filter(|(d, _)| *d == decay)
                .map(|(_, t)| t.clone())
                .collect();
            sum(tensors)
                .expect("a decay taken from the tensors")
                .mul_scalar(decay / 2.0)
        })
        .reduce(|a, b| a + b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::nn::{Linear, LinearConfig};
    use burn::tensor::Device;

    /// Two decays over three tensors (the third decayed like the first), against the sum on
    /// the host, and its gradient `decay · W`; the value alone the same, without a gradient.
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
        let value = l2_penalty_value(&model, rule).expect("decayed parameters");
        let got = value.clone().into_scalar::<f32>() as f64;
        assert!(
            (got - want).abs() <= 1e-6 * want,
            "value {got} against {want}"
        );
        assert!(!value.is_require_grad(), "the value is a constant");

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
        assert!(l2_penalty_value(&model, |_| 0.0).is_none());
    }
}
