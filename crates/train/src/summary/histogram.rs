//! Histograms as TF's `tf.summary.histogram` built them (`core/lib/histogram/histogram.cc`):
//! TF's default bucket edges, exponential from 1e-12 to 1e20 in steps of 10% on either side of
//! zero, and runs of empty buckets merged into one before writing.

use std::sync::OnceLock;

use rayon::prelude::*;

use crate::summary::proto::HistogramProto;

/// TF's default bucket edges: `-DBL_MAX`, `-1e20 .. -1e-12`, `0`, `1e-12 .. 1e20`, `DBL_MAX`,
/// the magnitudes growing by 10% from one edge to the next.
pub fn default_bucket_limits() -> &'static [f64] {
    static LIMITS: OnceLock<Vec<f64>> = OnceLock::new();
    LIMITS.get_or_init(|| {
        let mut positive = Vec::new();
        let mut v = SMALLEST;
        while v < 1.0e20 {
            positive.push(v);
            v *= GROWTH;
        }
        positive.push(f64::MAX);
        let negative = positive.iter().rev().map(|v| -v);
        negative
            .chain([0.0])
            .chain(positive.iter().copied())
            .collect()
    })
}

/// Values per chunk counted on one thread: large enough that merging the chunks' counts
/// (1,500 buckets) costs little beside counting them.
const CHUNK: usize = 1 << 16;

/// The smallest positive edge and the growth from one edge to the next.
const SMALLEST: f64 = 1.0e-12;
const GROWTH: f64 = 1.1;

/// The index of the first edge above `value` (the first `limit > value`), as a binary search
/// of the edges finds it, 12 comparisons per value: guessed from the value's logarithm, which
/// lands within a bucket or two of it (the edges are products of 1.1, not its powers), and
/// then walked to it along the edges.
fn bucket(value: f64) -> usize {
    let limits = default_bucket_limits();
    let zero = limits.len() / 2;
    // Edges from 1e-12 up to |value|, by the logarithm: 0 below the smallest edge.
    let below = if value.abs() < SMALLEST {
        0
    } else {
        // In f64 first: past 1e296 the quotient is infinite.
        ((value.abs() / SMALLEST).ln() / GROWTH.ln() + 1.0).min(zero as f64) as usize
    };
    let mut i = if value > 0.0 {
        zero + 1 + below
    } else if value < 0.0 {
        zero - below
    } else {
        zero + 1
    };
    while i > 0 && limits[i - 1] > value {
        i -= 1;
    }
    while i < limits.len() && limits[i] <= value {
        i += 1;
    }
    i
}

/// Counts of values in TF's default buckets, with their min, max, sum and sum of squares.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    min: f64,
    max: f64,
    num: f64,
    sum: f64,
    sum_squares: f64,
    counts: Vec<f64>,
}

impl Default for Histogram {
    fn default() -> Self {
        Self {
            min: f64::MAX,
            max: -f64::MAX,
            num: 0.0,
            sum: 0.0,
            sum_squares: 0.0,
            counts: vec![0.0; default_bucket_limits().len()],
        }
    }
}

impl Histogram {
    /// The histogram of `values`, or `None` when one is NaN or infinite (TF's summary op
    /// refuses those too: "Nan in summary histogram"). Chunks are counted on rayon's threads
    /// and merged: a weight histogram runs between steps, while the cores would otherwise wait.
    pub fn of(values: &[f32]) -> Option<Self> {
        values
            .par_chunks(CHUNK)
            .map(|chunk| {
                let mut histogram = Self::default();
                for &v in chunk {
                    if !v.is_finite() {
                        return None;
                    }
                    histogram.add(v as f64);
                }
                Some(histogram)
            })
            .try_reduce(Self::default, |a, b| Some(a.merged(b)))
    }

    /// Counts `value` in the first bucket whose edge is above it.
    pub fn add(&mut self, value: f64) {
        self.counts[bucket(value)] += 1.0;
        self.min = self.min.min(value);
        self.max = self.max.max(value);
        self.num += 1.0;
        self.sum += value;
        self.sum_squares += value * value;
    }

    /// The counts of both.
    fn merged(mut self, other: Self) -> Self {
        for (count, more) in self.counts.iter_mut().zip(&other.counts) {
            *count += more;
        }
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.num += other.num;
        self.sum += other.sum;
        self.sum_squares += other.sum_squares;
        self
    }

