//! The kernels' output buffers and contiguous inputs, written on rayon's threads, and reads
//! from memory asked for ahead ([`prefetch`]).
//!
//! `vec![0.0; len]` zeroes, and flex's `to_contiguous` copies, on the calling thread while the
//! other cores wait: Inception v3's activations are tens of megabytes each, and its training
//! step spent ~70 ms zeroing them and ~15 ms copying the gradients of the slices that its
//! blocks concatenate, on one core of two (perf, batch 32, 2-core Zen 5, 2026-11-26).

use std::mem::MaybeUninit;
use std::ops::Range;

use burn::tensor::{DType, TensorData};
use burn_flex::FlexTensor;
use rayon::prelude::*;

/// Values per thread's share of the zeroing: below this the calling thread zeroes alone.
const CHUNK: usize = 64 * 1024;

/// `len` zeros (`T::default()`), written by rayon's threads in chunks.
pub(crate) fn zeros<T: Copy + Default + Send + Sync>(len: usize) -> Vec<T> {
    let mut values = Vec::with_capacity(len);
    values.spare_capacity_mut()[..len]
        .par_chunks_mut(CHUNK)
        .for_each(|chunk| chunk.fill(MaybeUninit::new(T::default())));
    // SAFETY: the capacity is at least `len`, and the first `len` values were just written.
    unsafe { values.set_len(len) };
    values
}

/// `len` values built in chunks of `chunk` on rayon's threads: each chunk zeroed, then handed
/// to `fill(index, chunk)` while its zeros are still in cache. For outputs that a kernel adds
/// into chunk by chunk (a plane's gradient scattered back to the maxima): a pass of its own
/// zeroed a whole activation, tens of megabytes that went to memory and came back.
pub(crate) fn zeroed_chunks<T: Copy + Default + Send + Sync>(
    len: usize,
    chunk: usize,
    fill: impl Fn(usize, &mut [T]) + Sync + Send,
) -> Vec<T> {
    let [values] = zeroed_chunks_of(len, chunk, |index, [part]| fill(index, part));
    values
}

/// Values a task of [`map_planes`] takes at least, of its input or output planes, whichever
/// are larger.
const PLANE_TASK: usize = 1 << 14;

/// `planes` planes of `in_plane` values each (`input`) mapped into as many zeroed planes of
/// `out_plane` values by `map(plane, out, scratch)`, planes grouped into tasks of at least
/// [`PLANE_TASK`] values on rayon's threads, each task with a scratch of `scratch` zeros (a
/// row the resizing and pooling kernels build their sums in).
pub(crate) fn map_planes(
    input: &[f32],
    [planes, in_plane, out_plane]: [usize; 3],
    scratch: usize,
    map: impl Fn(&[f32], &mut [f32], &mut [f32]) + Sync + Send,
) -> Vec<f32> {
    let per_task = (PLANE_TASK / in_plane.max(out_plane).max(1)).max(1);
    zeroed_chunks(planes * out_plane, per_task * out_plane, |task, out| {
        let mut scratch = vec![0.0; scratch];
        let inputs = input.chunks_exact(in_plane.max(1)).skip(task * per_task);
        for (plane, out) in inputs.zip(out.chunks_exact_mut(out_plane.max(1))) {
            map(plane, out, &mut scratch);
        }
    })
}

/// [`zeroed_chunks`] for `N` outputs of `len` values at once: chunk `index` of each, zeroed,
/// handed to `fill(index, chunks)` together (a kernel that writes several outputs image by
/// image, as LRN's forward pass writes the output, the sums and the scales).
pub(crate) fn zeroed_chunks_of<T: Copy + Default + Send + Sync, const N: usize>(
    len: usize,
    chunk: usize,
    fill: impl Fn(usize, [&mut [T]; N]) + Sync + Send,
) -> [Vec<T>; N] {
    let mut outputs: [Vec<T>; N] = core::array::from_fn(|_| Vec::with_capacity(len));
    let spare = outputs
        .each_mut()
        .map(|values| &mut values.spare_capacity_mut()[..len]);
    chunks_side_by_side(spare, len, chunk)
        .into_par_iter()
        .enumerate()
        .for_each(|(index, parts)| fill(index, parts.map(zeroed)));
    for values in &mut outputs {
        // SAFETY: the capacity is at least `len`, and every chunk of it was written above.
        unsafe { values.set_len(len) };
    }
    outputs
}

