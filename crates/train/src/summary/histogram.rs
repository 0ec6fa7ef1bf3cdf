//! Histograms as TF's `tf.summary.histogram` built them (`core/lib/histogram/histogram.cc`):
//! TF's default bucket edges, exponential from 1e-12 to 1e20 in steps of 10% on either side of
//! zero, and runs of empty buckets merged into one before writing.

use std::sync::OnceLock;

use crate::summary::proto::HistogramProto;

/// TF's default bucket edges: `-DBL_MAX`, `-1e20 .. -1e-12`, `0`, `1e-12 .. 1e20`, `DBL_MAX`,
/// the magnitudes growing by 10% from one edge to the next.
pub fn default_bucket_limits() -> &'static [f64] {
    static LIMITS: OnceLock<Vec<f64>> = OnceLock::new();
    LIMITS.get_or_init(|| {
        let mut positive = Vec::new();
        let mut v = 1.0e-12;
        while v < 1.0e20 {
            positive.push(v);
            v *= 1.1;
        }
        positive.push(f64::MAX);
        let negative = positive.iter().rev().map(|v| -v);
        negative
            .chain([0.0])
            .chain(positive.iter().copied())
            .collect()
    })
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
    /// refuses those too: "Nan in summary histogram").
    pub fn of(values: &[f32]) -> Option<Self> {
        let mut histogram = Self::default();
        for &v in values {
            if !v.is_finite() {
                return None;
            }
            histogram.add(v as f64);
        }
        Some(histogram)
    }

    /// Counts `value` in the first bucket whose edge is above it.
    pub fn add(&mut self, value: f64) {
        let bucket = default_bucket_limits().partition_point(|&limit| limit <= value);
        self.counts[bucket] += 1.0;
        self.min = self.min.min(value);
        self.max = self.max.max(value);
        self.num += 1.0;
        self.sum += value;
        self.sum_squares += value * value;
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
