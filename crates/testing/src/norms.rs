//! [`assert_batch_norms_match_burns`]: `towers_kernels::batch_norm_train` and
//! `offset_batch_norm` (and their `_moving`, `_relu_` and `_relu6_` forms), outputs,
//! statistics, moved averages and the input's gradient against Burn's `batch_norm_train` (and
//! `relu`, `relu6`) and Burn's autodiff of it on one device, the parameters' gradients against
//! sums in f64 on the host.

use burn::tensor::activation;
use burn::tensor::module::batch_norm_train;
use burn::tensor::{Device, Distribution, Tensor};
use towers_kernels::{
    MovingAverages, batch_norm_relu_train_moving, batch_norm_relu6_train_moving,
    batch_norm_train_moving, offset_batch_norm, offset_batch_norm_moving,
    offset_batch_norm_relu_moving,
};

use crate::compare::rel_diff;

/// Asserts that both batch norms take `device` (a CubeCL one) and equal Burn's there to float
/// rounding: the output, the batch's mean and variance, the moving averages moved towards them
/// (by a momentum of 0.3, from random averages), and the input's gradient under a loss
/// that weighs each output differently (a plain sum would give the input a zero gradient); the
/// scale's and the offset's gradients equal the same sums in f64; `offset_batch_norm` against
/// Burn's with a scale of ones; the `_relu_` and `_relu6_` forms against Burn's `relu` and
/// `relu6` after Burn's batch norm, their gradients through the rectifier's mask (each case
/// with each rectifier and without; ReLU6 with a scale large enough to reach its cap).
/// For channels far from zero (where a variance taken as `E[x²] - E[x]²` would cancel), few
/// values per channel, an input with NHWC strides (as a convolution leaves it), inputs of rank
/// 2 and 3, and an input that requires no gradient.
pub fn assert_batch_norms_match_burns(device: &Device) {
    let cases = [
        ([4, 6, 5, 7], 0.0, false),
        ([3, 32, 17, 17], 0.0, true),
        ([2, 8, 9, 9], 100.0, false),
        ([5, 3, 2, 1], 0.0, true),
    ];
    for ([n, c, h, w], offset, channels_last) in cases {
        let x = if channels_last {
            Tensor::<4>::random([n, h, w, c], Distribution::Uniform(-2.0, 3.0), device)
                .permute([0, 3, 1, 2])
        } else {
            Tensor::<4>::random([n, c, h, w], Distribution::Uniform(-2.0, 3.0), device)
        };
        let x = x.add_scalar(offset);
        for form in Form::ALL {
            let what =
                format!("{n}x{c}x{h}x{w}, offset {offset}, NHWC strides {channels_last}, {form}");
            let gamma_beta = parameters(c, form, device);
            assert_matches(&what, (x.clone(), offset), gamma_beta, form, device);
        }
    }
    // Other ranks: `[n, c]` (a dense layer's batch norm), and `[n, c, l]` with the channels
    // last in memory (a sequence's, as a 1-D convolution leaves it).
    let flat = Tensor::<2>::random([12, 5], Distribution::Uniform(-2.0, 3.0), device);
    let sequence =
        Tensor::<3>::random([3, 9, 4], Distribution::Uniform(-2.0, 3.0), device).permute([0, 2, 1]);
    for form in Form::ALL {
        let what = format!("12x5, {form}");
        let gamma_beta = parameters(5, form, device);
        assert_matches(&what, (flat.clone(), 0.0), gamma_beta, form, device);
        let what = format!("3x4x9, channels last, {form}");
        let gamma_beta = parameters(4, form, device);
        assert_matches(&what, (sequence.clone(), 0.0), gamma_beta, form, device);
    }
}

/// Which batch norm a case takes: with a scale or without, and what after it.
#[derive(Clone, Copy)]
struct Form {
    scaled: bool,
    after: After,
}

/// What follows the batch norm in its op.
#[derive(Clone, Copy, Debug)]
enum After {
    Nothing,
    Relu,
    Relu6,
}

impl Form {
    /// Every batch norm of towers_kernels' family: there is no ReLU6 form without a scale.
    const ALL: [Form; 5] = [
        Form::new(false, After::Nothing),
        Form::new(false, After::Relu),
        Form::new(true, After::Nothing),
        Form::new(true, After::Relu),
        Form::new(true, After::Relu6),
    ];

    const fn new(scaled: bool, after: After) -> Self {
        Self { scaled, after }
    }
}

impl std::fmt::Display for Form {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "scale {}, then {:?}", self.scaled, self.after)
    }
}

/// A scale (ones where there is none) and an offset for `c` channels; before a ReLU6, a scale
/// that takes some outputs past its cap of 6 (the normalized values reach ±1.7).
fn parameters(c: usize, Form { scaled, after }: Form, device: &Device) -> (Tensor<1>, Tensor<1>) {
    let range = match after {
        After::Relu6 => Distribution::Uniform(4.0, 6.0),
        _ => Distribution::Uniform(0.5, 2.0),
    };
    let gamma = match scaled {
        true => Tensor::<1>::random([c], range, device),
        false => Tensor::ones([c], device),
    };
    (
        gamma,
        Tensor::<1>::random([c], Distribution::Default, device),
    )
}