/// Chunk `index` of each of `buffers` (all `len` long) together, for each of the
/// `len.div_ceil(chunk)` chunks (empty arrays where `N` is 0): for tasks that each take the same
/// chunk of several outputs.
pub(crate) fn chunks_side_by_side<T, const N: usize>(
    buffers: [&mut [T]; N],
    len: usize,
    chunk: usize,
) -> Vec<[&mut [T]; N]> {
    assert!(
        buffers.iter().all(|b| b.len() == len),
        "buffers of other lengths than {len}"
    );
    let mut parts = buffers.map(|b| b.chunks_mut(chunk.max(1)));
    (0..len.div_ceil(chunk.max(1)))
        .map(|_| parts.each_mut().map(|p| p.next().expect("as many chunks")))
        .collect()
}

/// `part` zeroed, as the initialized values it now holds: for a kernel that fills an output
/// chunk by chunk, each chunk zeroed just before it is written, in cache.
pub(crate) fn zeroed<T: Copy + Default>(part: &mut [MaybeUninit<T>]) -> &mut [T] {
    part.fill(MaybeUninit::new(T::default()));
    // SAFETY: every element of `part` was just written.
    unsafe { written(part) }
}

/// `part` as the values a kernel wrote into it.
///
/// # Safety
/// Every element of `part` has been written.
pub(crate) unsafe fn written<T>(part: &mut [MaybeUninit<T>]) -> &mut [T] {
    // SAFETY: `MaybeUninit<T>` has `T`'s layout, and the caller wrote every element.
    unsafe { &mut *(part as *mut [MaybeUninit<T>] as *mut [T]) }
}

/// Asks for the cache lines of `data[values]` (clipped to `data`) to be brought to cache, as
/// `HINT` says (`_MM_HINT_T0` for L1, `_MM_HINT_T1` for L2); reads nothing. For kernels that
/// read from memory more streams side by side (rows of a plane, channels' planes) than the
/// hardware prefetcher follows: a layer's input was written by the layer before, long out of
/// cache.
#[cfg(target_arch = "x86_64")]
pub(crate) fn prefetch<const HINT: i32, T>(data: &[T], values: Range<usize>) {
    use core::arch::x86_64::_mm_prefetch;
    let values = values.start..values.end.min(data.len());
    for at in line_starts::<T>(data.as_ptr() as usize, values) {
        // SAFETY: `at` is inside `data`; a prefetch reads nothing (SSE, on every x86-64).
        unsafe { _mm_prefetch::<HINT>(data.as_ptr().add(at).cast()) };
    }
}

/// One index in `values` per 64-byte line those `T`s (f32s, bf16s) of an array at `address`
/// touch: the first, then the first of each line after it. Steps of 16 from `values.start` missed the last line
/// of any run that does not start on a line (a row of a plane, mostly): the packers then
/// waited on memory for one line in four of a 48-value panel.
#[cfg(target_arch = "x86_64")]
fn line_starts<T>(address: usize, values: Range<usize>) -> impl Iterator<Item = usize> {
    let per_line = 64 / size_of::<T>();
    let end = values.end;
    std::iter::successors(Some(values.start), move |&at| {
        Some(at + per_line - (address / size_of::<T>() + at) % per_line)
    })
    .take_while(move |&at| at < end)
}

