//! [`SameRanks`]: a job's other ranks, in process, each holding this rank's own values.

use std::sync::atomic::{AtomicUsize, Ordering};

use burn::tensor::{Device, Tensor};
use towers_multigpu::CrossProcess;

/// A job of `ranks` ranks where every other rank holds exactly this rank's values (rank 0):
/// a weighted mean over them is this rank's own, so towers joined to it train like towers
/// alone, while going through every exchange. Its bucket exchange takes each bucket only once
/// the towers have it ready, as MPI's does, and counts the buckets.
pub struct SameRanks {
    ranks: usize,
    buckets: AtomicUsize,
}

impl SameRanks {
    /// A job of `ranks` ranks.
    pub fn new(ranks: usize) -> Self {
        Self {
            ranks,
            buckets: AtomicUsize::new(0),
        }
    }

    /// The buckets summed so far.
    pub fn buckets(&self) -> usize {
        self.buckets.load(Ordering::SeqCst)
    }
}

impl CrossProcess for SameRanks {
    fn rank(&self) -> usize {
        0
    }

    fn size(&self) -> usize {
        self.ranks
    }

    /// This rank's `t`, on `device` as the trait says (MPI's results are new tensors there).
    fn weighted_mean(&self, _: &str, t: Vec<Tensor<1>>, _: f64, device: &Device) -> Vec<Tensor<1>> {
        on(t, device)
    }

    fn broadcast(&self, _: &str, t: Vec<Tensor<1>>, device: &Device) -> Vec<Tensor<1>> {
        on(t, device)
    }

    fn sum_buckets(
        &self,
        _: &str,
        sizes: &[usize],
        ready: &mut dyn FnMut(usize) -> Option<Vec<f32>>,
        done: &mut dyn FnMut(usize, &[f32]),
    ) {
        for (k, &size) in sizes.iter().enumerate() {
            let bucket = std::iter::repeat_with(|| ready(k)).find_map(|b| b).unwrap();
            assert_eq!(bucket.len(), size, "bucket {k}");
            let sum: Vec<f32> = bucket.iter().map(|v| v * self.ranks as f32).collect();
            done(k, &sum);
            self.buckets.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Every rank's bytes are this one's (the default, built on sums, would double them).
    fn all_gather(&self, _: &str, bytes: &[u8]) -> Vec<Vec<u8>> {
        vec![bytes.to_vec(); self.ranks]
    }

    fn any(&self, _: &str, flag: bool) -> bool {
        flag
    }

    fn abort(&self, message: &str) -> ! {
        panic!("{message}")
    }
}

/// `tensors` as new tensors of their values on `device`.
fn on(tensors: Vec<Tensor<1>>, device: &Device) -> Vec<Tensor<1>> {
    (tensors.into_iter())
        .map(|t| Tensor::from_data(t.into_data(), device))
        .collect()
}
