//! Tensors packed into buckets: one MPI message, or one ring chunk per tower, each.

use std::ops::Range;

use burn::tensor::{Device, Tensor, TensorData};

/// Consecutive runs of tensors, the first about `first_values` values long, each other about
/// `bucket_values`: a tensor is never split, so one larger than a bucket is a bucket of its
/// own. Every rank computes the same buckets from the same sizes.
pub(crate) fn plan(
    sizes: &[usize],
    first_values: usize,
    bucket_values: usize,
) -> Vec<Range<usize>> {
    let mut buckets = Vec::new();
    let (mut start, mut filled) = (0, 0);
    for (i, &size) in sizes.iter().enumerate() {
        let cap = if buckets.is_empty() {
            first_values
        } else {
            bucket_values
        };
        if filled > 0 && filled + size > cap {
            buckets.push(start..i);
            (start, filled) = (i, 0);
        }
        filled += size;
    }
    if start < sizes.len() {
        buckets.push(start..sizes.len());
    }
    buckets
}

/// The first bucket's size in bytes at most: it fills first, so a small one starts an
/// overlapped exchange early (PyTorch DDP's first bucket is 1 MB too).
const FIRST_BUCKET_BYTES: usize = 1 << 20;

/// The slots (of tensors `sizes[slot]` values long) of each bucket: every slot, last first
/// (the order backward finishes a model's gradients), in runs of about `bytes` (the first of
/// at most [`FIRST_BUCKET_BYTES`]). `bytes` 0: one tensor per bucket.
pub(crate) fn in_backward_order(sizes: &[usize], bytes: usize) -> Vec<Vec<usize>> {
    let order: Vec<usize> = (0..sizes.len()).rev().collect();
    let ordered: Vec<usize> = order.iter().map(|&s| sizes[s]).collect();
    let first = bytes.min(FIRST_BUCKET_BYTES);
    let plan: Vec<Range<usize>> = plan(&ordered, (first / 4).max(1), (bytes / 4).max(1));
    plan.into_iter().map(|r| order[r].to_vec()).collect()
}

/// `tensors` one after another in one tensor, as a bucket holds them: a tensor alone as it is
/// (Burn's `cat` of one tensor still copies it, a kernel launch on a GPU), several by `cat`.
///
/// # Panics
///
/// Where `tensors` is empty, as `Tensor::cat`.
pub(crate) fn joined(mut tensors: Vec<Tensor<1>>) -> Tensor<1> {
    match tensors.len() {
        1 => tensors.pop().expect("one tensor"),
        _ => Tensor::cat(tensors, 0),
    }
}

/// Puts a bucket's `values` back on `device`, as the tensors `slots` (in the order the bucket
/// holds them; `sizes[slot]` values each) in `out`: one upload, a view per tensor.
pub(crate) fn unpack(
    out: &mut [Option<Tensor<1>>],
    slots: impl IntoIterator<Item = usize>,
    sizes: &[usize],
    values: Vec<f32>,
    device: &Device,
) {
    let len = values.len();
    let bucket = Tensor::<1>::from_data(TensorData::new(values, [len]), device);
    for (slot, view) in views(&bucket, slots, sizes) {
        out[slot] = Some(view);
    }
}

/// The tensors `slots` of `bucket`, which holds them one after another (`sizes[slot]` values
/// each), as views of it, with their slots.
pub(crate) fn views<'a>(
    bucket: &'a Tensor<1>,
    slots: impl IntoIterator<Item = usize> + 'a,
    sizes: &'a [usize],
) -> impl Iterator<Item = (usize, Tensor<1>)> + 'a {
    let mut offset = 0;
    slots.into_iter().map(move |slot| {
        let (start, len) = (offset, sizes[slot]);
        offset += len;
        let view = match len {
            0 => Tensor::zeros([0], &bucket.device()),
            _ => bucket.clone().narrow(0, start, len),
        };
        (slot, view)
    })
}

#[cfg(test)]
mod tests {
    use super::{in_backward_order, plan};

    #[test]
    fn tensors_fill_buckets_in_order_and_large_ones_stand_alone() {
        assert_eq!(plan(&[3, 3, 3, 3], 6, 6), vec![0..2, 2..4]);
        assert_eq!(plan(&[3, 10, 2, 2, 2], 6, 6), vec![0..1, 1..2, 2..5]);
        assert_eq!(plan(&[7], 6, 6), vec![0..1]);
        assert!(plan(&[], 6, 6).is_empty());
        assert_eq!(plan(&[1, 1, 3, 3, 3], 2, 6), vec![0..2, 2..4, 4..5]);
    }

    #[test]
    fn backward_order_is_last_slot_first_and_zero_bytes_is_a_bucket_per_tensor() {
        let sizes = [1 << 18, 1 << 18, 1 << 18, 1 << 18];
        // 1 MB each: the first bucket (at most 1 MB) holds one, the others two.
        assert_eq!(
            in_backward_order(&sizes, 2 << 20),
            vec![vec![3], vec![2, 1], vec![0]]
        );
        assert_eq!(
            in_backward_order(&sizes, 0),
            vec![vec![3], vec![2], vec![1], vec![0]]
        );
    }
}
