//! What the recurrent layers' tests (`lstm.rs`, `gru.rs`) share: one forward and backward pass
//! of a layer from an initial state, its results and gradients, compared with Burn's layer's.

use burn::module::{Module, ModuleVisitor, Param};
use burn::nn::LstmState;
use burn::tensor::{Gradients, Tensor};
use towers_testing::nets::pattern;

use crate::drop_in::{assert_agree, device};

/// A recurrent layer's state as its tensors: an LSTM's hidden state and cell, a GRU's hidden
/// state.
pub(crate) trait StateTensors<const S: usize>: Clone {
    fn tensors(&self) -> Vec<Tensor<S>>;
    fn from_tensors(tensors: Vec<Tensor<S>>) -> Self;
}

impl<const S: usize> StateTensors<S> for LstmState<S> {
    fn tensors(&self) -> Vec<Tensor<S>> {
        vec![self.hidden.clone(), self.cell.clone()]
    }

    fn from_tensors(tensors: Vec<Tensor<S>>) -> Self {
        let [hidden, cell] = <[_; 2]>::try_from(tensors).expect("a hidden state and a cell");
        LstmState::new(cell, hidden)
    }
}

impl<const S: usize> StateTensors<S> for Tensor<S> {
    fn tensors(&self) -> Vec<Tensor<S>> {
        vec![self.clone()]
    }

    fn from_tensors(tensors: Vec<Tensor<S>>) -> Self {
        let [hidden] = <[_; 1]>::try_from(tensors).expect("a hidden state");
        hidden
    }
}

/// What a forward pass gave and its gradients, flattened: the output and the last state's
/// tensors; the gradients of the input and the initial state's tensors (where there is one);
/// every parameter's gradient, in visiting order.
pub(crate) struct Run {
    pub(crate) values: Vec<Tensor<1>>,
    grads: Vec<Tensor<1>>,
    param_grads: Tensor<1>,
}

/// `forward` of `x` from `state` under the loss `sum(output · a) + sum(last_1 · b) + ...`
/// over the last state's tensors (fixed uneven weights, so that a gradient in the wrong place
/// shows).
pub(crate) fn run<M: Module, St: StateTensors<S>, const S: usize>(
    module: &M,
    x: &Tensor<3>,
    state: Option<&St>,
    forward: impl Fn(Tensor<3>, Option<St>) -> (Tensor<3>, St),
) -> Run {
    let device = device();
    let x = x.clone().require_grad();
    let initial = state.map(|s| s.tensors().into_iter().map(Tensor::require_grad).collect());
    let initial: Option<Vec<Tensor<S>>> = initial;
    let (output, last) = forward(x.clone(), initial.clone().map(St::from_tensors));
    let flat = |t: Tensor<S>| t.reshape([-1]);
    let values: Vec<Tensor<1>> = std::iter::once(output.reshape([-1]))
        .chain(last.tensors().into_iter().map(flat))
        .collect();
    let weigh = |(i, t): (usize, &Tensor<1>)| {
        let weights = pattern(t.dims(), 3 + 2 * i, &device) + 1.0;
        (t.clone() * weights).sum()
    };
    let loss = values.iter().enumerate().map(weigh).reduce(|a, b| a + b);
    let grads = loss.expect("an output").backward();
    let dx = x.grad(&grads).expect("an input gradient").reshape([-1]);
    let initial = initial.into_iter().flatten();
    let initial = initial.map(|t| flat(t.grad(&grads).expect("a state gradient")));
    Run {
        values: values.into_iter().map(Tensor::detach).collect(),
        grads: std::iter::once(dx).chain(initial).collect(),
        param_grads: param_grads(module, &grads),
    }
}

/// Every float parameter's gradient in `grads`, flattened in visiting order.
fn param_grads<M: Module>(module: &M, grads: &Gradients) -> Tensor<1> {
    struct Collect<'a>(&'a Gradients, Vec<Tensor<1>>);
    impl ModuleVisitor for Collect<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let grad = param.val().grad(self.0).expect("a parameter gradient");
            self.1.push(grad.reshape([-1]));
        }
    }
    let mut collect = Collect(grads, Vec::new());
    module.visit(&mut collect);
    Tensor::cat(collect.1, 0)
}

/// Panics unless the two runs agree within 1e-5 of each value's largest, naming what differs.
pub(crate) fn assert_runs_agree(ours: Run, burns: Run, what: &str) {
    let pairs = [
        ("value", ours.values, burns.values),
        ("gradient", ours.grads, burns.grads),
    ];
    for (kind, got, want) in pairs {
        assert_eq!(got.len(), want.len(), "{what}: {kind}s compared");
        for (i, (got, want)) in got.into_iter().zip(want).enumerate() {
            // Values: the output, then the last state's; gradients: the input's, then the
            // initial state's.
            assert_agree(got, want, 1e-5, &format!("{what}: {kind} {i}"));
        }
    }
    let (got, want) = (ours.param_grads, burns.param_grads);
    assert_agree(got, want, 1e-5, &format!("{what}: parameters' gradients"));
}

/// `module` with every parameter multiplied by `factor` (the seeded pattern is within ±0.2,
/// under which no gate saturates).
pub(crate) fn scaled<M: Module>(module: M, factor: f32) -> M {
    struct Scale(f32);
    impl burn::module::ModuleMapper for Scale {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
            param.map(|value| {
                let scaled = (value.clone() * self.0).detach();
                match value.is_require_grad() {
                    true => scaled.require_grad(),
                    false => scaled,
                }
            })
        }
    }
    module.map(&mut Scale(factor))
}