/// `x` with a contiguous buffer of its own, as flex's `to_contiguous` gives it, but copied by
/// rayon's threads where `x` is a view whose items along the first dimension are each
/// contiguous (a slice of some channels of an `[n, c, h, w]` tensor, as the gradient of one
/// branch of a concatenation is). Other layouts go to flex's copy.
pub(crate) fn contiguous(x: FlexTensor) -> FlexTensor {
    let layout = x.layout();
    let dims: Vec<usize> = (0..layout.num_dims()).map(|d| layout.shape()[d]).collect();
    let Some(stride) = item_stride(&dims, layout.strides()) else {
        return x.to_contiguous();
    };
    if x.dtype() != DType::F32 || x.is_contiguous() && stride * dims[0] == x.storage::<f32>().len()
    {
        return x.to_contiguous();
    }
    let (offset, item) = (layout.start_offset(), dims[1..].iter().product::<usize>());
    let source: &[f32] = x.storage();
    let mut values = Vec::with_capacity(dims[0] * item);
    values.spare_capacity_mut()[..dims[0] * item]
        .par_chunks_mut(item.max(1))
        .enumerate()
        .for_each(|(i, out)| {
            let from = &source[offset + i * stride..][..item];
            for (out, &value) in out.iter_mut().zip(from) {
                out.write(value);
            }
        });
    // SAFETY: each of the `dims[0]` chunks of `item` values was just written.
    unsafe { values.set_len(dims[0] * item) };
    FlexTensor::from_data(TensorData::new(values, dims))
}

/// The stride of the first dimension where every item along it (all the later dimensions) lies
/// contiguous, row-major, and items do not overlap; `None` for other layouts.
fn item_stride(dims: &[usize], strides: &[isize]) -> Option<usize> {
    let (&first, rest) = dims.split_first()?;
    let mut expected = 1usize;
    for (&size, &stride) in rest.iter().zip(&strides[1..]).rev() {
        if size != 1 && usize::try_from(stride).ok()? != expected {
            return None;
        }
        expected *= size;
    }
    match usize::try_from(strides[0]).ok()? {
        _ if first <= 1 => Some(expected),
        stride if stride >= expected => Some(stride),
        _ => None,
    }
}

/// `x` as a contiguous f32 tensor whose buffer starts at its first value and holds only its
/// values, so that `storage_mut` is the tensor.
pub(crate) fn owned(x: FlexTensor) -> FlexTensor {
    let x = contiguous(x);
    let len = x.layout().num_elements();
    if x.layout().start_offset() == 0 && x.storage::<f32>().len() == len {
        return x;
    }
    let shape: Vec<usize> = x.layout().shape().to_vec();
    let values = x.storage::<f32>()[x.layout().start_offset()..][..len].to_vec();
    FlexTensor::from_data(TensorData::new(values, shape))
}

#[cfg(test)]
mod tests {
    use burn::tensor::Shape;

    use super::*;

    #[test]
    fn every_value_is_zero_whatever_the_allocator_handed_back() {
        for len in [0, 1, CHUNK - 1, CHUNK, 3 * CHUNK + 5] {
            // Leave non-zero values behind in memory the allocator is likely to reuse.
            drop(vec![7.5f32; len]);
            let values: Vec<f32> = zeros(len);
            assert_eq!(values.len(), len);
            assert!(
                values.iter().all(|&v| v == 0.0),
                "a non-zero value at len {len}"
            );
            let indices: Vec<u32> = zeros(len);
            assert!(
                indices.iter().all(|&v| v == 0),
                "a non-zero index at len {len}"
            );
        }
    }

