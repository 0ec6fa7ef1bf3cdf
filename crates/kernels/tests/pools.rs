//! The pooling layers against PyTorch's (`scripts/torch_fixtures/pools.py`,
//! `tests/data/pools.txt`): max pools (bit for bit, ties and all), average pools in 1D and 2D and
//! adaptive average pools in 1D, 2D and 3D, padded, strided, in ceil mode, counting the padding and not;
//! outputs and input gradients.

use burn::nn::{PaddingConfig1d, PaddingConfig2d};
use burn::tensor::{Tensor, TensorData};
use towers_kernels::nn::pool;
use towers_testing::fixture_lines::{FixtureCase, fixture_cases};

use crate::drop_in::{assert_agree, device};

/// A fixture case's pool, as a function of a `[n, c, rest]` input flattened after the channels
/// (2D pools reshape it to the case's image), its output flattened alike.
type Pool = Box<dyn Fn(Tensor<3>) -> Tensor<3>>;

/// The layer a fixture case names (see the fixture script's doc for the settings), and the
/// tolerance its results keep: none for max pools.
fn layer(case: &FixtureCase) -> (Pool, f32) {
    let (s, dims) = (case.numbers(1), case.numbers(2));
    let flag = |i: usize| s[i] == 1;
    let image = move |x: Tensor<3>| x.reshape([dims[0], dims[1], dims[2], dims[3]]);
    let padding = || PaddingConfig2d::Explicit(s[4], s[5], s[4], s[5]);
    match case.settings[0].as_str() {
        "max2d" => {
            let layer = pool::MaxPool2dConfig::new([s[0], s[1]])
                .with_strides([s[2], s[3]])
                .with_padding(padding())
                .with_ceil_mode(flag(6))
                .init();
            (
                Box::new(move |x| layer.forward(image(x)).flatten(2, 3)),
                0.0,
            )
        }
        "avg2d" => {
            let layer = pool::AvgPool2dConfig::new([s[0], s[1]])
                .with_strides([s[2], s[3]])
                .with_padding(padding())
                .with_ceil_mode(flag(6))
                .with_count_include_pad(flag(7))
                .init();
            (
                Box::new(move |x| layer.forward(image(x)).flatten(2, 3)),
                1e-6,
            )
        }
        "max1d" => {
            let layer = pool::MaxPool1dConfig::new(s[0])
                .with_stride(s[1])
                .with_padding(PaddingConfig1d::Explicit(s[2], s[2]))
                .with_ceil_mode(flag(3))
                .init();
            (Box::new(move |x| layer.forward(x)), 0.0)
        }
        "avg1d" => {
            let layer = pool::AvgPool1dConfig::new(s[0])
                .with_stride(s[1])
                .with_padding(PaddingConfig1d::Explicit(s[2], s[2]))
                .with_ceil_mode(flag(3))
                .with_count_include_pad(flag(4))
                .init();
            (Box::new(move |x| layer.forward(x)), 1e-6)
        }
        "adaptive2d" => {
            let layer = pool::AdaptiveAvgPool2dConfig::new([s[0], s[1]]).init();
            (
                Box::new(move |x| layer.forward(image(x)).flatten(2, 3)),
                1e-6,
            )
        }
        "adaptive3d" => {
            let layer = pool::AdaptiveAvgPool3dConfig::new([s[0], s[1], s[2]]).init();
            let d = case.numbers(2);
            let volume = move |x: Tensor<3>| x.reshape([d[0], d[1], d[2], d[3], d[4]]);
            (
                Box::new(move |x| layer.forward(volume(x)).flatten(2, 4)),
                1e-6,
            )
        }
        "adaptive1d" => {
            let layer = pool::AdaptiveAvgPool1dConfig::new(s[0]).init();
            (Box::new(move |x| layer.forward(x)), 1e-6)
        }
        kind => panic!("a pool the test does not know: {kind}"),
    }
}

#[test]
fn pools_give_pytorchs_outputs_and_gradients() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/pools.txt");
    let cases = fixture_cases(path, &["x", "w", "y", "dx"]);
    assert_eq!(cases.len(), 17, "the fixture's cases");
    let device = device();
    for case in cases {
        let what = case.settings.join(" ");
        let (pool, tolerance) = layer(&case);
        let dims = case.numbers(2);
        let flat = |values: &[f32], len: usize| {
            let data = TensorData::new(values.to_vec(), [dims[0], dims[1], len]);
            Tensor::<3>::from_data(data, &device)
        };
        let rest = |values: &[f32]| values.len() / (dims[0] * dims[1]);
        let [x, w, y, dx] = &case.values[..] else {
            panic!("four tensors")
        };
        let x = flat(x, rest(x)).require_grad();
        let out = pool(x.clone());
        let grads = (out.clone() * flat(w, rest(w))).sum().backward();
        let got_dx = x.grad(&grads).expect("an input gradient");
        assert_agree(
            out.detach(),
            flat(y, rest(y)),
            tolerance,
            &format!("{what}: y"),
        );
        assert_agree(
            got_dx,
            flat(dx, rest(dx)),
            tolerance,
            &format!("{what}: dx"),
        );
    }
}
