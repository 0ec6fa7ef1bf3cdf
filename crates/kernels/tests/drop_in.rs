//! The drop-in layers of `towers_kernels::nn` against Burn's own: the same outputs and
//! gradients (input and parameters) from the same parameters, on flex (where the kernels run)
//! in the layouts the kernels take and in those they leave to Burn; records saved from a model
//! of either kind load into the other; configs saved from either load as the other.

use burn::module::{Module, Param};
use burn::nn::{PaddingConfig1d, PaddingConfig2d};
use burn::tensor::{DType, Device, Int, Tensor};
use towers_kernels::{Precision, nn};
use towers_testing::compare::{rel_diff, values};
use towers_testing::nets::{pattern, seeded};

use burn_net::Net as BurnNet;
use our_net::Net as OurNet;

pub(crate) fn device() -> Device {
    Device::flex().autodiff()
}

/// An input to differentiate: `seed`'s fixed pattern (not the device's generator, which tests
/// running at once share).
fn input<const D: usize>(dims: [usize; D], seed: usize) -> Tensor<D> {
    pattern(dims, seed, &device()).require_grad()
}

/// The output of `forward` on `x`, the gradient of `sum(output * weights)` (weights fixed and
/// uneven, so that a wrong place shows) with respect to `x` and to `param` (if any).
fn output_and_grads<const D: usize, const E: usize, const P: usize>(
    x: Tensor<D>,
    param: Option<&Param<Tensor<P>>>,
    forward: impl Fn(Tensor<D>) -> Tensor<E>,
) -> (Tensor<E>, Tensor<D>, Option<Tensor<P>>) {
    let y = forward(x.clone());
    let weights = pattern(y.dims(), 99, &device()) + 1.0;
    let grads = (y.clone() * weights).sum().backward();
    let dx = x.grad(&grads).expect("input gradient");
    let dp = param.map(|p| p.val().grad(&grads).expect("parameter gradient"));
    (y.detach(), dx, dp)
}

/// Panics unless `ours` and `burns` agree within `tolerance` relative to Burn's largest value
/// (or a reference's: `burns` is the value compared with).
pub(crate) fn assert_agree<const D: usize>(
    ours: Tensor<D>,
    burns: Tensor<D>,
    tolerance: f32,
    what: &str,
) {
    assert_eq!(ours.dims(), burns.dims(), "{what}: shapes");
    let diff = rel_diff(ours, burns);
    assert!(
        diff <= tolerance,
        "{what}: relative difference {diff:e} > {tolerance:e}"
    );
}

#[test]
fn conv2d_gives_burns_outputs_and_gradients() {
    let cases = [
        // Kernels: same padding, stride 1 and 2, with and without bias.
        (
            "5x5 same",
            nn::conv::Conv2dConfig::new([3, 8], [5, 5]).with_padding(PaddingConfig2d::Same),
        ),
        (
            "3x3 stride 2",
            nn::conv::Conv2dConfig::new([4, 6], [3, 3])
                .with_stride([2, 2])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1)),
        ),
        (
            "1x1 no bias",
            nn::conv::Conv2dConfig::new([8, 4], [1, 1]).with_bias(false),
        ),
        (
            "7x7/2 pad 3",
            nn::conv::Conv2dConfig::new([3, 8], [7, 7])
                .with_stride([2, 2])
                .with_padding(PaddingConfig2d::Explicit(3, 3, 3, 3)),
        ),
        // Depthwise, on our kernels too: TF's SAME at stride 2 (one more padding after).
        (
            "depthwise 3x3/2 same",
            nn::conv::Conv2dConfig::new([4, 4], [3, 3])
                .with_groups(4)
                .with_stride([2, 2])
                .with_padding(PaddingConfig2d::Same),
        ),
        // Uneven padding, its extra row and column added as zeros first.
        (
            "asymmetric",
            nn::conv::Conv2dConfig::new([3, 4], [2, 2]).with_padding(PaddingConfig2d::Same),
        ),
        // Left to Burn: other groups, dilation.
        (
            "groups 2",
            nn::conv::Conv2dConfig::new([4, 6], [3, 3]).with_groups(2),
        ),
        (
            "dilation 2",
            nn::conv::Conv2dConfig::new([3, 4], [3, 3]).with_dilation([2, 2]),
        ),
    ];
    for (what, config) in cases {
        let ours = config.init(&device());
        let burns: burn::nn::conv::Conv2d = ours.clone().into();
        let channels = config.channels[0];
        let x = input([2, channels, 11, 13], 7);
        let weights = [&ours.weight, &burns.weight];
        let (ours, burns) = (|x| ours.forward(x), |x| burns.forward(x));
        assert_follows_burns(what, x, weights, [&ours, &burns], false);
    }
}

/// The 1D convolution against Burn's: outputs, input and weight gradients, as a one-row 2D
/// convolution; on the kernels' geometries also in bf16, within its rounding of Burn's f32.
#[test]
fn conv1d_gives_burns_outputs_and_gradients() {
    let config = |kernel| nn::conv::Conv1dConfig::new(6, 4, kernel);
    // Each case and whether the kernels take it in bf16.
    let cases = [
        (
            "3 same",
            true,
            config(3).with_padding(PaddingConfig1d::Same),
        ),
        (
            "5/2 pad (2, 1)",
            true,
            config(5)
                .with_stride(2)
                .with_padding(PaddingConfig1d::Explicit(2, 1)),
        ),
        (
            "4/3 valid no bias",
            true,
            config(4).with_stride(3).with_bias(false),
        ),
        ("1", true, config(1)),
        // Depthwise (its kernels are f32 only), dilated (Burn's).
        (
            "depthwise 3 same",
            false,
            nn::conv::Conv1dConfig::new(6, 6, 3)
                .with_groups(6)
                .with_padding(PaddingConfig1d::Same),
        ),
        ("dilation 2", false, config(3).with_dilation(2)),
    ];
    for (what, bf16_kernels, config) in cases {
        let ours = config.init(&device());
        let burns: burn::nn::conv::Conv1d = ours.clone().into();
        let x = input([2, 6, 23], 29);
        let weights = [&ours.weight, &burns.weight];
        let (ours, burns) = (|x| ours.forward(x), |x| burns.forward(x));
        assert_follows_burns(what, x, weights, [&ours, &burns], bf16_kernels);
    }
}

/// The 3D convolution (one 2D convolution of the depth windows side by side) against Burn's:
/// outputs, input and weight gradients; on the kernels also in bf16, within its rounding.
#[test]
fn conv3d_gives_burns_outputs_and_gradients() {
    use burn::nn::PaddingConfig3d;
    let config = |kernel| nn::conv::Conv3dConfig::new([3, 4], kernel);
    // Each case and whether the 2D kernels take it.
    let cases = [
        (
            "3x3x3 same",
            true,
            config([3, 3, 3]).with_padding(PaddingConfig3d::Same),
        ),
        (
            "3x3x3/2 pad 1, no bias",
            true,
            config([3, 3, 3])
                .with_stride([2, 2, 2])
                .with_padding(PaddingConfig3d::Explicit(1, 1, 1))
                .with_bias(false),
        ),
        (
            "2x3x1/(3, 1, 2) valid",
            true,
            config([2, 3, 1]).with_stride([3, 1, 2]),
        ),
        // Dilated rows and columns: the 2D convolution is Burn's; dilated depth and groups:
        // the whole layer is Burn's.
        (
            "dilation (1, 2, 2)",
            false,
            config([3, 3, 3]).with_dilation([1, 2, 2]),
        ),
        (
            "dilation (2, 1, 1)",
            false,
            config([3, 3, 3]).with_dilation([2, 1, 1]),
        ),
        (
            "groups 3",
            false,
            nn::conv::Conv3dConfig::new([3, 6], [3, 3, 3]).with_groups(3),
        ),
    ];
    for (what, on_kernels, config) in cases {
        let ours = config.init(&device());
        let burns: burn::nn::conv::Conv3d = ours.clone().into();
        let x = input([2, 3, 7, 9, 8], 31);
        let weights = [&ours.weight, &burns.weight];
        let (ours, burns) = (|x| ours.forward(x), |x| burns.forward(x));
        assert_follows_burns(what, x, weights, [&ours, &burns], on_kernels);
    }
}

