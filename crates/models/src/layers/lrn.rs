//! [`Lrn`]: local response normalization across channels, as `tf.nn.lrn` (the CIFAR-10
//! tutorial net's), on the flex kernel or as a band-matrix product elsewhere.

use burn::config::Config;
use burn::module::Module;
use burn::tensor::Tensor;

/// Configuration of [`Lrn`], named and defaulted as `tf.nn.lrn`'s arguments.
#[derive(Config, Debug)]
#[non_exhaustive]
pub struct LrnConfig {
    /// Half-width of the channel window: each output sums the squares of `2r + 1` channels.
    #[config(default = 5)]
    pub depth_radius: usize,
    /// Offset added before the power, usually positive to avoid dividing by zero.
    #[config(default = 1.0)]
    pub bias: f64,
    /// Scale of the sum of squares; TF does not divide it by the window size.
    #[config(default = 1.0)]
    pub alpha: f64,
    /// Exponent of the denominator.
    #[config(default = 0.5)]
    pub beta: f64,
}

/// Local response normalization across channels, as `tf.nn.lrn`:
/// `y[n,c,h,w] = x[n,c,h,w] / (bias + alpha * sum_{|c'-c| <= r} x[n,c',h,w]^2) ^ beta`.
///
/// Burn has none. On flex (feature `flex`) it runs on burn-towers' own kernel
/// (`flex/norm/lrn.rs`). Elsewhere the channel-window sums are one matrix product with a `[c, c]`
/// band of `alpha`s (`towers_kernels::lrn_band`: zero beyond the edges, so windows there are
/// shorter), whose backward is another product: on flex this measured faster than an average
/// pool over the channel axis, a cumulative sum, or nine shifted slices, with or without
/// autodiff. On Burn's CubeCL devices that is `towers_kernels::lrn_by_band`, with a backward
/// pass of its own (element-wise chains around the product, registered so that fusion joins
/// them).
#[derive(Module, Debug)]
pub struct Lrn {
    depth_radius: usize,
    bias: f64,
    alpha: f64,
    beta: f64,
}

impl LrnConfig {
    /// Initializes an [`Lrn`] layer; it has no parameters.
    pub fn init(&self) -> Lrn {
        assert!(
            self.bias.is_finite() && self.alpha.is_finite() && self.beta.is_finite(),
            "bias, alpha and beta must be finite"
        );
        Lrn {
            depth_radius: self.depth_radius,
            bias: self.bias,
            alpha: self.alpha,
            beta: self.beta,
        }
    }
}

