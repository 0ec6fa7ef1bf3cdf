//! Max pooling with the same padding before and after each axis (ResNet's stem: 3x3 at stride
//! 2, padded by 1), by [`max_pool_forward`] on a copy of each plane framed in `-inf`. Flex's own
//! pooling checks every window's clipped range per output, 230 ms forward and backward for
//! ResNet-50's stem at batch 32 against 40 for the unpadded pool here; the frame costs one copy.
//!
//! A framed plane's argmax is mapped back to the plane. Only a window of `-inf` alone can pick
//! a place in the frame (a tie goes to the smaller index): Burn's pooling then takes the
//! window's first place inside the plane, and so does [`max_pool_forward_padded`].

use burn::tensor::TensorData;
use burn_flex::FlexTensor;
use rayon::prelude::*;

use crate::flex::memory::buffers::contiguous;
use crate::flex::memory::dims4;
use crate::flex::pool::max_pool::{MaxPoolShape, max_pool_forward};
use crate::flex::pool::output_size::pooled_size;

/// Whether [`max_pool_forward_padded`] pools `[h, w]` planes padded by `padding` on both sides
/// as Burn does: no window lies in the padding alone (`2 · padding <= kernel`, Burn's and
/// PyTorch's own limit), and as many windows as Burn's rule counts (which in ceil mode drops a
/// last window starting in the trailing padding).
pub(crate) fn pads_like_burn(shape: MaxPoolShape, [h, w]: [usize; 2], padding: [usize; 2]) -> bool {
    let within = (0..2).all(|axis| 2 * padding[axis] <= shape.kernel[axis]);
    let framed = [h + 2 * padding[0], w + 2 * padding[1]];
    let burns = [0, 1].map(|axis| {
        let plane = [h, w][axis];
        let (kernel, stride) = (shape.kernel[axis], shape.stride[axis]);
        pooled_size(plane, kernel, padding[axis], stride, shape.ceil_mode)
    });
    within && shape.output_size(framed) == burns
}

/// [`max_pool_forward`] of `x` padded by `padding` rows above and below and columns left and
/// right: the pooled tensor and each output's argmax within its unpadded input plane. The
/// caller checks [`pads_like_burn`].
pub(crate) fn max_pool_forward_padded(
    x: FlexTensor,
    shape: MaxPoolShape,
    padding: [usize; 2],
) -> (FlexTensor, Vec<u32>) {
    if padding == [0, 0] {
        return max_pool_forward(x, shape);
    }
    let x = contiguous(x);
    let [n, c, h, w] = dims4(&x);
    let framed = framed(x.storage(), [n * c, h, w], padding);
    let framed_plane = [h + 2 * padding[0], w + 2 * padding[1]];
    let [fh, fw] = framed_plane;
    let framed = FlexTensor::from_data(TensorData::new(framed, [n, c, fh, fw]));
    let (out, mut argmax) = max_pool_forward(framed, shape);
    let [_, _, out_h, out_w] = dims4(&out);
    let unframe = Unframe {
        shape,
        padding,
        plane: [h, w],
        framed_width: fw,
        out_width: out_w,
    };
    if out_h * out_w > 0 {
        argmax
            .par_chunks_mut(out_h * out_w)
            .for_each(|plane| unframe.plane(plane));
    }
    (out, argmax)
}

/// `planes` planes of `[h, w]`, each copied into a frame of `-inf`, `padding` rows above and
/// below and columns left and right.
fn framed(data: &[f32], [planes, h, w]: [usize; 3], [ph, pw]: [usize; 2]) -> Vec<f32> {
    let fw = w + 2 * pw;
    let framed_plane = (h + 2 * ph) * fw;
    let mut framed = vec![f32::NEG_INFINITY; planes * framed_plane];
    if framed_plane == 0 {
        return framed;
    }
    framed
        .par_chunks_mut(framed_plane)
        .zip(data.par_chunks(h * w.max(1)))
        .for_each(|(framed, plane)| {
            for (row, values) in plane.chunks_exact(w.max(1)).take(h).enumerate() {
                framed[(row + ph) * fw + pw..][..w].copy_from_slice(&values[..w]);
            }
        });
    framed
}

/// Maps argmaxes within framed planes back to the unframed planes.
struct Unframe {
    shape: MaxPoolShape,
    padding: [usize; 2],
    plane: [usize; 2],
    framed_width: usize,
    out_width: usize,
}

impl Unframe {
    /// One plane's argmaxes, in place: a place in the plane keeps its place; one in the frame
    /// (a window of `-inf` alone) becomes the window's first place inside the plane.
    fn plane(&self, argmax: &mut [u32]) {
        let ([ph, pw], [_, w]) = (self.padding, self.plane);
        for (o, at) in argmax.iter_mut().enumerate() {
            let (fy, fx) = (
                *at as usize / self.framed_width,
                *at as usize % self.framed_width,
            );
            let inside = |framed: usize, pad: usize, size: usize| {
                framed.checked_sub(pad).filter(|&place| place < size)
            };
            let place = match (inside(fy, ph, self.plane[0]), inside(fx, pw, w)) {
                (Some(y), Some(x)) => [y, x],
                _ => self.first_inside(o),
            };
            *at = (place[0] * w + place[1]) as u32;
        }
    }

    /// Output `o`'s window's first place inside the plane (row and column).
    fn first_inside(&self, o: usize) -> [usize; 2] {
        let (oy, ox) = (o / self.out_width, o % self.out_width);
        let start = [oy * self.shape.stride[0], ox * self.shape.stride[1]];
        [0, 1].map(|axis| start[axis].saturating_sub(self.padding[axis]))
    }
}