/// Rotary position encoding against Burn's layer (outputs bit for bit, input gradients within
/// float rounding) and against the rotation computed in f64 from RoPE's angles (`p / θ^(2i /
/// d)` for the pair `i` at position `p`): 4D (heads) and 3D inputs, from position 0 and from
/// 5, after a shift of the table, with frequencies rescaled.
#[test]
fn rotary_encoding_gives_burns_and_ropes_values() {
    let config = nn::RotaryEncodingConfig::new(24, 16);
    let mut ours = config.init(&device());
    let scaled = config.init_with_frequency_scaling(|f| f * 0.5, &device());
    for (layer, scale) in [(&ours, 1.0), (&scaled, 0.5)] {
        let burns: burn::nn::RotaryEncoding = layer.clone().into();
        for start in [0, 5] {
            let what = format!("rope, scale {scale}, from {start}");
            let x = input([2, 3, 10, 16], 41);
            let (ours, burns) = (|x| layer.apply(x, start), |x| burns.apply(x, start));
            check_against_burns(x.clone(), ours, burns, [0.0, 1e-6], &what);
            let (y, _, _) = output_and_grads(x.clone(), None::<&Param<Tensor<1>>>, |x| {
                layer.apply(x, start)
            });
            let want = rope_f64(&x, start, scale);
            assert_agree(y, want, 1e-5, &format!("{what}: against f64"));
        }
        let x = input([2, 10, 16], 43);
        let (ours, burns) = (|x| layer.forward(x), |x| burns.forward(x));
        check_against_burns(x, ours, burns, [0.0, 1e-6], "rope 3D");
    }
    let mut burns: burn::nn::RotaryEncoding = ours.clone().into();
    ours.shift(6);
    burns.shift(6);
    let x = input([2, 3, 10, 16], 47);
    let (ours, burns) = (|x| ours.apply(x, 2), |x| burns.apply(x, 2));
    check_against_burns(x, ours, burns, [0.0, 1e-6], "rope shifted");
}

/// `x` (`[.., seq, d]`) with positions `start..` rotated in f64: the pair `(a, b)` of features
/// `(2i, 2i + 1)` at position `p` by `p · scale / 10000^(2i / d)`.
fn rope_f64(x: &Tensor<4>, start: usize, scale: f64) -> Tensor<4> {
    let dims = x.dims();
    let [seq, d] = [dims[2], dims[3]];
    let values: Vec<f32> = x.clone().into_data().try_to_vec().unwrap();
    let mut out = vec![0.0f32; values.len()];
    for (at, pair) in values.chunks_exact(2).enumerate() {
        let (p, i) = ((2 * at / d) % seq + start, at % (d / 2));
        let angle = p as f64 * scale / 10000f64.powf(2.0 * i as f64 / d as f64);
        let (a, b) = (pair[0] as f64, pair[1] as f64);
        out[2 * at] = (a * angle.cos() - b * angle.sin()) as f32;
        out[2 * at + 1] = (b * angle.cos() + a * angle.sin()) as f32;
    }
    Tensor::from_data(burn::tensor::TensorData::new(out, dims), &device())
}

/// The 1D transposed convolution (a one-row 2D one) against Burn's: outputs, input and weight
/// gradients; on the kernels' geometries also in bf16, within its rounding of Burn's f32.
#[test]
fn conv_transpose1d_gives_burns_outputs_and_gradients() {
    let config =
        |kernel, stride| nn::conv::ConvTranspose1dConfig::new([6, 4], kernel).with_stride(stride);
    // Each case and whether the kernels take it.
    let cases = [
        // A vocoder's 4/2 pad 1 and 16/8 pad 4, 3/2 pad 1 out 1, stride 1, no bias.
        ("4/2 pad 1", true, config(4, 2).with_padding(1)),
        ("16/8 pad 4", true, config(16, 8).with_padding(4)),
        (
            "3/2 pad 1 out 1",
            true,
            config(3, 2).with_padding(1).with_padding_out(1),
        ),
        (
            "3/1 pad 1 no bias",
            true,
            config(3, 1).with_padding(1).with_bias(false),
        ),
        // Left to Burn: groups, dilation.
        ("groups 2", false, config(3, 2).with_groups(2)),
        ("dilation 2", false, config(3, 1).with_dilation(2)),
    ];
    for (what, on_kernels, config) in cases {
        let ours = config.init(&device());
        let burns: burn::nn::conv::ConvTranspose1d = ours.clone().into();
        let x = input([2, 6, 23], 37);
        let weights = [&ours.weight, &burns.weight];
        let (ours, burns) = (|x| ours.forward(x), |x| burns.forward(x));
        assert_follows_burns(what, x, weights, [&ours, &burns], on_kernels);
    }
}

/// Panics unless our layer's forward pass `ours` (of weight `ours_weight`) gives `burns`'s
/// output and gradients of `x` and of the weight within 1e-5 in f32 and, with `in_bf16`,
/// within bf16's rounding of them in bf16 ([`assert_rounded`]).
fn assert_follows_burns<const D: usize, const P: usize>(
    what: &str,
    x: Tensor<D>,
    [ours_weight, burns_weight]: [&Param<Tensor<P>>; 2],
    [ours, burns]: [&dyn Fn(Tensor<D>) -> Tensor<D>; 2],
    in_bf16: bool,
) {
    let ours_in = |precision| {
        let forward = |x| towers_kernels::with_precision(precision, || ours(x));
        output_and_grads(x.clone(), Some(ours_weight), forward)
    };
    let (y, dx, dw) = ours_in(Precision::F32);
    let (want_y, want_dx, want_dw) = output_and_grads(x.clone(), Some(burns_weight), burns);
    let want_dw = want_dw.unwrap();
    assert_agree(y, want_y.clone(), 1e-5, &format!("{what}: output"));
    assert_agree(
        dx,
        want_dx.clone(),
        1e-5,
        &format!("{what}: input gradient"),
    );
    let what_dw = format!("{what}: weight gradient");
    assert_agree(dw.unwrap(), want_dw.clone(), 1e-5, &what_dw);
    if in_bf16 {
        let (y, dx, dw) = ours_in(Precision::Bf16);
        assert_rounded([(y, want_y), (dx, want_dx)], (dw.unwrap(), want_dw), what);
    }
}