    /// The proto TF writes: each run of empty buckets becomes one bucket with the run's last
    /// edge (so an empty histogram is one empty bucket at `DBL_MAX`).
    pub fn to_proto(&self) -> HistogramProto {
        let limits = default_bucket_limits();
        let (mut bucket_limit, mut bucket) = (Vec::new(), Vec::new());
        let mut i = 0;
        while i < self.counts.len() {
            let (mut end, mut count) = (limits[i], self.counts[i]);
            i += 1;
            if count <= 0.0 {
                while i < self.counts.len() && self.counts[i] <= 0.0 {
                    (end, count) = (limits[i], self.counts[i]);
                    i += 1;
                }
            }
            bucket_limit.push(end);
            bucket.push(count);
        }
        HistogramProto {
            min: self.min,
            max: self.max,
            num: self.num,
            sum: self.sum,
            sum_squares: self.sum_squares,
            bucket_limit,
            bucket,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_limits_are_symmetric_around_zero_and_increasing() {
        let limits = default_bucket_limits();
        let n = limits.len();
        assert_eq!(n % 2, 1);
        assert_eq!(limits[n / 2], 0.0);
        assert_eq!((limits[0], limits[n - 1]), (-f64::MAX, f64::MAX));
        assert_eq!(limits[n / 2 + 1], 1e-12);
        assert!(limits.windows(2).all(|w| w[0] < w[1]));
        for i in 0..n {
            assert_eq!(limits[i], -limits[n - 1 - i]);
        }
        // The last finite edge is the first power of 1.1 times 1e-12 at or past 1e20.
        assert!(limits[n - 2] >= 1e20 / 1.1 && limits[n - 2] < 1e20);
    }

    #[test]
    fn counts_equal_a_brute_force_count_per_bucket() {
        let values: Vec<f32> = (0..500)
            .map(|i| ((i * 7919) % 1000) as f32 / 37.0 - 13.0)
            .collect();
        let histogram = Histogram::of(&values).unwrap();
        let limits = default_bucket_limits();
        for (i, &count) in histogram.counts.iter().enumerate() {
            let low = if i == 0 {
                f64::NEG_INFINITY
            } else {
                limits[i - 1]
            };
            let want = values
                .iter()
                .filter(|&&v| (v as f64) >= low && (v as f64) < limits[i])
                .count();
            assert_eq!(count, want as f64, "bucket {i}");
        }
        let proto = histogram.to_proto();
        assert_eq!(proto.num, 500.0);
        assert_eq!(proto.bucket.iter().sum::<f64>(), 500.0);
        let sum: f64 = values.iter().map(|&v| v as f64).sum();
        assert!((proto.sum - sum).abs() < 1e-9);
        assert_eq!(proto.min, -13.0);
        // Merged runs: no two empty buckets follow each other.
        assert!(proto.bucket.windows(2).all(|w| w[0] > 0.0 || w[1] > 0.0));
    }

    #[test]
    fn bucket_equals_a_binary_search_of_the_edges() {
        let limits = default_bucket_limits();
        let searched = |v: f64| limits.partition_point(|&limit| limit <= v);
        // Every edge, the values on either side of it, and values between edges.
        let mut values = vec![0.0, -0.0, f64::MAX, -f64::MAX, 1e-300, -1e-300, 3e38, -3e38];
        for &limit in &limits[1..limits.len() - 1] {
            values.extend([limit, limit.next_up(), limit.next_down(), limit * 1.05]);
        }
        for v in values {
            assert_eq!(bucket(v), searched(v), "{v:e}");
        }
    }

    #[test]
    fn chunks_merge_into_the_histogram_of_the_whole() {
        // Three chunks and a part, and a NaN in the last chunk only.
        let values: Vec<f32> = (0..3 * CHUNK + 17)
            .map(|i| ((i * 7919) % 100_003) as f32 / 1000.0 - 50.0)
            .collect();
        let mut whole = Histogram::default();
        values.iter().for_each(|&v| whole.add(v as f64));
        let merged = Histogram::of(&values).unwrap();
        assert_eq!(merged.counts, whole.counts);
        assert_eq!(
            (merged.min, merged.max, merged.num),
            (whole.min, whole.max, whole.num)
        );
        assert!((merged.sum - whole.sum).abs() < 1e-6 * whole.sum_squares.sqrt());
        let mut with_nan = values;
        *with_nan.last_mut().unwrap() = f32::NAN;
        assert!(Histogram::of(&with_nan).is_none());
    }

    #[test]
    fn empty_and_non_finite() {
        let proto = Histogram::default().to_proto();
        assert_eq!(
            (proto.bucket_limit, proto.bucket),
            (vec![f64::MAX], vec![0.0])
        );
        assert!(Histogram::of(&[1.0, f32::NAN]).is_none());
        assert!(Histogram::of(&[f32::INFINITY]).is_none());
    }
}
