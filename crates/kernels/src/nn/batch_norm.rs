//! [`BatchNorm`] and [`BatchNormConfig`]: Burn's batch normalization, on burn-towers' flex
//! kernel for `[n, c, h, w]` f32 inputs (two passes forward, two backward, where Burn's
//! composition takes a dozen, each a new tensor), and while training on a CubeCL device on
//! [`crate::batch_norm_train_moving`] (two reductions backward, where Burn's takes four).

use burn::config::Config;
use burn::tensor::{Device, Tensor};

use crate::batch_norm::{
    MovingAverages, batch_norm_relu_train_moving, batch_norm_relu6_train_moving,
    batch_norm_train_moving,
};
use crate::cubecl_device::on_cubecl;
use crate::dispatch::relu6;
use crate::nn::wrapped::wrapped_module;

/// One of the batch norms of [`crate::batch_norm_train_moving`]'s family: the output and the
/// moved averages of `(x, gamma, beta, epsilon, averages)`.
type Normalization<const D: usize> = fn(
    &Tensor<D>,
    &Tensor<1>,
    &Tensor<1>,
    f64,
    MovingAverages,
) -> Option<(Tensor<D>, MovingAverages)>;

/// [`burn::nn::BatchNormConfig`], field for field, whose [`init`](Self::init) makes this
/// crate's [`BatchNorm`].
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct BatchNormConfig {
    /// The number of features. Must be greater than zero.
    pub num_features: usize,
    /// A finite, positive value required for numerical stability.
    #[config(default = 1e-5)]
    pub epsilon: f64,
    /// A finite momentum in `[0, 1]` used to update the running statistics.
    #[config(default = 0.1)]
    pub momentum: f64,
}

impl BatchNormConfig {
    /// A new [`BatchNorm`], initialized as Burn's `BatchNormConfig::init` initializes it
    /// (panicking on the same invalid values).
    pub fn init(&self, device: &Device) -> BatchNorm {
        BatchNorm::from(burn::nn::BatchNormConfig::from(self).init(device))
    }
}

impl From<&BatchNormConfig> for burn::nn::BatchNormConfig {
    fn from(config: &BatchNormConfig) -> Self {
        Self {
            num_features: config.num_features,
            epsilon: config.epsilon,
            momentum: config.momentum,
        }
    }
}

/// Burn's [`burn::nn::BatchNorm`], whose [`forward`](Self::forward) runs on burn-towers' flex
/// kernel for `[n, c, h, w]` f32 inputs on flex, and on [`crate::batch_norm_train_moving`] while
/// training on a CubeCL device, updating the running statistics as Burn's.
#[derive(Clone, Debug)]
pub struct BatchNorm {
    inner: burn::nn::BatchNorm,
}

wrapped_module!(BatchNorm, burn::nn::BatchNorm);

impl BatchNorm {
    /// `gamma·(x - mean)/√(var + epsilon) + beta` per channel of `[n, c, ...]`, as Burn's
    /// `BatchNorm::forward`: on the batch's statistics (the running ones updated by
    /// `momentum`) on an autodiff device with training on, on the running ones otherwise.
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        #[cfg(feature = "flex")]
        if let Some(y) = self.forward_flex(&input) {
            return y;
        }
        if let Some(y) = self.forward_training_gpu(&input, batch_norm_train_moving) {
            return y;
        }
        self.inner.forward(input)
    }

    /// `relu(self.forward(input))`, as a ResNet's or a VGG's layers take it: while training on
    /// a CubeCL device in one op ([`crate::batch_norm_relu_train_moving`]), whose kernels take
    /// the ReLU's backward pass in, where a ReLU apart took a kernel of its own.
    pub fn forward_relu<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        match self.forward_training_gpu(&input, batch_norm_relu_train_moving) {
            Some(y) => y,
            None => burn::tensor::activation::relu(self.forward(input)),
        }
    }

    /// `relu6(self.forward(input))` (`min(max(y, 0), 6)`), as MobileNetV2's layers take it:
    /// while training on a CubeCL device in one op ([`crate::batch_norm_relu6_train_moving`],
    /// TF's gradient at the ends), elsewhere [`relu6`] after [`forward`](Self::forward).
    pub fn forward_relu6<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        match self.forward_training_gpu(&input, batch_norm_relu6_train_moving) {
            Some(y) => y,
            None => relu6(self.forward(input)),
        }
    }

    /// [`forward`](Self::forward) (a rectifier after it, as `normalized` takes it) while
    /// training on a CubeCL device: on [`crate::batch_norm_train_moving`] or one of its rectified
    /// forms, whose backward pass takes two reductions where Burn's takes four, and which move
    /// the running statistics in their own kernels.
    fn forward_training_gpu<const D: usize>(
        &self,
        input: &Tensor<D>,
        normalized: Normalization<D>,
    ) -> Option<Tensor<D>> {
        let bn = &self.inner;
        let device = input.device();
        if !(device.is_autodiff() && bn.training.is_enabled() && on_cubecl(&device)) {
            return None;
        }
        let (gamma, beta) = (bn.gamma.val(), bn.beta.val());
        let averages = self.running(&device);
        let (y, moved) = normalized(input, &gamma, &beta, bn.epsilon, averages)?;
        self.update_running(moved);
        Some(y)
    }

    /// The running statistics on `device`, moved by `momentum`.
    fn running(&self, device: &Device) -> MovingAverages {
        let bn = &self.inner;
        MovingAverages::of_states(&bn.running_mean, &bn.running_var, bn.momentum, device)
    }

    /// The running statistics replaced by `moved` (as Burn's `BatchNorm` moves them).
    fn update_running(&self, moved: MovingAverages) {
        moved.store_in(&self.inner.running_mean, &self.inner.running_var);
    }

    /// [`forward`](Self::forward) on the flex kernel, for `[n, c, h, w]` f32 flex inputs.
    #[cfg(feature = "flex")]
    fn forward_flex<const D: usize>(&self, input: &Tensor<D>) -> Option<Tensor<D>> {
        use crate::dispatch::flex_route::{batch_norm, batch_norm_given};

        let dims = input.dims();
        let images: [usize; 4] = dims.as_slice().try_into().ok()?;
        let x: Tensor<4> = input.clone().reshape(images);
        let device = x.device();
        let bn = &self.inner;
        let affine = [bn.gamma.val(), bn.beta.val()];
        let y = match device.is_autodiff() && bn.training.is_enabled() {
            true => {
                let (y, moments) = batch_norm(&x, affine, bn.epsilon)?;
                self.update_running(self.running(&device).moved_towards_moments(moments));
                y
            }
            false => {
                let mean = bn.running_mean.value().to_device(&device);
                let variance = bn.running_var.value().to_device(&device);
                batch_norm_given(&x, affine, [mean, variance], bn.epsilon)?
            }
        };
        Some(y.reshape(dims))
    }
}