/// Panics unless the outputs, input gradients and weight gradients in `pairs` (ours in bf16,
/// Burn's in f32) differ by bf16's rounding: more than f32's, within 2%.
fn assert_rounded<const D: usize, const P: usize>(
    pairs: [(Tensor<D>, Tensor<D>); 2],
    (dw, want_dw): (Tensor<P>, Tensor<P>),
    what: &str,
) {
    let rounding = pairs.map(|(ours, burns)| rel_diff(ours, burns));
    let rounding = [rounding[0], rounding[1], rel_diff(dw, want_dw)];
    // bf16 keeps 8 bits: ~0.4% per operand, up to ~1% over a gradient's sums here.
    let rounded = rounding.iter().all(|&d| d > 1e-5 && d < 2e-2);
    assert!(rounded, "{what} in bf16: {rounding:?}");
}

/// The transposed convolution against Burn's: outputs, input and weight gradients; on the
/// kernels' geometries also in bf16, within its rounding of Burn's f32.
#[test]
fn conv_transpose2d_gives_burns_outputs_and_gradients() {
    let config = |kernel, stride| {
        nn::conv::ConvTranspose2dConfig::new([6, 4], [kernel, kernel]).with_stride([stride; 2])
    };
    // Each case and whether the kernels take it.
    let cases = [
        // U-Net's 2x2/2, DCGAN's 4x4/2 pad 1, the 3x3/2 that undoes a padded 3x3/2 (output
        // padding 1), stride 1, uneven strides and output paddings, no bias.
        ("2x2/2", true, config(2, 2)),
        ("4x4/2 pad 1", true, config(4, 2).with_padding([1, 1])),
        (
            "3x3/2 pad 1 out 1",
            true,
            config(3, 2).with_padding([1, 1]).with_padding_out([1, 1]),
        ),
        ("3x3/1 pad 1", true, config(3, 1).with_padding([1, 1])),
        ("3x3/1 pad 2", true, config(3, 1).with_padding([2, 2])),
        (
            "5x3/(3,2) pad (2,0) out (2,1) no bias",
            true,
            nn::conv::ConvTranspose2dConfig::new([6, 4], [5, 3])
                .with_stride([3, 2])
                .with_padding([2, 0])
                .with_padding_out([2, 1])
                .with_bias(false),
        ),
        // Left to Burn: groups, dilation.
        ("groups 2", false, config(3, 2).with_groups(2)),
        ("dilation 2", false, config(3, 1).with_dilation([2, 2])),
    ];
    for (what, on_kernels, config) in cases {
        let ours = config.init(&device());
        let burns: burn::nn::conv::ConvTranspose2d = ours.clone().into();
        let x = input([2, 6, 5, 7], 19);
        let weights = [&ours.weight, &burns.weight];
        let (ours, burns) = (|x| ours.forward(x), |x| burns.forward(x));
        assert_follows_burns(what, x, weights, [&ours, &burns], on_kernels);
    }
}

/// The pools against Burn's: outputs and input gradients, max pools bit for bit; padded
/// windows, windows past the padding in ceil mode, either divisor, adaptive windows that
/// overlap (7 to 3, 13 to 5) and that repeat places (5 to 7), in 1D, 2D and 3D.
#[test]
fn pools_give_burns_outputs_and_gradients() {
    use nn::pool::{MaxPool1dConfig as Max1, MaxPool2dConfig as Max2};
    let max_pools = [
        ("3x3/2", Max2::new([3, 3]).with_strides([2, 2])),
        ("2x2", Max2::new([2, 2])),
        (
            "3x3/2 ceil",
            Max2::new([3, 3]).with_strides([2, 2]).with_ceil_mode(true),
        ),
        (
            "3x3/2 pad 1 (ResNet's stem)",
            Max2::new([3, 3])
                .with_strides([2, 2])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1)),
        ),
        // Left to Burn: SAME on an even window pads one more after than before.
        (
            "2x2/1 SAME",
            Max2::new([2, 2])
                .with_strides([1, 1])
                .with_padding(PaddingConfig2d::Same),
        ),
    ];
    for (what, config) in max_pools {
        let ours = config.init();
        let burns: burn::nn::pool::MaxPool2d = ours.clone().into();
        let x = input([2, 3, 12, 13], 11);
        let what = format!("pool {what}");
        check_against_burns(
            x,
            |x| ours.forward(x),
            |x| burns.forward(x),
            [0.0; 2],
            &what,
        );
    }
    let max_pools_1d = [
        (
            "3/2 pad 1",
            Max1::new(3)
                .with_stride(2)
                .with_padding(PaddingConfig1d::Explicit(1, 1)),
        ),
        ("4/4 ceil", Max1::new(4).with_ceil_mode(true)),
    ];
    for (what, config) in max_pools_1d {
        let ours = config.init();
        let burns: burn::nn::pool::MaxPool1d = ours.clone().into();
        let x = input([2, 3, 30], 12);
        let what = format!("pool {what}");
        check_against_burns(
            x,
            |x| ours.forward(x),
            |x| burns.forward(x),
            [0.0; 2],
            &what,
        );
    }
    avg_pools_give_burns_outputs_and_gradients();
    adaptive_pools_give_burns_outputs_and_gradients();
}

fn avg_pools_give_burns_outputs_and_gradients() {
    use nn::pool::{AvgPool1dConfig as Avg1, AvgPool2dConfig as Avg2};
    let padded = |config: Avg2| config.with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1));
    let avg_pools = [
        (
            "3x3/1 pad 1",
            padded(Avg2::new([3, 3]).with_strides([1, 1])),
        ),
        (
            "3x3/1 pad 1, padding not counted",
            padded(Avg2::new([3, 3]).with_strides([1, 1])).with_count_include_pad(false),
        ),
        ("2x2/2", Avg2::new([2, 2])),
        (
            "3x3/2 pad 1 ceil",
            padded(Avg2::new([3, 3]).with_strides([2, 2])).with_ceil_mode(true),
        ),
        (
            "3x3/2 pad 1 ceil, padding not counted",
            padded(Avg2::new([3, 3]).with_strides([2, 2]))
                .with_ceil_mode(true)
                .with_count_include_pad(false),
        ),
        (
            "3x2/3x1 pad 1",
            padded(Avg2::new([3, 2]).with_strides([3, 1])),
        ),
        // Left to Burn: SAME on an even window.
        (
            "2x2/1 SAME",
            Avg2::new([2, 2])
                .with_strides([1, 1])
                .with_padding(PaddingConfig2d::Same),
        ),
    ];
    for (what, config) in avg_pools {
        let ours = config.init();
        let burns: burn::nn::pool::AvgPool2d = ours.clone().into();
        let x = input([2, 3, 12, 13], 13);
        let what = format!("pool {what}");
        check_against_burns(
            x,
            |x| ours.forward(x),
            |x| burns.forward(x),
            [1e-6; 2],
            &what,
        );
    }
    let avg_pools_1d = [
        (
            "3/2 pad 1, padding not counted",
            Avg1::new(3)
                .with_stride(2)
                .with_padding(PaddingConfig1d::Explicit(1, 1))
                .with_count_include_pad(false),
        ),
        (
            "5/1 SAME",
            Avg1::new(5)
                .with_stride(1)
                .with_padding(PaddingConfig1d::Same),
        ),
        ("4/4 ceil", Avg1::new(4).with_ceil_mode(true)),
    ];
    for (what, config) in avg_pools_1d {
        let ours = config.init();
        let burns: burn::nn::pool::AvgPool1d = ours.clone().into();
        let x = input([2, 3, 30], 14);
        let what = format!("pool {what}");
        check_against_burns(
            x,
            |x| ours.forward(x),
            |x| burns.forward(x),
            [1e-6; 2],
            &what,
        );
    }
}

