//! Exponential moving average of a model's weights (TF's `ExponentialMovingAverage`).
//!
//! The averages are a copy of the model with buffers of its own (so updating them never
//! touches the model's batch-norm statistics), without autodiff, on the model's device. Every
//! float tensor is averaged: the trainable weights and the batch-norm moving statistics, as
//! TF's Inception trainer averages `trainable_variables() + moving_average_variables()`.

use std::collections::HashMap;

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::tensor::Tensor;

/// Moving averages of a model's weights.
#[derive(Debug, Clone)]
pub struct MovingAverage<M> {
    averages: M,
    decay: f64,
}

impl<M: Module> MovingAverage<M> {
    /// Averages that start at `model`'s current weights, as TF's shadow variables start at
    /// their variables' initial values.
    pub fn new(model: &M, decay: f64) -> Self {
        Self::from_averages(model.valid(), decay)
    }

    /// Averages restored from a checkpoint; `averages` is the model those were loaded into,
    /// in evaluation state (`valid()`).
    pub fn from_averages(averages: M, decay: f64) -> Self {
        Self { averages, decay }
    }

    /// The decay applied at update number `num_updates` (the global step after the update, as
    /// TF's averages, which run after `apply_gradients`, read it): `min(decay, (1 + n) / (10 + n))`,
    /// so early averages follow the weights closely.
    pub fn decay_at(&self, num_updates: u64) -> f64 {
        let n = num_updates as f64;
        self.decay.min((1.0 + n) / (10.0 + n))
    }

    /// Moves every average towards `model`'s weight: `avg -= (1 - d) * (avg - w)`, with `d`
    /// from [`decay_at`](Self::decay_at).
    pub fn update(&mut self, model: &M, num_updates: u64) {
        let mut weights = Weights(HashMap::new());
        model.visit(&mut weights);
        let mut step = Step {
            weights: weights.0,
            keep: self.decay_at(num_updates),
        };
        let averages = self.averages.clone();
        self.averages = averages.map(&mut step);
    }

    /// The averaged model (evaluation state, no autodiff).
    pub fn averages(&self) -> &M {
        &self.averages
    }

    /// The configured decay.
    pub fn decay(&self) -> f64 {
        self.decay
    }
}

/// Every float tensor of a model, flattened, by id.
struct Weights(HashMap<ParamId, Tensor<1>>);

impl ModuleVisitor for Weights {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let value = param.val().without_autodiff().flatten(0, D - 1);
        self.0.insert(param.id, value);
    }
}

struct Step {
    weights: HashMap<ParamId, Tensor<1>>,
    keep: f64,
}

impl ModuleMapper for Step {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let Some(weight) = self.weights.remove(&param.id) else {
            return param;
        };
        let (id, average, mapper) = param.consume();
        let weight = weight.to_device(&average.device()).reshape(average.dims());
        let moved = average.clone() - (average - weight).mul_scalar(1.0 - self.keep);
        Param::from_mapped_value(id, moved, mapper)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::{Device, TensorData};

    #[derive(Module, Debug)]
    struct Two {
        a: Param<Tensor<1>>,
        b: Param<Tensor<2>>,
    }

    /// The model with weights `a` and `[b, -b]`, its parameters named by `ids`.
    fn two(ids: [ParamId; 2], a: f32, b: f32, device: &Device) -> Two {
        let a = Tensor::from_data(TensorData::new(vec![a], [1]), device);
        let b = Tensor::from_data(TensorData::new(vec![b, -b], [1, 2]), device);
        Two {
            a: Param::initialized(ids[0], a.require_grad()),
            b: Param::initialized(ids[1], b.require_grad()),
        }
    }

    #[test]
    fn decay_warms_up_as_tf() {
        let ids = [ParamId::new(), ParamId::new()];
        let ema = MovingAverage::new(&two(ids, 0.0, 0.0, &Device::flex().autodiff()), 0.9999);
        assert_eq!(ema.decay_at(0), 0.1);
        assert_eq!(ema.decay_at(1), 2.0 / 11.0);
        assert_eq!(ema.decay_at(90), 91.0 / 100.0);
        assert_eq!(ema.decay_at(100_000_000), 0.9999);
    }

    #[test]
    fn averages_follow_the_formula() {
        let device = Device::flex().autodiff();
        let ids = [ParamId::new(), ParamId::new()];
        let mut model = two(ids, 1.0, 2.0, &device);
        let mut ema = MovingAverage::new(&model, 0.95);
        let (mut avg_a, mut avg_b) = (1.0f64, 2.0f64);
        for n in 1..=40u64 {
            let (a, b) = (1.0 + n as f64 * 0.5, (n as f64).sin());
            model = two(ids, a as f32, b as f32, &device);
            ema.update(&model, n);
            let d = 0.95f64.min((1.0 + n as f64) / (10.0 + n as f64));
            avg_a -= (1.0 - d) * (avg_a - a);
            avg_b -= (1.0 - d) * (avg_b - b);
        }
        let got_a: f32 = ema.averages().a.val().into_scalar();
        let got_b: Vec<f32> = ema.averages().b.val().into_data().try_to_vec().unwrap();
        assert!((got_a as f64 - avg_a).abs() < 1e-5, "{got_a} vs {avg_a}");
        assert!(
            (got_b[0] as f64 - avg_b).abs() < 1e-5,
            "{} vs {avg_b}",
            got_b[0]
        );
        assert!((got_b[1] as f64 + avg_b).abs() < 1e-5);
        assert!(
            !ema.averages().a.val().is_autodiff(),
            "averages carry no graph"
        );
    }
}