/// One case of [`assert_batch_norms_match_burns`].
fn assert_matches<const D: usize>(
    what: &str,
    (x, offset): (Tensor<D>, f64),
    (gamma, beta): (Tensor<1>, Tensor<1>),
    Form { scaled, after }: Form,
    device: &Device,
) {
    let c = x.dims()[1];
    let (x, gamma, beta) = (x.require_grad(), gamma.require_grad(), beta.require_grad());
    let averages = MovingAverages::new(
        Tensor::random([c], Distribution::Default, device),
        Tensor::random([c], Distribution::Uniform(0.5, 2.0), device),
        0.3,
    );
    let ours = |x: &Tensor<D>, gamma: &Tensor<1>, beta: &Tensor<1>| {
        let averages = averages.clone();
        match (scaled, after) {
            (true, After::Nothing) => batch_norm_train_moving(x, gamma, beta, 1e-3, averages),
            (true, After::Relu) => batch_norm_relu_train_moving(x, gamma, beta, 1e-3, averages),
            (true, After::Relu6) => batch_norm_relu6_train_moving(x, gamma, beta, 1e-3, averages),
            (false, After::Nothing) => offset_batch_norm_moving(x, beta, 1e-3, averages),
            (false, After::Relu) => offset_batch_norm_relu_moving(x, beta, 1e-3, averages),
            (false, After::Relu6) => unreachable!("no ReLU6 form without a scale"),
        }
        .expect("the batch norm routes this device")
    };
    // Values around an offset have a mean rounded at f32's precision of the offset, a few units
    // of it apart between two orders of summing (ours by columns, Burn's by rows), and every
    // normalized value moves by that over the spread (σ ≈ 1.44 for U(-2, 3)): outputs 1.2e-5
    // apart, gradients 2.2e-5 of a channel's terms, at offset 100 (lavapipe, 2026-12-05). The
    // statistics themselves stay within 1e-5, and the cases without an offset within the
    // tolerances below alone.
    let mean_rounding = 8.0 * f32::EPSILON * offset as f32 / 1.44;
    let (y, moved) = ours(&x, &gamma, &beta);
    let burns = batch_norm_train(x.clone(), gamma.clone(), beta.clone(), 1e-3);
    let close = |got: Tensor<1>, average: Tensor<1>, batch: Tensor<1>, of: &str| {
        let want = average.mul_scalar(0.7) + batch.mul_scalar(0.3);
        let diff = rel_diff(got, want);
        assert!(diff <= 1e-5, "{what}: moved {of} {diff} apart");
    };
    close(
        moved.mean,
        averages.mean.clone(),
        burns.mean.clone(),
        "mean",
    );
    let variance = burns.variance.clone();
    close(
        moved.variance,
        averages.variance.clone(),
        variance,
        "variance",
    );
    // Without averages, the batch's own statistics.
    let (_, [mean, variance]) = match scaled {
        true => towers_kernels::batch_norm_train(&x, &gamma, &beta, 1e-3),
        false => offset_batch_norm(&x, &beta, 1e-3),
    }
    .expect("the batch norm routes this device");
    for (got, want, of) in [
        (mean, &burns.mean, "mean"),
        (variance, &burns.variance, "variance"),
    ] {
        let diff = rel_diff(got, want.clone());
        assert!(diff <= 1e-5, "{what}: {of} {diff} apart");
    }
    let burns_output = match after {
        After::Nothing => burns.output.clone(),
        After::Relu => activation::relu(burns.output.clone()),
        After::Relu6 => activation::relu6(burns.output.clone()),
    };
    let output_diff = rel_diff(y.clone(), burns_output.clone());
    assert!(
        output_diff <= 1e-5 + mean_rounding,
        "{what}: outputs {output_diff} apart"
    );
    // Burn's gradients through our output's mask (none where it is `<= 0`, as Burn's
    // `relu_backward` takes it, or `>= 6` after ReLU6, as TF's `relu6` gradient): an output
    // within rounding of an end may fall on the other side of it in Burn's batch norm, and
    // Burn's own mask would then differ by a whole term.
    let passed = || y.clone().detach().greater_elem(0.0).float();
    let kept = match after {
        After::Nothing => Tensor::ones(x.shape(), device),
        After::Relu => passed(),
        After::Relu6 => passed() * y.clone().detach().lower_elem(6.0).float(),
    };
    if let After::Relu6 = after {
        let capped = y
            .clone()
            .greater_equal_elem(6.0)
            .float()
            .sum()
            .into_scalar::<f32>();
        assert!(capped > 0.0, "{what}: no output reaches ReLU6's cap");
    }
    let burns_masked = burns.output.clone() * kept.clone();

    let weights = Tensor::<D>::random(x.shape(), Distribution::Default, device);
    let gradients = |y: Tensor<D>| {
        let grads = (y * weights.clone()).sum().backward();
        let dx = x.grad(&grads).expect("the input's gradient");
        let [dgamma, dbeta] = [&gamma, &beta].map(|p| p.grad(&grads));
        (dx, dgamma, dbeta.expect("the offset's gradient"))
    };
    let (ours_dx, ours_dgamma, ours_dbeta) = gradients(y);
    let (burns_dx, _, _) = gradients(burns_masked);
    // The input gradient, `r·γ·(w - mean(w) - x̂·mean(w·x̂))` per channel (`r = 1/√(var + ε)`,
    // `w` the loss's weights), is a difference of nearly equal terms where a channel has few
    // values (12 in the `[12, 5]` case): its largest value can be far below its terms', and f32
    // rounding of the terms then shows at ~1e-4 of it (2e-4 once, on lavapipe, 2026-12-07). So
    // measured against the terms, `r·γ·|w|`, where rounding stays under 1e-6 (lavapipe, six
    // runs), and up to 3.1e-5 at offset 100, whose mean's rounding every term carries.
    let mut channel_dims = [1; D];
    channel_dims[1] = c;
    let rate = (burns.variance.clone() + 1e-3).sqrt().recip();
    let terms = weights.clone().abs() * (gamma.clone().detach().abs() * rate).reshape(channel_dims);
    let terms: f32 = terms.max().into_scalar();
    let dx_off = (ours_dx - burns_dx).abs().max().into_scalar::<f32>() / terms;
    assert!(
        dx_off <= 1e-5 + mean_rounding,
        "{what}: input gradients {dx_off} of their terms apart"
    );
    // The offset's and the scale's gradients are sums over a channel's values of the loss's
    // weights (times the normalized input, ~1 in size), compared with the same sums in f64 on
    // the host: where every channel's sum cancels to near zero (3 channels of 10 values, now
    // and then), only rounding is left, so relative to a channel's terms, not to its sum.
    // Burn's own sums on lavapipe are no reference at this precision: one invocation sums a
    // channel's 867 values in a row there (its `unit` routine), 0.6-1.3e-6 of the terms from
    // f64, where ours (compensated, in pieces) kept within 3.5e-7 (2026-12-05).
    let weights = weights * kept;
    let (exact_dbeta, exact_dgamma) = exact_parameter_gradients(&x, &weights);
    let terms = weights.abs().sum().into_scalar::<f32>() / c as f32;
    let close_to_terms = |got: Tensor<1>, want: Vec<f64>, of: &str| {
        let want = Tensor::<1>::from_data(want.as_slice(), device);
        let diff = (got - want).abs().max().into_scalar::<f32>() / terms;
        assert!(
            diff <= 1e-6 + mean_rounding,
            "{what}: {of} {diff} apart (of a channel's terms)"
        );
    };
    close_to_terms(ours_dbeta, exact_dbeta, "offset gradient");
    match scaled {
        true => close_to_terms(
            ours_dgamma.expect("the scale's gradient"),
            exact_dgamma,
            "scale gradient",
        ),
        false => assert!(ours_dgamma.is_none(), "{what}: a gradient for no scale"),
    }

    let (x, gamma, beta) = (x.detach(), gamma.detach(), beta.detach());
    let (untracked, _) = ours(&x, &gamma, &beta);
    let untracked_diff = rel_diff(untracked, burns_output.detach());
    assert!(
        untracked_diff <= 1e-5 + mean_rounding,
        "{what}: untracked outputs {untracked_diff} apart"
    );
}