    /// Every line a run of values touches, once, whatever the run's start in its line, the
    /// array's alignment and the values' size (f32, bf16).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn every_line_of_a_run_is_asked_for_once() {
        fn check<T>() {
            let size = size_of::<T>();
            for address in (0..64).step_by(size).map(|offset| 4096 + offset) {
                for values in [0..48, 5..53, 15..16, 16..33, 7..7, 3..200] {
                    let line = |at: usize| (address + size * at) / 64;
                    let asked: Vec<usize> = line_starts::<T>(address, values.clone())
                        .map(line)
                        .collect();
                    let mut lines: Vec<usize> = values.clone().map(line).collect();
                    lines.dedup();
                    assert_eq!(asked, lines, "{size} bytes, address {address}, {values:?}");
                    let inside = line_starts::<T>(address, values.clone());
                    assert!(inside.into_iter().all(|at| values.contains(&at)));
                }
            }
        }
        check::<f32>();
        check::<u16>();
    }

    /// Several outputs: chunk `index` of each handed over together, zeroed.
    #[test]
    fn chunks_of_several_outputs_come_together() {
        let [a, b] = zeroed_chunks_of(10, 4, |index, [a, b]: [&mut [u32]; 2]| {
            assert!(a.iter().chain(b.iter()).all(|&v| v == 0));
            a[0] = index as u32 + 1;
            b[a.len() - 1] = 10 * (index as u32 + 1);
        });
        assert_eq!(a, [1, 0, 0, 0, 2, 0, 0, 0, 3, 0]);
        assert_eq!(b, [0, 0, 0, 10, 0, 0, 0, 20, 0, 30]);
    }

    #[test]
    fn chunks_start_from_zero_and_keep_what_fill_wrote() {
        for (len, chunk) in [(0, 4), (10, 4), (12, 4), (5, 9)] {
            drop(vec![7.5f32; len]);
            let values: Vec<f32> = zeroed_chunks(len, chunk, |index, part| {
                assert!(part.iter().all(|&v| v == 0.0), "chunk {index} not zeroed");
                part[0] += index as f32 + 1.0;
            });
            let want: Vec<f32> = (0..len)
                .map(|i| match i % chunk {
                    0 => (i / chunk) as f32 + 1.0,
                    _ => 0.0,
                })
                .collect();
            assert_eq!(values, want, "len {len}, chunks of {chunk}");
        }
    }

    /// A `[n, c, h, w]` tensor of distinct values.
    fn counting(dims: [usize; 4]) -> FlexTensor {
        let len = dims.iter().product::<usize>();
        FlexTensor::from_data(TensorData::new((0..len).map(|v| v as f32).collect(), dims))
    }

    fn values(x: &FlexTensor) -> Vec<f32> {
        x.to_contiguous().into_data().try_to_vec().unwrap()
    }

    #[test]
    fn views_come_out_as_flex_copies_them() {
        let x = counting([3, 7, 4, 5]);
        let views = [
            x.narrow(1, 2, 3),                 // some channels: copied here, per image
            x.narrow(1, 0, 7).narrow(0, 1, 2), // some images: contiguous, offset
            x.narrow(2, 1, 2),                 // some rows: flex's copy
            x.transpose(2, 3),                 // flex's copy
            x.narrow(1, 4, 1),                 // one channel
            x.narrow(0, 2, 1).narrow(1, 1, 5), // one image
        ];
        for view in views {
            let copy = contiguous(view.clone());
            assert!(copy.is_contiguous(), "{:?}", view.layout());
            assert_eq!(copy.layout().shape(), view.layout().shape());
            assert_eq!(copy.storage::<f32>().len(), view.layout().num_elements());
            assert_eq!(values(&copy), values(&view), "{:?}", view.layout());
        }
        let whole = contiguous(x.clone());
        assert_eq!(whole.layout().shape(), &Shape::new([3, 7, 4, 5]));
        assert_eq!(values(&whole), values(&x));
    }

    #[test]
    fn only_items_that_lie_whole_take_the_parallel_copy() {
        assert_eq!(item_stride(&[3, 4, 5], &[40, 5, 1]), Some(40));
        assert_eq!(item_stride(&[3, 4, 5], &[20, 5, 1]), Some(20));
        assert_eq!(item_stride(&[3, 4, 5], &[20, 1, 4]), None);
        assert_eq!(item_stride(&[3, 4, 5], &[10, 5, 1]), None);
        assert_eq!(item_stride(&[3, 4, 5], &[40, 6, 1]), None);
        assert_eq!(item_stride(&[1, 4, 5], &[0, 5, 1]), Some(20));
        assert_eq!(item_stride(&[3, 1, 5], &[9, 77, 1]), Some(9));
    }
}