fn adaptive_pools_give_burns_outputs_and_gradients() {
    for output_size in [[1, 1], [3, 5], [7, 5]] {
        let ours = nn::pool::AdaptiveAvgPool2dConfig::new(output_size).init();
        let burns: burn::nn::pool::AdaptiveAvgPool2d = ours.clone().into();
        let x = input([2, 3, 7, 13], 15);
        let what = format!("pool adaptive to {output_size:?}");
        check_against_burns(
            x,
            |x| ours.forward(x),
            |x| burns.forward(x),
            [1e-6; 2],
            &what,
        );
    }
    for output_size in [[1, 1, 1], [3, 2, 5]] {
        let ours = nn::pool::AdaptiveAvgPool3dConfig::new(output_size).init();
        let burns: burn::nn::pool::AdaptiveAvgPool3d = ours.clone().into();
        let x = input([2, 3, 7, 5, 13], 17);
        let what = format!("pool adaptive to {output_size:?}");
        check_against_burns(
            x,
            |x| ours.forward(x),
            |x| burns.forward(x),
            [1e-6; 2],
            &what,
        );
    }
    for output_size in [1, 4, 40] {
        let ours = nn::pool::AdaptiveAvgPool1dConfig::new(output_size).init();
        let burns: burn::nn::pool::AdaptiveAvgPool1d = ours.clone().into();
        let what = format!("pool adaptive to {output_size}");
        let x = input([2, 3, 30], 16);
        check_against_burns(
            x,
            |x| ours.forward(x),
            |x| burns.forward(x),
            [1e-6; 2],
            &what,
        );
    }
}

/// A layer's output and input gradient against Burn's layer's, within `tolerance` (of the
/// output, of the gradient).
fn check_against_burns<const D: usize>(
    x: Tensor<D>,
    ours: impl Fn(Tensor<D>) -> Tensor<D>,
    burns: impl Fn(Tensor<D>) -> Tensor<D>,
    [output_tolerance, grad_tolerance]: [f32; 2],
    what: &str,
) {
    let none: Option<&Param<Tensor<1>>> = None;
    let (y, dx, _) = output_and_grads(x.clone(), none, ours);
    let (want_y, want_dx, _) = output_and_grads(x, none, burns);
    assert_agree(y, want_y, output_tolerance, &format!("{what}: output"));
    let what_dx = format!("{what}: input gradient");
    assert_agree(dx, want_dx, grad_tolerance, &what_dx);
}

/// The activation layers against Burn's: outputs and input gradients over -6..6, where each
/// bends and GELU's tail is small.
#[test]
fn activations_give_burns_outputs_and_gradients() {
    use nn::activation::{HardSwish, Relu6, SiLU};
    let x = || input([3, 5, 64], 41) * 6.0;
    let check = |what: &str,
                 ours: &dyn Fn(Tensor<3>) -> Tensor<3>,
                 burns: &dyn Fn(Tensor<3>) -> Tensor<3>| {
        let none: Option<&Param<Tensor<1>>> = None;
        let (y, dx, _) = output_and_grads(x().detach().require_grad(), none, ours);
        let (want_y, want_dx, _) = output_and_grads(x().detach().require_grad(), none, burns);
        assert_agree(y, want_y, 1e-6, &format!("{what}: output"));
        assert_agree(dx, want_dx, 1e-6, &format!("{what}: input gradient"));
    };
    let (gelu, burn_gelu) = (nn::Gelu::new(), burn::nn::Gelu::new());
    check("GELU", &|x| gelu.forward(x), &|x| burn_gelu.forward(x));
    let (tanh, burn_tanh) = (
        nn::Gelu::new_approximate(),
        burn::nn::Gelu::new_approximate(),
    );
    check("GELU (tanh)", &|x| tanh.forward(x), &|x| {
        burn_tanh.forward(x)
    });
    let silu = SiLU::new();
    check("SiLU", &|x| silu.forward(x), &|x| {
        burn::nn::activation::SiLU::new().forward(x)
    });
    let relu6 = Relu6::new();
    check("ReLU6", &|x| relu6.forward(x), &|x| {
        burn::nn::activation::Relu6::new().forward(x)
    });
    let swish = HardSwish::new();
    let burn_swish = burn::nn::activation::HardSwish::new();
    check("hard swish", &|x| swish.forward(x), &|x| {
        burn_swish.forward(x)
    });
    // Into the tails too: inputs up to 12 either side.
    let (sigmoid, burn_sigmoid) = (nn::Sigmoid::new(), burn::nn::Sigmoid::new());
    check("sigmoid", &|x| sigmoid.forward(x * 10.0), &|x| {
        burn_sigmoid.forward(x * 10.0)
    });
    let (hyperbolic, burn_hyperbolic) = (nn::Tanh::new(), burn::nn::Tanh::new());
    check("tanh", &|x| hyperbolic.forward(x * 10.0), &|x| {
        burn_hyperbolic.forward(x * 10.0)
    });
    // Mish past softplus's threshold (20) and `e^x`'s square's range (44) too: inputs up to 60
    // either side.
    let (mish, burn_mish) = (
        nn::activation::Mish::new(),
        burn::nn::activation::Mish::new(),
    );
    check("Mish", &|x| mish.forward(x * 50.0), &|x| {
        burn_mish.forward(x * 50.0)
    });
    check("Mish near 0", &|x| mish.forward(x), &|x| {
        burn_mish.forward(x)
    });
    let leaky = nn::LeakyReluConfig::new().with_negative_slope(0.2).init();
    let burn_leaky: burn::nn::LeakyRelu = leaky.clone().into();
    check("leaky ReLU", &|x| leaky.forward(x), &|x| {
        burn_leaky.forward(x)
    });
    assert_eq!(leaky.negative_slope, 0.2, "the slope read through Deref");
    assert!(
        tanh.approximate && !gelu.approximate,
        "settings read through Deref"
    );
}

#[test]
fn linear_gives_burns_outputs_and_gradients() {
    for config in [
        nn::LinearConfig::new(12, 5),
        nn::LinearConfig::new(12, 5).with_bias(false),
    ] {
        let ours = config.init(&device());
        let burns: burn::nn::Linear = ours.clone().into();
        let x = input([3, 4, 12], 17);
        let (y, dx, dw) = output_and_grads(x.clone(), Some(&ours.weight), |x| ours.forward(x));
        let (want_y, want_dx, want_dw) =
            output_and_grads(x, Some(&burns.weight), |x| burns.forward(x));
        assert_agree(y, want_y, 1e-6, "linear: output");
        assert_agree(dx, want_dx, 1e-6, "linear: input gradient");
        assert_agree(
            dw.unwrap(),
            want_dw.unwrap(),
            1e-6,
            "linear: weight gradient",
        );
    }
}

/// PReLU with a slope per channel and with one for all, on images (rows of a task and of more)
/// and on a flat input: the
/// output and the gradients of the input and of the slopes (values on both sides of 0, the
/// slopes uneven).
#[test]
fn prelu_gives_burns_outputs_and_gradients() {
    let device = device();
    let with_slopes = |slopes: usize| {
        let mut layer = nn::PReluConfig::new()
            .with_num_parameters(slopes)
            .init(&device);
        layer.alpha = Param::from_tensor(pattern([slopes], 71, &device) + 0.3);
        let burns: burn::nn::PRelu = layer.clone().into();
        (layer, burns)
    };
    let (per_channel, burns) = with_slopes(6);
    check_prelu(
        "6 slopes of [2, 6, 5, 7]",
        input([2, 6, 5, 7], 73),
        &per_channel,
        &burns,
    );
    // Rows longer than a task's 16384 values.
    let (two, burns) = with_slopes(2);
    check_prelu(
        "2 slopes of [1, 2, 130, 130]",
        input([1, 2, 130, 130], 89),
        &two,
        &burns,
    );
    let (one, burns) = with_slopes(1);
    check_prelu(
        "one slope of [2, 6, 5, 7]",
        input([2, 6, 5, 7], 79),
        &one,
        &burns,
    );
    check_prelu("one slope of [300]", input([300], 83), &one, &burns);
}

