//! Tensors packed into buckets: one MPI message each.

use std::ops::Range;

/// Consecutive runs of tensors, each run about `bucket_values` values long: a tensor is never
/// split, so one larger than a bucket is a bucket of its own. Every rank computes the same
/// buckets from the same sizes.
pub(crate) fn plan(sizes: &[usize], bucket_values: usize) -> Vec<Range<usize>> {
    plan_with_first(sizes, bucket_values, bucket_values)
}

/// As [`plan`], with a first bucket of its own size (`first_values`).
pub(crate) fn plan_with_first(
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

#[cfg(test)]
mod tests {
    use super::{plan, plan_with_first};

    #[test]
    fn tensors_fill_buckets_in_order_and_large_ones_stand_alone() {
        assert_eq!(plan(&[3, 3, 3, 3], 6), vec![0..2, 2..4]);
        assert_eq!(plan(&[3, 10, 2, 2, 2], 6), vec![0..1, 1..2, 2..5]);
        assert_eq!(plan(&[7], 6), vec![0..1]);
        assert!(plan(&[], 6).is_empty());
        assert_eq!(
            plan_with_first(&[1, 1, 3, 3, 3], 2, 6),
            vec![0..2, 2..4, 4..5]
        );
    }
}
