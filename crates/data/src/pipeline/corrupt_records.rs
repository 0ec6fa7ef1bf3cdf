//! [`CorruptRecords`]: what readers do with a record that fails to decode (a bad data CRC, a
//! corrupt image, a label out of range): stop (the default), or skip it as tf.data's
//! `ignore_errors()` does, within a budget, so that silent data loss cannot grow unnoticed.

use std::sync::atomic::{AtomicU64, Ordering};

use towers_multigpu::eprint_line;

use crate::error::{Error, ErrorChain, Result};

/// The policy for records that fail to decode.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub enum CorruptRecords {
    /// Stop the pipeline with the error, naming file and record.
    #[default]
    Fail,
    /// Skip each with a warning naming file and record, until more than `max_fraction` of the
    /// records read so far have been skipped (one is always allowed): then stop with
    /// [`Error::TooManyCorrupt`].
    Skip {
        /// E.g. 0.01 for 1%.
        max_fraction: f64,
    },
}

/// Records read and skipped so far by a pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecordCount {
    /// Records the readers took, skipped ones included.
    pub read: u64,
    /// Records skipped as corrupt.
    pub skipped: u64,
}

/// The shared tally of a pipeline's readers.
#[derive(Debug, Default)]
pub(crate) struct CorruptTally {
    policy: CorruptRecords,
    read: AtomicU64,
    skipped: AtomicU64,
}

impl CorruptTally {
    pub(super) fn new(policy: CorruptRecords) -> Self {
        Self {
            policy,
            ..Self::default()
        }
    }

    /// Whether bad records are skipped.
    pub(super) fn skips(&self) -> bool {
        matches!(self.policy, CorruptRecords::Skip { .. })
    }

    pub(super) fn count(&self) -> RecordCount {
        RecordCount {
            read: self.read.load(Ordering::SeqCst),
            skipped: self.skipped.load(Ordering::SeqCst),
        }
    }

    /// Counts one record read; passes on `outcome`, or, when it is a bad record and the
    /// policy skips, warns and returns `Ok(None)`.
    pub(super) fn record<T>(&self, outcome: Result<T>) -> Result<Option<T>> {
        let read = self.read.fetch_add(1, Ordering::SeqCst) + 1;
        let error = match outcome {
            Ok(value) => return Ok(Some(value)),
            Err(error) => error,
        };
        let CorruptRecords::Skip { max_fraction } = self.policy else {
            return Err(error);
        };
        if !matches!(error, Error::Record { .. }) {
            return Err(error);
        }
        let skipped = self.skipped.fetch_add(1, Ordering::SeqCst) + 1;
        let allowed = ((max_fraction * read as f64) as u64).max(1);
        if skipped > allowed {
            return Err(Error::TooManyCorrupt {
                skipped,
                read,
                max_fraction,
                last: Box::new(error),
            });
        }
        eprint_line(&format!(
            "warning: skipped corrupt record: {}",
            ErrorChain(&error)
        ));
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use towers_testing::{assert_error_names, report};

    use super::*;

    fn bad(record: usize) -> Result<()> {
        Err(Error::Record {
            path: "shard".into(),
            record,
            error: "bad data CRC".into(),
        })
    }

    #[test]
    fn fail_passes_every_error_on() {
        let tally = CorruptTally::new(CorruptRecords::Fail);
        assert!(tally.record(bad(0)).is_err());
        assert_eq!(
            tally.count(),
            RecordCount {
                read: 1,
                skipped: 0
            }
        );
    }

    /// At 1%: one bad record is always allowed, a second only once 200 are read.
    #[test]
    fn skip_allows_the_fraction_then_stops() {
        let tally = CorruptTally::new(CorruptRecords::Skip { max_fraction: 0.01 });
        assert_eq!(tally.record(bad(0)).unwrap(), None);
        for _ in 1..99 {
            assert_eq!(tally.record(Ok(())).unwrap(), Some(()));
        }
        let err = report(&tally.record(bad(99)).unwrap_err());
        assert_error_names(&err, &["2 of 100 records", "shard, record 99"]);

        let tally = CorruptTally::new(CorruptRecords::Skip { max_fraction: 0.01 });
        for _ in 0..199 {
            tally.record(Ok(())).unwrap();
        }
        assert_eq!(tally.record(bad(199)).unwrap(), None);
        assert_eq!(tally.record(bad(200)).unwrap(), None, "2 of 201: allowed");
        assert_eq!(
            tally.count(),
            RecordCount {
                read: 201,
                skipped: 2
            }
        );
    }

    #[test]
    fn only_bad_records_are_skipped() {
        let tally = CorruptTally::new(CorruptRecords::Skip { max_fraction: 0.5 });
        let io = Error::Io {
            path: "shard".into(),
            error: std::io::Error::other("device gone"),
        };
        assert!(tally.record::<()>(Err(io)).is_err());
    }
}