/// Panics unless `ours` gives `burns`'s output and gradients on `x`.
fn check_prelu<const D: usize>(
    what: &str,
    x: Tensor<D>,
    ours: &nn::PRelu,
    burns: &burn::nn::PRelu,
) {
    let (y, dx, da) = output_and_grads(x.clone(), Some(&ours.alpha), |x| ours.forward(x));
    let (want_y, want_dx, want_da) = output_and_grads(x, Some(&burns.alpha), |x| burns.forward(x));
    assert_agree(y, want_y, 1e-6, &format!("{what}: output"));
    assert_agree(dx, want_dx, 1e-6, &format!("{what}: input gradient"));
    assert_agree(
        da.unwrap(),
        want_da.unwrap(),
        1e-5,
        &format!("{what}: slopes' gradient"),
    );
}

/// SwiGLU with and without biases: the output and the gradients of the input and of both dense
/// layers' weights (and the bias of the gated one).
#[test]
fn swiglu_gives_burns_outputs_and_gradients() {
    for config in [
        nn::SwiGluConfig::new(12, 7),
        nn::SwiGluConfig::new(12, 7).with_bias(true),
    ] {
        let ours = config.init(&device());
        let burns: burn::nn::SwiGlu = ours.clone().into();
        let x = input([3, 4, 12], 19);
        for (which, ours_w, burns_w) in [
            (
                "gated",
                &ours.linear_inner.weight,
                &burns.linear_inner.weight,
            ),
            (
                "gate",
                &ours.linear_outer.weight,
                &burns.linear_outer.weight,
            ),
        ] {
            let (y, dx, dw) = output_and_grads(x.clone(), Some(ours_w), |x| ours.forward(x));
            let (want_y, want_dx, want_dw) =
                output_and_grads(x.clone(), Some(burns_w), |x| burns.forward(x));
            assert_agree(y, want_y, 1e-6, "SwiGLU: output");
            assert_agree(dx, want_dx, 1e-6, "SwiGLU: input gradient");
            let what = format!("SwiGLU: the {which} layer's weight gradient");
            assert_agree(dw.unwrap(), want_dw.unwrap(), 1e-6, &what);
        }
        if let (Some(ours_b), Some(burns_b)) = (&ours.linear_inner.bias, &burns.linear_inner.bias) {
            let (_, _, db) = output_and_grads(x.clone(), Some(ours_b), |x| ours.forward(x));
            let (_, _, want) = output_and_grads(x, Some(burns_b), |x| burns.forward(x));
            assert_agree(db.unwrap(), want.unwrap(), 1e-6, "SwiGLU: bias gradient");
        }
    }
}

/// The loss on every configuration: its own path (plain, smoothed) and Burn's (class weights,
/// pad tokens, probabilities), each against Burn's loss of the same configuration.
#[test]
fn cross_entropy_gives_burns_loss_and_gradients() {
    let probabilities = nn::loss::CrossEntropyLossConfig::new().with_logits(false);
    for config in [
        nn::loss::CrossEntropyLossConfig::new(),
        nn::loss::CrossEntropyLossConfig::new().with_smoothing(Some(0.2)),
        nn::loss::CrossEntropyLossConfig::new().with_weights(Some(vec![1.0, 2.0, 0.5, 3.0, 1.5])),
        nn::loss::CrossEntropyLossConfig::new().with_pad_tokens(Some(vec![2])),
        probabilities,
    ] {
        let ours = config.init(&device());
        let burns = burn::nn::loss::CrossEntropyLossConfig::from(&config).init(&device());
        let x = pattern([6, 5], 41, &device());
        let x = match config.logits {
            true => x * 5.0,
            false => burn::tensor::activation::softmax(x, 1),
        }
        .require_grad();
        let labels = Tensor::<1, Int>::from_ints([0, 2, 4, 1, 2, 3], &device());
        let (loss, dx, _) =
            output_and_grads::<2, 1, 1>(x.clone(), None, |x| ours.forward(x, labels.clone()));
        let (want, want_dx, _) =
            output_and_grads::<2, 1, 1>(x, None, |x| burns.forward(x, labels.clone()));
        assert_agree(loss, want, 1e-6, &format!("{config}: loss"));
        assert_agree(dx, want_dx, 1e-5, &format!("{config}: input gradient"));
    }
}

/// A small net as Burn's book writes one, with Burn's layers.
mod burn_net {
    use burn::nn;
    include!("small_net.rs");
}

/// The same net, `use burn::nn` changed to `use towers_kernels::nn`.
mod our_net {
    use towers_kernels::nn;
    include!("small_net.rs");
}

/// Burn's `burns` saved and loaded into `ours` (other values before), then ours saved and loaded
/// into `burns_again` (other values again): the same values each way, and ours displayed as
/// Burn's.
pub(crate) fn assert_records_load_both_ways<
    O: Module + std::fmt::Display,
    B: Module + std::fmt::Display,
>(
    ours: O,
    burns: B,
    burns_again: B,
) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("record");
    burns.clone().save_file(&file).unwrap();
    let ours = ours.load_file(&file);
    assert_eq!(values(&ours), values(&burns), "Burn's record in ours");
    assert_eq!(format!("{ours}"), format!("{burns}"), "displayed as Burn's");
    ours.clone().save_file(&file).unwrap();
    let back = burns_again.load_file(&file);
    assert_eq!(values(&back), values(&ours), "our record in Burn's");
}

#[test]
fn records_saved_from_either_load_into_the_other() {
    // Training mode: the batch norm normalizes by the batch's statistics, not the seeded
    // (partly negative) moving variances.
    let device = device();
    let dir = tempfile::tempdir().unwrap();
    let x = input([2, 3, 10, 10], 23).detach();

    let burns = seeded(BurnNet::new(&device), 1);
    let file = dir.path().join("burn_net");
    burns.clone().save_file(&file).unwrap();
    // Other values, so that only the load can make them equal.
    let ours = seeded(OurNet::new(&device), 2).load_file(&file);
    assert_eq!(values(&ours), values(&burns), "Burn's record in ours");
    assert_agree(
        ours.forward(x.clone()),
        burns.forward(x.clone()),
        1e-6,
        "Burn's record in ours",
    );

    let file = dir.path().join("our_net");
    ours.clone().save_file(&file).unwrap();
    let back = seeded(BurnNet::new(&device), 3).load_file(&file);
    assert_eq!(values(&back), values(&ours), "our record in Burn's");
    assert_agree(
        back.forward(x.clone()),
        ours.forward(x),
        1e-6,
        "our record in Burn's",
    );
}

