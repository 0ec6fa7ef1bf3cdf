//! Bilinear resizing of `[n, c, h, w]` images on flex, forward and backward, plane by plane on
//! rayon's threads: each output row a blend of two input rows (one vectorized pass), then of
//! two columns of that blend; backward the same two steps transposed.
//!
//! Burn's flex kernel maps every output pixel's coordinates in f64 and reads and weighs its
//! four neighbours one pixel at a time (scalar, a task per plane), and scatters each gradient
//! to the four one at a time: forward and backward of an `[8, 64, 64, 64]` map doubled took
//! 82.8 ms on 2 cores where PyTorch's took 32.3 (bench/HISTORY.md, "Bilinear resizing").
//!
//! The coordinates are Burn's (`burn-flex`'s `interpolate.rs`): with `align_corners`, output
//! index `o` reads input coordinate `o · (in - 1) / (out - 1)`; without, `(o + 0.5) · in / out
//! - 0.5`, below 0 read as 0. PyTorch's `interpolate` maps the same way given an output size
//! (or `recompute_scale_factor=True`).

use burn::tensor::TensorData;
use burn_flex::FlexTensor;
use multiversion::multiversion;

use crate::flex::memory::buffers::{contiguous, map_planes};
use crate::flex::memory::{add_scaled, dims4};

/// Where one output index reads along an axis: two neighbouring input indices and the far
/// one's weight (the near one's is `1 - weight`).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Tap {
    near: usize,
    far: usize,
    weight: f32,
}

/// The taps of each of `output` indices along an axis of `input` values, as Burn maps them.
fn axis_taps(input: usize, output: usize, align_corners: bool) -> Vec<Tap> {
    let ratio = if align_corners {
        (input as f64 - 1.0) / (output.max(1) - 1).max(1) as f64
    } else {
        input as f64 / output as f64
    };
    (0..output)
        .map(|o| {
            let at = if align_corners {
                o as f64 * ratio
            } else {
                (o as f64 + 0.5) * ratio - 0.5
            };
            let near = at.floor().max(0.0) as usize;
            Tap {
                near,
                far: (near + 1).min(input - 1),
                weight: (at - near as f64).max(0.0) as f32,
            }
        })
        .collect()
}

/// The taps of both axes of a resizing from `[h, w]` to `[out_h, out_w]`.
struct Resize {
    rows: Vec<Tap>,
    cols: Vec<Tap>,
    /// Input values per plane, and their row length.
    in_plane: usize,
    in_w: usize,
}

impl Resize {
    fn new([h, w]: [usize; 2], [out_h, out_w]: [usize; 2], align_corners: bool) -> Self {
        Self {
            rows: axis_taps(h, out_h, align_corners),
            cols: axis_taps(w, out_w, align_corners),
            in_plane: h * w,
            in_w: w,
        }
    }

    fn out_plane(&self) -> usize {
        self.rows.len() * self.cols.len()
    }

    /// One plane resized: `plane` (`[h, w]`) into `out` (`[out_h, out_w]`), `blend` a row's
    /// scratch.
    fn plane(&self, plane: &[f32], out: &mut [f32], blend: &mut [f32]) {
        for (row, out) in self.rows.iter().zip(out.chunks_exact_mut(self.cols.len())) {
            let near = &plane[row.near * self.in_w..][..self.in_w];
            let far = &plane[row.far * self.in_w..][..self.in_w];
            lerp_rows(near, far, row.weight, blend);
            for (col, out) in self.cols.iter().zip(out) {
                *out = blend[col.near] + col.weight * (blend[col.far] - blend[col.near]);
            }
        }
    }

