//! Resizing (`nn::interpolate::Interpolate2d` and `Interpolate1d`, `towers_kernels::interpolate`)
//! against files PyTorch 2.15 wrote (`scripts/torch_fixtures/interpolate.py`, in
//! `tests/data/interpolate.txt`): bilinear and linear outputs and input gradients, both ways of
//! aligning; and against Burn's own layers in every mode, on larger, strided and scaled inputs.

use burn::tensor::ops::{InterpolateMode, InterpolateOptions};
use burn::tensor::{Tensor, TensorData};
use towers_kernels::nn::interpolate::{
    Interpolate1dConfig, Interpolate2dConfig, InterpolateMode as LayerMode,
};
use towers_testing::fixture_lines::fixture_cases;
use towers_testing::nets::pattern;

use crate::drop_in::{assert_agree, device};

/// One case of the fixture: the input's shape, the output's size, the alignment, and PyTorch's
/// input, loss weights, output and input gradient.
struct Case {
    dims: [usize; 4],
    out: [usize; 2],
    align_corners: bool,
    x: Vec<f32>,
    w: Vec<f32>,
    y: Vec<f32>,
    dx: Vec<f32>,
}

/// The fixture's cases, four lines each (`x`, `w`, `y`, `dx`).
fn pytorch_cases() -> Vec<Case> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/interpolate.txt");
    fixture_cases(path, &["x", "w", "y", "dx"])
        .into_iter()
        .map(|case| {
            let [x, w, y, dx] = case.values.clone().try_into().expect("four tensors");
            Case {
                dims: case.numbers(0).try_into().expect("four dimensions"),
                out: case.numbers(1).try_into().expect("two sizes"),
                align_corners: case.settings[2] == "1",
                x,
                w,
                y,
                dx,
            }
        })
        .collect()
}

/// The output of `resize` on `x` and the gradient of `sum(y · w)` with respect to `x`.
fn output_and_grad<const D: usize>(
    x: Tensor<D>,
    w: Tensor<D>,
    resize: impl Fn(Tensor<D>) -> Tensor<D>,
) -> (Tensor<D>, Tensor<D>) {
    let x = x.require_grad();
    let y = resize(x.clone());
    let grads = (y.clone() * w).sum().backward();
    (y.detach(), x.grad(&grads).expect("input gradient"))
}

#[test]
fn bilinear_resizing_gives_pytorchs_outputs_and_gradients() {
    let device = device();
    let cases = pytorch_cases();
    assert_eq!(cases.len(), 10, "the fixture's cases");
    for case in cases {
        let [n, c, h, w] = case.dims;
        let [out_h, out_w] = case.out;
        let what = format!(
            "{:?} to {:?}, aligned {}",
            case.dims, case.out, case.align_corners
        );
        let tensor = |values: Vec<f32>, dims: [usize; 4]| {
            Tensor::<4>::from_data(TensorData::new(values, dims), &device)
        };
        let x = tensor(case.x, case.dims);
        let weights = tensor(case.w, [n, c, out_h, out_w]);
        let (y, dx) = if h == 1 && out_h == 1 {
            let layer = Interpolate1dConfig::new()
                .with_output_size(Some(out_w))
                .with_mode(LayerMode::Linear)
                .with_align_corners(case.align_corners)
                .init();
            let (y, dx) =
                output_and_grad(x.reshape([n, c, w]), weights.reshape([n, c, out_w]), |x| {
                    layer.forward(x)
                });
            (y.unsqueeze_dim(2), dx.unsqueeze_dim(2))
        } else {
            let layer = Interpolate2dConfig::new()
                .with_output_size(Some(case.out))
                .with_mode(LayerMode::Linear)
                .with_align_corners(case.align_corners)
                .init();
            output_and_grad(x, weights, |x| layer.forward(x))
        };
        assert_agree(
            y,
            tensor(case.y, [n, c, out_h, out_w]),
            1e-6,
            &format!("{what}: output"),
        );
        assert_agree(
            dx,
            tensor(case.dx, case.dims),
            1e-6,
            &format!("{what}: input gradient"),
        );
    }
}

/// Burn's `interpolate`'s options for `mode`, to `size` or by `scale`.
fn options(mode: InterpolateMode, align_corners: bool, size: Resize) -> InterpolateOptions {
    let options = InterpolateOptions::new(mode).with_align_corners(align_corners);
    match size {
        Resize::To(size) => options.with_output_size(size),
        Resize::By(scale) => options.with_scale_factor(scale),
    }
}

#[derive(Clone, Copy, Debug)]
enum Resize {
    To([usize; 2]),
    By([f32; 2]),
}

#[test]
fn resizing_gives_burns_outputs_and_gradients_in_every_mode() {
    let device = device();
    let cases = [
        ([2, 3, 17, 23], Resize::To([40, 9])),
        ([2, 3, 17, 23], Resize::By([2.0, 2.0])),
        ([1, 4, 15, 9], Resize::By([0.5, 1.5])),
        ([3, 2, 8, 8], Resize::To([8, 8])),
        ([1, 1, 1, 30], Resize::To([1, 61])),
    ];
    let modes = [
        InterpolateMode::Bilinear,
        InterpolateMode::Nearest,
        InterpolateMode::Bicubic,
    ];
    for (dims, size) in cases {
        for mode in modes.clone() {
            for align_corners in [false, true] {
                let what = format!("{dims:?} {size:?} {mode:?}, aligned {align_corners}");
                let options = || options(mode.clone(), align_corners, size);
                // Strided: the pattern's channels and rows swapped.
                let x = pattern([dims[0], dims[2], dims[1], dims[3]], 5, &device).swap_dims(1, 2);
                let probe = burn::tensor::module::interpolate(x.clone(), options());
                let w = pattern(probe.dims(), 11, &device) + 1.0;
                let (y, dx) = output_and_grad(x.clone(), w.clone(), |x| {
                    towers_kernels::interpolate(x, options())
                });
                let (want_y, want_dx) =
                    output_and_grad(x, w, |x| burn::tensor::module::interpolate(x, options()));
                assert_agree(y, want_y, 1e-6, &format!("{what}: output"));
                assert_agree(dx, want_dx, 1e-6, &format!("{what}: input gradient"));
            }
        }
    }
}