#[test]
fn configs_saved_from_either_load_as_the_other() {
    use burn::config::Config;
    let dir = tempfile::tempdir().unwrap();
    let ours = nn::conv::Conv2dConfig::new([3, 8], [5, 5])
        .with_stride([2, 1])
        .with_padding(PaddingConfig2d::Explicit(2, 1, 2, 1))
        .with_bias(false);
    let burns = loads_as_burns::<_, burn::nn::conv::Conv2dConfig>(dir.path(), "conv", &ours);
    let file = dir.path().join("conv_back.json");
    burns.save(&file).unwrap();
    let back = nn::conv::Conv2dConfig::load(&file).unwrap();
    assert_eq!(back.to_string(), ours.to_string());
    // Defaults as Burn's: a config with only the required fields gives Burn's layer.
    let (plain, burn_plain) = (
        nn::LinearConfig::new(4, 2),
        burn::nn::LinearConfig::new(4, 2),
    );
    assert_eq!(
        burn::nn::LinearConfig::from(&plain).to_string(),
        burn_plain.to_string()
    );
    let conv = burn::nn::conv::Conv2dConfig::new([3, 8], [5, 5]);
    let from_ours =
        burn::nn::conv::Conv2dConfig::from(&nn::conv::Conv2dConfig::new([3, 8], [5, 5]));
    assert_eq!(from_ours.to_string(), conv.to_string());
    let transposed = nn::conv::ConvTranspose2dConfig::new([3, 8], [4, 4])
        .with_stride([2, 2])
        .with_padding([1, 1])
        .with_padding_out([1, 0]);
    loads_as_burns::<_, burn::nn::conv::ConvTranspose2dConfig>(
        dir.path(),
        "conv_transpose",
        &transposed,
    );
    let norm = nn::GroupNormConfig::new(4, 8).with_epsilon(1e-3);
    loads_as_burns::<_, burn::nn::GroupNormConfig>(dir.path(), "group_norm", &norm);
    let sequence = nn::conv::Conv1dConfig::new(3, 8, 5)
        .with_stride(2)
        .with_padding(PaddingConfig1d::Explicit(2, 1));
    loads_as_burns::<_, burn::nn::conv::Conv1dConfig>(dir.path(), "conv1d", &sequence);
    let rms = nn::RmsNormConfig::new(6).with_epsilon(1e-6);
    loads_as_burns::<_, burn::nn::RmsNormConfig>(dir.path(), "rms_norm", &rms);
    let transposed = nn::conv::ConvTranspose1dConfig::new([3, 8], 4)
        .with_stride(2)
        .with_padding(1);
    loads_as_burns::<_, burn::nn::conv::ConvTranspose1dConfig>(
        dir.path(),
        "conv_transpose1d",
        &transposed,
    );
    let prelu = nn::PReluConfig::new()
        .with_num_parameters(4)
        .with_alpha(0.1);
    let burns = loads_as_burns::<_, burn::nn::PReluConfig>(dir.path(), "prelu", &prelu);
    assert_eq!((burns.num_parameters, burns.alpha), (4, 0.1));
    let swiglu = nn::SwiGluConfig::new(6, 10).with_bias(true);
    loads_as_burns::<_, burn::nn::SwiGluConfig>(dir.path(), "swiglu", &swiglu);
    let plain = burn::nn::SwiGluConfig::from(&nn::SwiGluConfig::new(6, 10));
    assert_eq!(
        plain.to_string(),
        burn::nn::SwiGluConfig::new(6, 10).to_string()
    );
    let instance = nn::InstanceNormConfig::new(6).with_epsilon(1e-3);
    loads_as_burns::<_, burn::nn::InstanceNormConfig>(dir.path(), "instance_norm", &instance);
    let leaky = nn::LeakyReluConfig::new().with_negative_slope(0.3);
    let burns = loads_as_burns::<_, burn::nn::LeakyReluConfig>(dir.path(), "leaky_relu", &leaky);
    assert_eq!(burns.negative_slope, 0.3);
    let resize = nn::interpolate::Interpolate2dConfig::new()
        .with_scale_factor(Some([2.0, 0.5]))
        .with_mode(nn::interpolate::InterpolateMode::Linear)
        .with_align_corners(false);
    loads_as_burns::<_, burn::nn::interpolate::Interpolate2dConfig>(
        dir.path(),
        "interpolate",
        &resize,
    );
    let pool = nn::pool::MaxPool1dConfig::new(3)
        .with_stride(2)
        .with_padding(PaddingConfig1d::Explicit(1, 1))
        .with_ceil_mode(true);
    loads_as_burns::<_, burn::nn::pool::MaxPool1dConfig>(dir.path(), "max_pool1d", &pool);
    let pool = nn::pool::AvgPool1dConfig::new(3).with_count_include_pad(false);
    loads_as_burns::<_, burn::nn::pool::AvgPool1dConfig>(dir.path(), "avg_pool1d", &pool);
    let pool = nn::pool::AdaptiveAvgPool2dConfig::new([3, 5]);
    loads_as_burns::<_, burn::nn::pool::AdaptiveAvgPool2dConfig>(dir.path(), "adaptive2", &pool);
    let pool = nn::pool::AdaptiveAvgPool3dConfig::new([2, 3, 5]);
    loads_as_burns::<_, burn::nn::pool::AdaptiveAvgPool3dConfig>(dir.path(), "adaptive3", &pool);
    let pool = nn::pool::AdaptiveAvgPool1dConfig::new(7);
    loads_as_burns::<_, burn::nn::pool::AdaptiveAvgPool1dConfig>(dir.path(), "adaptive1", &pool);
    let volume = nn::conv::Conv3dConfig::new([3, 8], [3, 3, 3])
        .with_stride([1, 2, 2])
        .with_padding(burn::nn::PaddingConfig3d::Explicit(1, 1, 1));
    loads_as_burns::<_, burn::nn::conv::Conv3dConfig>(dir.path(), "conv3d", &volume);
    let rope = nn::RotaryEncodingConfig::new(64, 16).with_theta(500000.0);
    loads_as_burns::<_, burn::nn::RotaryEncodingConfig>(dir.path(), "rope", &rope);
    let plain = nn::conv::ConvTranspose2dConfig::new([3, 8], [4, 4]);
    assert_eq!(
        burn::nn::conv::ConvTranspose2dConfig::from(&plain).to_string(),
        burn::nn::conv::ConvTranspose2dConfig::new([3, 8], [4, 4]).to_string()
    );
}

/// `ours` saved to `dir/name.json`, loaded as Burn's config `B` and checked against
/// `B::from(ours)`; the loaded config.
fn loads_as_burns<O, B>(dir: &std::path::Path, name: &str, ours: &O) -> B
where
    O: burn::config::Config,
    B: burn::config::Config + std::fmt::Display + for<'a> From<&'a O>,
{
    let file = dir.join(format!("{name}.json"));
    ours.save(&file).unwrap();
    let burns = B::load(&file).unwrap();
    assert_eq!(burns.to_string(), B::from(ours).to_string(), "{name}");
    burns
}

#[test]
fn layers_display_as_burns() {
    let device = device();
    let ours = nn::conv::Conv2dConfig::new([3, 8], [3, 3]).init(&device);
    let burns: burn::nn::conv::Conv2d = ours.clone().into();
    assert_eq!(format!("{ours}"), format!("{burns}"));
}

