//! TF's initializers that Burn lacks: [`truncated_normal`], lazy as Burn's own; and Keras's
//! defaults in Burn's terms (`glorot_uniform`, `zeros`).

use burn::module::{Param, ParamId};
use burn::nn::Initializer;
use burn::tensor::{Device, Distribution, Shape, Tensor};

/// Keras's default kernel initializer, `glorot_uniform`.
pub(crate) fn glorot_uniform() -> Initializer {
    Initializer::XavierUniform { gain: 1.0 }
}

/// Keras's default bias, `zeros`: Burn's layers draw their biases from the kernel's initializer.
pub(crate) fn zeros(channels: usize, device: &Device) -> Param<Tensor<1>> {
    Param::from_tensor(Tensor::zeros([channels], device))
}

/// A parameter drawn from TF's `truncated_normal_initializer(0, stddev)`: normal values, those
/// beyond two standard deviations drawn again. Burn has no such initializer, and the TF
/// references use it for every weight. Lazy, like Burn's own initializers, so a model can be
/// built and counted without allocating its weights.
pub fn truncated_normal<const D: usize>(
    shape: [usize; D],
    stddev: f64,
    device: &Device,
) -> Param<Tensor<D>> {
    Param::uninitialized(
        ParamId::new(),
        move |device, require_grad| {
            let standard = || Tensor::<D>::random(shape, Distribution::Normal(0.0, 1.0), device);
            let mut values = standard();
            loop {
                let outside = values.clone().abs().greater_elem(2.0);
                if !outside.clone().any().into_scalar::<bool>() {
                    break;
                }
                values = values.mask_where(outside, standard());
            }
            values.mul_scalar(stddev).set_require_grad(require_grad)
        },
        device.clone(),
        true,
        Shape::from(shape),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_stay_within_two_stddevs_with_the_truncated_spread() {
        let device = Device::flex();
        device.seed(7);
        let values: Vec<f32> = truncated_normal([256, 256], 0.04, &device)
            .val()
            .into_data()
            .try_to_vec()
            .unwrap();
        let n = values.len() as f64;
        let mean = values.iter().map(|&v| v as f64).sum::<f64>() / n;
        let std = (values
            .iter()
            .map(|&v| (v as f64 - mean).powi(2))
            .sum::<f64>()
            / n)
            .sqrt();
        assert!(values.iter().all(|v| v.abs() <= 0.08 + 1e-6));
        assert!(mean.abs() < 1e-3, "mean {mean}");
        // A normal truncated at two sigma keeps 0.8796 of its standard deviation.
        assert!((std / 0.04 - 0.8796).abs() < 0.01, "std {std}");
    }
}