/// Per channel of `x`, the offset's and the scale's gradients under the loss `Σ y · weights`,
/// `Σ weights` and `Σ weights · x̂`, in f64 on the host (`x̂` on the batch's mean and biased
/// variance, ε 1e-3 as the cases take it).
fn exact_parameter_gradients<const D: usize>(
    x: &Tensor<D>,
    weights: &Tensor<D>,
) -> (Vec<f64>, Vec<f64>) {
    let dims = x.dims();
    let (c, inner) = (dims[1], dims[2..].iter().product::<usize>());
    let values = |t: &Tensor<D>| -> Vec<f64> {
        let data = t.clone().detach().into_data().convert::<f32>();
        data.iter::<f32>().map(f64::from).collect()
    };
    let (xs, ws) = (values(x), values(weights));
    let channel = |i: usize| (i / inner) % c;
    let per_channel = (xs.len() / c) as f64;
    let (mut mean, mut variance) = (vec![0.0; c], vec![0.0; c]);
    xs.iter()
        .enumerate()
        .for_each(|(i, v)| mean[channel(i)] += v / per_channel);
    for (i, v) in xs.iter().enumerate() {
        variance[channel(i)] += (v - mean[channel(i)]).powi(2) / per_channel;
    }
    let (mut dbeta, mut dgamma) = (vec![0.0; c], vec![0.0; c]);
    for (i, (v, w)) in xs.iter().zip(&ws).enumerate() {
        let ch = channel(i);
        dbeta[ch] += w;
        dgamma[ch] += w * (v - mean[ch]) / (variance[ch] + 1e-3).sqrt();
    }
    (dbeta, dgamma)
}