/// The group norm against the same normalization in f64 (Burn's ops, autodiff): outputs and
/// the gradients of the input, the scale and the offset, ours and Burn's layer's alike, from a
/// scale and offset of fixed patterns, on images and on sequences; the input's offset large (as
/// after a convolution with a bias), where moments that cancel would show. 4 groups of 2
/// channels, 1 of all, 8 of one; the instance norm (a channel a group); not affine (Burn's).
#[test]
fn group_norm_gives_burns_outputs_and_gradients() {
    let device = device();
    let cases = [
        ("[2, 8, 5, 7], 4 groups", Some(4), [2, 8, 35]),
        ("[2, 8, 5, 7], 1 group", Some(1), [2, 8, 35]),
        ("[2, 8, 5, 7], 8 groups", Some(8), [2, 8, 35]),
        ("[3, 8, 11], 2 groups", Some(2), [3, 8, 11]),
        ("[2, 8, 5, 7], instance norm", None, [2, 8, 35]),
    ];
    let scale = Some(Param::from_tensor(pattern([8], 43, &device) + 1.0));
    let offset = Some(Param::from_tensor(pattern([8], 47, &device)));
    for (what, groups, [n, c, places]) in cases {
        type Forward = Box<dyn Fn(Tensor<3>) -> Tensor<3>>;
        let (ours, burns): (Forward, Forward) = match groups {
            Some(groups) => {
                let mut norm = nn::GroupNormConfig::new(groups, c).init(&device);
                (norm.gamma, norm.beta) = (scale.clone(), offset.clone());
                let burns: burn::nn::GroupNorm = norm.clone().into();
                (
                    Box::new(move |x| norm.forward(x)),
                    Box::new(move |x| burns.forward(x)),
                )
            }
            None => {
                let mut norm = nn::InstanceNormConfig::new(c).init(&device);
                (norm.gamma, norm.beta) = (scale.clone(), offset.clone());
                let burns: burn::nn::InstanceNorm = norm.clone().into();
                (
                    Box::new(move |x| norm.forward(x)),
                    Box::new(move |x| burns.forward(x)),
                )
            }
        };
        let groups = groups.unwrap_or(c);
        let [gamma, beta] = [&scale, &offset].map(|p| p.as_ref().unwrap().val());
        let x = pattern([n, c, places], 53, &device) * 3.0 + 40.0;
        let want = group_norm_f64(x.clone(), [gamma.clone(), beta.clone()], groups);
        let with = |forward: &dyn Fn(Tensor<3>) -> Tensor<3>| {
            let x = x.clone().require_grad();
            let y = forward(x.clone());
            let grads = (y.clone() * (pattern([n, c, places], 99, &device) + 1.0))
                .sum()
                .backward();
            let [dg, db] = [&gamma, &beta].map(|p| p.grad(&grads).unwrap());
            [
                y.detach().reshape([-1]),
                x.grad(&grads).unwrap().reshape([-1]),
                dg,
                db,
            ]
        };
        for (who, got) in [("ours", with(&ours)), ("Burn's", with(&burns))] {
            // f32's rounding: the output within 1e-5, the gradients' sums, which cancel
            // (the scale's: Σ w·x̂ of an x̂ that sums to 0), within 1e-4 (Burn's own: up to 8e-5).
            let parts = [
                "output",
                "input gradient",
                "scale gradient",
                "offset gradient",
            ];
            for (((part, got), want), tolerance) in parts
                .iter()
                .zip(got)
                .zip(want.clone())
                .zip([1e-5, 1e-4, 1e-4, 1e-4])
            {
                assert_agree(got, want, tolerance, &format!("{what}, {who}: {part}"));
            }
        }
    }
    let plain = nn::GroupNormConfig::new(2, 4)
        .with_affine(false)
        .init(&device);
    let burns: burn::nn::GroupNorm = plain.clone().into();
    let x = input([2, 4, 3], 59);
    assert_agree(
        plain.forward(x.clone()),
        burns.forward(x),
        1e-6,
        "not affine",
    );
}