    /// One plane's input gradient: `grad` (`[out_h, out_w]`) back through [`Self::plane`] into
    /// `out` (`[h, w]`, zeros), `spread` a row's scratch.
    fn plane_gradient(&self, grad: &[f32], out: &mut [f32], spread: &mut [f32]) {
        for (row, grad) in self.rows.iter().zip(grad.chunks_exact(self.cols.len())) {
            spread.fill(0.0);
            for (col, &g) in self.cols.iter().zip(grad) {
                spread[col.near] += g - col.weight * g;
                spread[col.far] += col.weight * g;
            }
            let near = &mut out[row.near * self.in_w..][..self.in_w];
            add_scaled(near, spread, 1.0 - row.weight);
            let far = &mut out[row.far * self.in_w..][..self.in_w];
            add_scaled(far, spread, row.weight);
        }
    }
}

/// `x` (`[n, c, h, w]`) resized to `[n, c, out_h, out_w]` by bilinear interpolation.
pub(crate) fn forward(x: FlexTensor, out: [usize; 2], align_corners: bool) -> FlexTensor {
    let x = contiguous(x);
    let [n, c, h, w] = dims4(&x);
    let resize = Resize::new([h, w], out, align_corners);
    let sizes = [n * c, resize.in_plane, resize.out_plane()];
    let y = map_planes(x.storage(), sizes, w, |plane, y, blend| {
        resize.plane(plane, y, blend)
    });
    FlexTensor::from_data(TensorData::new(y, vec![n, c, out[0], out[1]]))
}

/// The gradient of [`forward`]'s input `[n, c, h, w]` (`input`) given `grad = ∂L/∂y`.
pub(crate) fn backward(input: [usize; 4], grad: FlexTensor, align_corners: bool) -> FlexTensor {
    let grad = contiguous(grad);
    let [n, c, h, w] = input;
    let [_, _, out_h, out_w] = dims4(&grad);
    let resize = Resize::new([h, w], [out_h, out_w], align_corners);
    let sizes = [n * c, resize.out_plane(), resize.in_plane];
    let dx = map_planes(grad.storage(), sizes, w, |grad, dx, spread| {
        resize.plane_gradient(grad, dx, spread)
    });
    FlexTensor::from_data(TensorData::new(dx, input.to_vec()))
}

/// `out = near + weight · (far - near)`, value by value.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx2+fma", "x86_64+avx2+fma"))]
fn lerp_rows(near: &[f32], far: &[f32], weight: f32, out: &mut [f32]) {
    for ((o, &a), &b) in out.iter_mut().zip(near).zip(far) {
        *o = a + weight * (b - a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each axis's taps as PyTorch's `area_pixel_compute_source_index` gives them (its
    /// `upsample_bilinear2d` kernel, `aten/src/ATen/native/UpSample.h`): doubling, halving and
    /// an uneven ratio, both ways of aligning, down to one value.
    #[test]
    fn taps_follow_pytorchs_source_indices() {
        let tap = |near, far, weight| Tap { near, far, weight };
        assert_eq!(
            axis_taps(2, 4, false),
            [
                tap(0, 1, 0.0),
                tap(0, 1, 0.25),
                tap(0, 1, 0.75),
                tap(1, 1, 0.25)
            ]
        );
        assert_eq!(
            axis_taps(3, 5, true),
            [
                tap(0, 1, 0.0),
                tap(0, 1, 0.5),
                tap(1, 2, 0.0),
                tap(1, 2, 0.5),
                tap(2, 2, 0.0)
            ]
        );
        assert_eq!(axis_taps(4, 2, false), [tap(0, 1, 0.5), tap(2, 3, 0.5)]);
        assert_eq!(axis_taps(5, 1, true), [tap(0, 1, 0.0)]);
        let one = axis_taps(1, 3, false);
        assert!(one.iter().all(|tap| (tap.near, tap.far) == (0, 0)));
        let uneven = axis_taps(7, 3, false);
        assert_eq!(uneven[1].near, 3);
        assert!((uneven[1].weight - 0.0).abs() < 1e-6);
        assert_eq!((uneven[2].near, uneven[2].far), (5, 6));
        assert!((uneven[2].weight - 1.0 / 3.0).abs() < 1e-6);
    }
}
