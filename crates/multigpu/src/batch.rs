//! [`TowerBatch`]: what the towers split. Any batch type of the user's takes part by saying
//! how many examples it holds, how to cut it into consecutive parts, and what each part weighs
//! in the batch's mean loss.
//!
//! A `Vec<I>` of Burn dataset items is a tower batch as it stands: each tower gets a
//! sub-slice `&[I]` and turns it into tensors on its own device, typically with the user's
//! Burn `Batcher` (`batcher.batch(items.to_vec(), device)`), so the batcher runs once per tower
//! and each tower's tensors are made where they are used.

/// A batch that the towers split into one consecutive part per tower.
///
/// [`Towers::step`](crate::Towers::step) calls [`split`](Self::split) once per step, on the
/// caller's thread, and hands part `i` to tower `i`'s thread together with that tower's device;
/// the loss function turns the part into tensors there. Parts usually borrow the batch (no
/// copy); the part type may also own its data.
///
/// The gradient the towers apply is `sum_i w_i grad(loss_i) / sum_i w_i`, where `loss_i` is
/// the mean loss the loss function returns for part `i` and `w_i` its [weight](Self::weights).
/// With the default weights (examples) that is the gradient of the mean loss over the whole
/// batch. A loss averaged over something else (tokens, pixels, valid labels) gives the
/// whole-batch gradient when the weights count that same thing.
///
/// ```
/// use towers_multigpu::TowerBatch;
///
/// /// Token sequences of uneven length, with a loss averaged over tokens.
/// struct Sentences {
///     tokens: Vec<Vec<u32>>,
/// }
///
/// impl TowerBatch for Sentences {
///     type Part<'a> = &'a [Vec<u32>];
///
///     fn len(&self) -> usize {
///         self.tokens.len()
///     }
///
///     fn split(&self, sizes: &[usize]) -> Vec<Self::Part<'_>> {
///         towers_multigpu::split_slice(&self.tokens, sizes)
///     }
///
///     fn weights(&self, sizes: &[usize]) -> Vec<f64> {
///         let parts = self.split(sizes);
///         parts.iter().map(|p| p.iter().map(Vec::len).sum::<usize>() as f64).collect()
///     }
/// }
///
/// let batch = Sentences { tokens: vec![vec![1, 2, 3], vec![4], vec![5, 6]] };
/// assert_eq!(batch.weights(&[1, 2]), vec![3.0, 3.0]);
/// ```
pub trait TowerBatch: Sync {
    /// One tower's part of the batch.
    type Part<'a>: Send
    where
        Self: 'a;

    /// The examples in the batch: what [`split`](Self::split) divides.
    fn len(&self) -> usize;

    /// Whether the batch holds no example.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The batch cut into consecutive parts of `sizes` examples, in order.
    ///
    /// The towers only ask for sizes that add up to [`len`](Self::len), none of them zero.
    fn split(&self, sizes: &[usize]) -> Vec<Self::Part<'_>>;

    /// Each part's weight in the batch's mean loss, for the parts of `sizes` examples: the
    /// examples themselves unless the loss is averaged over something else (see the trait
    /// docs). Weights must be positive and finite.
    fn weights(&self, sizes: &[usize]) -> Vec<f64> {
        sizes.iter().map(|&n| n as f64).collect()
    }
}

/// Batches of Burn dataset items: each tower gets a sub-slice of the items, weighted by its
/// count.
impl<I: Sync> TowerBatch for Vec<I> {
    type Part<'a>
        = &'a [I]
    where
        I: 'a;

    fn len(&self) -> usize {
        self.as_slice().len()
    }

    fn split(&self, sizes: &[usize]) -> Vec<&[I]> {
        split_slice(self, sizes)
    }
}

/// `items` cut into consecutive sub-slices of `sizes` items, for [`TowerBatch::split`].
///
/// # Panics
///
/// When the sizes add up to more than `items.len()`.
pub fn split_slice<'a, I>(items: &'a [I], sizes: &[usize]) -> Vec<&'a [I]> {
    let mut rest = items;
    sizes
        .iter()
        .map(|&n| {
            let (part, after) = rest.split_at(n);
            rest = after;
            part
        })
        .collect()
}

/// Part sizes for `batch` examples shared out in proportion to `shares`.
///
/// Rounds by largest remainder, so the sizes add up to `batch` exactly; equal shares give sizes
/// that differ by at most one. An error when a share is not positive and finite, or when some
/// device would get no example.
pub fn split_sizes(batch: usize, shares: &[f64]) -> Result<Vec<usize>, String> {
    if shares.is_empty() || shares.iter().any(|s| !s.is_finite() || *s <= 0.0) {
        return Err(format!(
            "device shares must be positive numbers, got {shares:?}"
        ));
    }
    // Relative to the largest: shares near f64::MAX would sum to infinity.
    let largest = shares.iter().copied().fold(0.0, f64::max);
    let relative: Vec<f64> = shares.iter().map(|s| s / largest).collect();
    let total: f64 = relative.iter().sum();
    let exact: Vec<f64> = relative.iter().map(|s| s / total * batch as f64).collect();
    let mut sizes: Vec<usize> = exact.iter().map(|x| x.floor() as usize).collect();
    let mut order: Vec<usize> = (0..shares.len()).collect();
    // Largest fractional part first; ties go to the earlier device.
    order.sort_by(|&a, &b| {
        let (fa, fb) = (exact[a] - exact[a].floor(), exact[b] - exact[b].floor());
        fb.total_cmp(&fa).then(a.cmp(&b))
    });
    let missing = batch - sizes.iter().sum::<usize>();
    for &i in order.iter().take(missing) {
        sizes[i] += 1;
    }
    if sizes.contains(&0) {
        return Err(format!(
            "a batch of {batch} split by shares {shares:?} leaves a device without examples \
             (sizes {sizes:?}): use a larger batch or fewer devices"
        ));
    }
    Ok(sizes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_sizes_by_largest_remainder() {
        assert_eq!(split_sizes(128, &[1.0, 1.0]).unwrap(), vec![64, 64]);
        assert_eq!(split_sizes(128, &[1.0; 3]).unwrap(), vec![43, 43, 42]);
        assert_eq!(split_sizes(10, &[3.0, 1.0]).unwrap(), vec![8, 2]);
        assert_eq!(split_sizes(7, &[1.0, 2.0, 4.0]).unwrap(), vec![1, 2, 4]);
        assert!(split_sizes(2, &[1.0; 3]).is_err());
        assert!(split_sizes(8, &[1.0, 0.0]).is_err());
        assert!(split_sizes(8, &[]).is_err());
        // Shares whose sum is past f64::MAX split as their ratio says.
        assert_eq!(split_sizes(128, &[1e308, 1e308]).unwrap(), vec![64, 64]);
        assert_eq!(
            split_sizes(12, &[f64::MAX, f64::MAX / 2.0]).unwrap(),
            vec![8, 4]
        );
    }

    #[test]
    fn a_vec_splits_into_consecutive_sub_slices_weighted_by_count() {
        let items: Vec<u8> = (0..7).collect();
        let parts = items.split(&[3, 1, 3]);
        assert_eq!(parts, vec![&[0, 1, 2][..], &[3], &[4, 5, 6]]);
        assert_eq!(items.weights(&[3, 1, 3]), vec![3.0, 1.0, 3.0]);
    }
}