/// The layer norm against the same normalization in f64 (Burn's ops, autodiff): outputs and
/// the gradients of the input, the scale and the offset, ours and Burn's layer's alike, rows of
/// 48 and of 5 features offset by 40; without an offset; records either way.
#[test]
fn layer_norm_gives_burns_outputs_and_gradients() {
    let device = device();
    for (what, dims, bias) in [
        ("[3, 4, 48]", [3, 4, 48], true),
        ("[2, 7, 5] without offset", [2, 7, 5], false),
    ] {
        let d = dims[2];
        let ours = {
            let mut norm = nn::LayerNormConfig::new(d).with_bias(bias).init(&device);
            norm.gamma = Param::from_tensor(pattern([d], 61, &device) + 1.0);
            norm.beta = bias.then(|| Param::from_tensor(pattern([d], 67, &device)));
            norm
        };
        let burns: burn::nn::LayerNorm = ours.clone().into();
        let gamma = ours.gamma.val();
        let beta = ours.beta.as_ref().map(|b| b.val());
        let x = pattern(dims, 71, &device) * 3.0 + 40.0;
        let weights = pattern(dims, 73, &device) + 1.0;
        let want = layer_norm_f64(
            x.clone(),
            [Some(gamma.clone()), beta.clone()],
            weights.clone(),
        );
        let with = |forward: &dyn Fn(Tensor<3>) -> Tensor<3>| {
            let x = x.clone().require_grad();
            let y = forward(x.clone());
            let grads = (y.clone() * weights.clone()).sum().backward();
            let db = beta.as_ref().map(|b| b.grad(&grads).unwrap());
            (
                y.detach().reshape([-1]),
                x.grad(&grads).unwrap().reshape([-1]),
                gamma.grad(&grads).unwrap(),
                db,
            )
        };
        for (who, (y, dx, dg, db)) in [
            ("ours", with(&|x| ours.forward(x))),
            ("Burn's", with(&|x| burns.forward(x))),
        ] {
            let what = format!("{what}, {who}");
            assert_agree(y, want[0].clone(), 1e-5, &format!("{what}: output"));
            assert_agree(
                dx,
                want[1].clone(),
                1e-4,
                &format!("{what}: input gradient"),
            );
            assert_agree(
                dg,
                want[2].clone(),
                1e-4,
                &format!("{what}: scale gradient"),
            );
            if let Some(db) = db {
                assert_agree(
                    db,
                    want[3].clone(),
                    1e-5,
                    &format!("{what}: offset gradient"),
                );
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let ours = nn::LayerNormConfig::new(6).init(&device);
    let file = dir.path().join("layer_norm");
    let seeded_burns = seeded(burn::nn::LayerNormConfig::new(6).init(&device), 5);
    seeded_burns.clone().save_file(&file).unwrap();
    let ours = ours.load_file(&file);
    assert_eq!(
        values(&ours),
        values(&seeded_burns),
        "Burn's record in ours"
    );
    assert_eq!(
        format!("{ours}"),
        format!("{seeded_burns}"),
        "displayed as Burn's"
    );
}

/// The RMS norm (LLaMA's) against the same normalization in f64 (Burn's ops, autodiff), ours
/// and Burn's layer alike: outputs and the input's and scale's gradients, from a scale of a
/// fixed pattern, on rows of 48 (three vectors) and of 5, values offset by 40 and around 0.
#[test]
fn rms_norm_gives_burns_outputs_and_gradients() {
    let device = device();
    for (dims, offset) in [([3, 4, 48], 40.0), ([2, 7, 5], 0.0)] {
        let d = dims[2];
        let mut ours = nn::RmsNormConfig::new(d).with_epsilon(1e-6).init(&device);
        ours.gamma = Param::from_tensor(pattern([d], 61, &device) + 1.0);
        let burns: burn::nn::RmsNorm = ours.clone().into();
        let x = pattern(dims, 71, &device) * 3.0 + offset;
        let weights = pattern(dims, 73, &device) + 1.0;
        let want = {
            let x = x.clone().cast(DType::F64).require_grad();
            let gamma = ours.gamma.val().cast(DType::F64).detach().require_grad();
            let mean_square = x.clone().square().mean_dim(2);
            let y = x.clone() / (mean_square + 1e-6).sqrt() * gamma.clone().reshape([1, 1, d]);
            let grads = (y.clone() * weights.clone().cast(DType::F64))
                .sum()
                .backward();
            let dx = x.grad(&grads).unwrap().reshape([-1]);
            let f32_of = |t: Tensor<1>| t.cast(DType::F32);
            [y.reshape([-1]), dx, gamma.grad(&grads).unwrap()].map(f32_of)
        };
        let gamma = ours.gamma.val();
        let with = |forward: &dyn Fn(Tensor<3>) -> Tensor<3>| {
            let x = x.clone().require_grad();
            let y = forward(x.clone());
            let grads = (y.clone() * weights.clone()).sum().backward();
            let dx = x.grad(&grads).unwrap().reshape([-1]);
            [y.detach().reshape([-1]), dx, gamma.grad(&grads).unwrap()]
        };
        let parts = ["output", "input gradient", "scale gradient"];
        for (who, got) in [
            ("ours", with(&|x| ours.forward(x))),
            ("Burn's", with(&|x| burns.forward(x))),
        ] {
            for ((got, want), part) in got.into_iter().zip(want.clone()).zip(parts) {
                let what = format!("{dims:?} offset {offset}, {who}: {part}");
                assert_agree(got, want, 1e-5, &what);
            }
        }
    }
}

/// A layer norm's output, input gradient and scale and offset gradients (of `sum(y · w)`)
/// computed in f64 by Burn's ops, each flattened, in f32 (the offset's zeros where there is none).
fn layer_norm_f64(
    x: Tensor<3>,
    [gamma, beta]: [Option<Tensor<1>>; 2],
    weights: Tensor<3>,
) -> [Tensor<1>; 4] {
    let f64_of = |t: Tensor<1>| t.cast(DType::F64).detach().require_grad();
    let d = x.dims()[2];
    let x = f64_of(x.reshape([-1]));
    let gamma = f64_of(gamma.unwrap());
    let beta = f64_of(beta.unwrap_or_else(|| Tensor::zeros([d], &x.device())));
    let rows = x.clone().reshape([-1, d as i32]);
    let centered = rows.clone() - rows.mean_dim(1);
    let variance = centered.clone().square().mean_dim(1);
    let normalized = centered / (variance + 1e-5).sqrt();
    let y = normalized * gamma.clone().reshape([1, d]) + beta.clone().reshape([1, d]);
    let grads = (y.clone() * weights.reshape([-1, d as i32]).cast(DType::F64))
        .sum()
        .backward();
    let f32_of = |t: Tensor<1>| t.cast(DType::F32);
    [
        f32_of(y.reshape([-1])),
        f32_of(x.grad(&grads).unwrap()),
        f32_of(gamma.grad(&grads).unwrap()),
        f32_of(beta.grad(&grads).unwrap()),
    ]
}

/// A group norm's output, input gradient and scale and offset gradients (of `sum(y · w)`, `w`
/// the test's fixed weights) computed in f64 by Burn's ops, each flattened, in f32.
fn group_norm_f64(x: Tensor<3>, [gamma, beta]: [Tensor<1>; 2], groups: usize) -> [Tensor<1>; 4] {
    let f64_of = |t: Tensor<1>| t.cast(DType::F64).detach().require_grad();
    let [n, c, places] = x.dims();
    let (x, gamma, beta) = (f64_of(x.reshape([-1])), f64_of(gamma), f64_of(beta));
    let grouped = x.clone().reshape([n, groups, c / groups * places]);
    let centered = grouped.clone() - grouped.mean_dim(2);
    let variance = centered.clone().square().mean_dim(2);
    let normalized = (centered / (variance + 1e-5).sqrt()).reshape([n, c, places]);
    let y = normalized * gamma.clone().reshape([1, c, 1]) + beta.clone().reshape([1, c, 1]);
    let weights = (pattern([n, c, places], 99, &x.device()) + 1.0).cast(DType::F64);
    let grads = (y.clone() * weights).sum().backward();
    let f32_of = |t: Tensor<1>| t.cast(DType::F32);
    [
        f32_of(y.reshape([-1])),
        f32_of(x.grad(&grads).unwrap()),
        f32_of(gamma.grad(&grads).unwrap()),
        f32_of(beta.grad(&grads).unwrap()),
    ]
}

/// A batch norm of 5 channels with scale and offset from fixed patterns (scale in 0.8..1.2),
/// running statistics fresh (its own, not shared with any other).
fn batch_norm_pair() -> (nn::BatchNorm, burn::nn::BatchNorm) {
    let device = device();
    let affine = |mut bn: burn::nn::BatchNorm| {
        bn.gamma = Param::from_tensor(pattern([5], 31, &device) + 1.0);
        bn.beta = Param::from_tensor(pattern([5], 37, &device));
        bn
    };
    let ours = burn::nn::BatchNorm::from(nn::BatchNormConfig::new(5).init(&device));
    let burns = burn::nn::BatchNormConfig::new(5).init(&device);
    (affine(ours).into(), affine(burns))
}

#[test]
fn batch_norm_gives_burns_outputs_gradients_and_running_statistics() {
    let (ours, burns) = batch_norm_pair();
    // Training (an autodiff device): the batch's statistics, offset so that the mean matters.
    for step in 0..2 {
        let x = (input([3, 5, 6, 7], 41 + step) + 0.3)
            .detach()
            .require_grad();
        let (y, dx, dgamma) = output_and_grads(x.clone(), Some(&ours.gamma), |x| ours.forward(x));
        let (want_y, want_dx, want_dgamma) =
            output_and_grads(x.clone(), Some(&burns.gamma), |x| burns.forward(x));
        assert_agree(y, want_y, 1e-5, "batch norm: output");
        assert_agree(dx, want_dx, 1e-4, "batch norm: input gradient");
        assert_agree(
            dgamma.unwrap(),
            want_dgamma.unwrap(),
            1e-5,
            "batch norm: scale gradient",
        );
        let (_, _, dbeta) = output_and_grads(x.clone(), Some(&ours.beta), |x| ours.forward(x));
        let (_, _, want_dbeta) = output_and_grads(x, Some(&burns.beta), |x| burns.forward(x));
        assert_agree(
            dbeta.unwrap(),
            want_dbeta.unwrap(),
            1e-5,
            "batch norm: offset gradient",
        );
    }
    // Each forward above moved the running statistics by the momentum, as Burn's did.
    assert_agree(
        ours.running_mean.value(),
        burns.running_mean.value(),
        1e-5,
        "running mean",
    );
    assert_agree(
        ours.running_var.value(),
        burns.running_var.value(),
        1e-5,
        "running variance",
    );
    // Evaluation: the running statistics.
    let x = input([2, 5, 4, 3], 43).detach();
    let (ours, burns) = (ours.valid(), burns.valid());
    let x = x.to_device(&Device::flex());
    assert_agree(
        ours.forward(x.clone()),
        burns.forward(x),
        1e-5,
        "batch norm: evaluation output",
    );
}