impl Lrn {
    /// Normalizes `[n, c, h, w]` across `c`; the output has the input's shape.
    pub fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        let params = [self.bias, self.alpha, self.beta];
        #[cfg(feature = "flex")]
        if let Some(y) = towers_kernels::flex_route::lrn(&x, self.depth_radius, params) {
            return y;
        }
        if let Some(y) = towers_kernels::lrn_by_band(&x, self.depth_radius, params) {
            return y;
        }
        self.forward_band(x)
    }

    /// [`forward`](Self::forward) by Burn's ops, for every backend: the band product, over the
    /// channels where they lie in memory: last on Burn's CubeCL devices, whose convolutions
    /// write them so (a product over the channels first copied its input there, and its output
    /// then cost the layers after it copies back: 10 of the CIFAR-10 step's 93 launches on
    /// lavapipe), first elsewhere.
    pub fn forward_band(&self, x: Tensor<4>) -> Tensor<4> {
        let channels_last = towers_kernels::on_cubecl(&x.device());
        self.forward_band_over(x, channels_last)
    }

    /// The band product over the channels laid out last or first.
    fn forward_band_over(&self, x: Tensor<4>, channels_last: bool) -> Tensor<4> {
        let [n, c, h, w] = x.dims();
        let band = towers_kernels::lrn_band(c, self.depth_radius, self.alpha, &x.device());
        let squares = x.clone().square();
        let scaled_sums = match channels_last {
            // The band is symmetric: from the right it sums the same windows.
            true => (squares.permute([0, 2, 3, 1]).reshape([n, h * w, c]))
                .matmul(band.unsqueeze::<3>())
                .reshape([n, h, w, c])
                .permute([0, 3, 1, 2]),
            false => (band.unsqueeze::<3>())
                .matmul(squares.reshape([n, c, h * w]))
                .reshape([n, c, h, w]),
        };
        x * scaled_sums.add_scalar(self.bias).powf_scalar(-self.beta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::{Device, TensorData};

    const SHAPE: [usize; 4] = [2, 7, 2, 3];
    const LEN: usize = 2 * 7 * 2 * 3;

    fn index(n: usize, c: usize, h: usize, w: usize) -> usize {
        ((n * SHAPE[1] + c) * SHAPE[2] + h) * SHAPE[3] + w
    }

    /// Deterministic, irregular input of both signs.
    fn input() -> Vec<f64> {
        (0..LEN)
            .map(|i| ((i * 37 % 23) as f64 - 11.0) / 4.0)
            .collect()
    }

    /// `s = bias + alpha * sum of squares over the window`, by hand.
    fn window_sums(x: &[f64], r: usize, bias: f64, alpha: f64) -> Vec<f64> {
        let mut s = vec![0.0; LEN];
        for n in 0..SHAPE[0] {
            for c in 0..SHAPE[1] {
                for h in 0..SHAPE[2] {
                    for w in 0..SHAPE[3] {
                        let lo = c.saturating_sub(r);
                        let hi = (c + r).min(SHAPE[1] - 1);
                        let sq: f64 = (lo..=hi).map(|k| x[index(n, k, h, w)].powi(2)).sum();
                        s[index(n, c, h, w)] = bias + alpha * sq;
                    }
                }
            }
        }
        s
    }

    fn tensor(values: &[f64], device: &Device) -> Tensor<4> {
        let data: Vec<f32> = values.iter().map(|&v| v as f32).collect();
        Tensor::from_data(TensorData::new(data, SHAPE), device)
    }

    fn to_vec(t: Tensor<4>) -> Vec<f32> {
        t.into_data().try_to_vec().unwrap()
    }

    fn assert_close(got: &[f32], want: &[f64], rel: f64) {
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            let tol = rel * w.abs().max(1e-3);
            assert!((g as f64 - w).abs() <= tol, "at {i}: got {g}, want {w}");
        }
    }

    /// The CIFAR-10 tutorial's settings, a strong alpha that makes the cross terms large, and
    /// the other powers the flex kernel computes apart (0.5 by one root, others by `powf`).
    fn configs() -> [LrnConfig; 4] {
        [
            LrnConfig::new()
                .with_depth_radius(4)
                .with_alpha(0.001 / 9.0)
                .with_beta(0.75),
            LrnConfig::new()
                .with_depth_radius(2)
                .with_bias(2.0)
                .with_alpha(0.3)
                .with_beta(0.75),
            LrnConfig::new()
                .with_depth_radius(1)
                .with_bias(1.5)
                .with_alpha(0.2),
            LrnConfig::new()
                .with_depth_radius(3)
                .with_alpha(0.1)
                .with_beta(0.6),
        ]
    }

    /// Every formulation: on flex, `forward` is burn-towers' kernel; `forward_band` is what
    /// every other backend runs, over the channels last on CubeCL devices, first elsewhere.
    const FORMS: [fn(&Lrn, Tensor<4>) -> Tensor<4>; 3] = [
        Lrn::forward,
        |lrn, x| lrn.forward_band_over(x, true),
        |lrn, x| lrn.forward_band_over(x, false),
    ];

    #[test]
    fn forward_matches_the_tf_formula() {
        let device = Device::flex();
        let x = input();
        for config in configs() {
            let s = window_sums(&x, config.depth_radius, config.bias, config.alpha);
            let want: Vec<f64> = x
                .iter()
                .zip(&s)
                .map(|(&x, &s)| x * s.powf(-config.beta))
                .collect();
            for form in FORMS {
                let got = to_vec(form(&config.init(), tensor(&x, &device)));
                assert_close(&got, &want, 1e-5);
            }
        }
    }

    /// d/dx_j of `L = sum_i g_i y_i`:
    /// `g_j s_j^-beta - 2 alpha beta x_j sum_{i : |i-j| <= r} g_i x_i s_i^(-beta-1)`.
    #[test]
    fn gradient_matches_the_analytic_derivative() {
        let device = Device::flex().autodiff();
        let x = input();
        let upstream: Vec<f64> = (0..LEN)
            .map(|i| ((i * 11 % 7) as f64 - 3.0) / 3.0)
            .collect();
        for config in configs() {
            let (r, beta) = (config.depth_radius, config.beta);
            let s = window_sums(&x, r, config.bias, config.alpha);
            let mut want = vec![0.0; LEN];
            for n in 0..SHAPE[0] {
                for c in 0..SHAPE[1] {
                    for h in 0..SHAPE[2] {
                        for w in 0..SHAPE[3] {
                            let j = index(n, c, h, w);
                            let lo = c.saturating_sub(r);
                            let hi = (c + r).min(SHAPE[1] - 1);
                            let cross: f64 = (lo..=hi)
                                .map(|k| {
                                    let i = index(n, k, h, w);
                                    upstream[i] * x[i] * s[i].powf(-beta - 1.0)
                                })
                                .sum();
                            want[j] = upstream[j] * s[j].powf(-beta)
                                - 2.0 * config.alpha * beta * x[j] * cross;
                        }
                    }
                }
            }

            for form in FORMS {
                let input = tensor(&x, &device).require_grad();
                let output = form(&config.init(), input.clone());
                let grads = (output * tensor(&upstream, &device)).sum().backward();
                let got = to_vec(input.grad(&grads).unwrap());
                assert_close(&got, &want, 1e-4);
            }
        }
    }
}
