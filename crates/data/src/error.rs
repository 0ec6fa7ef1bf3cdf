//! The one error type of the input pipeline: every variant says where it happened.
//!
//! Each message carries the whole story (`thread 'reader-1': FILE, record 3: bad data CRC`),
//! so no variant also returns its cause from `Error::source`: a report that prints the
//! chain (`anyhow`'s "Caused by") then prints each cause once.

use std::path::PathBuf;

/// An input-pipeline error, with the file, record or thread it concerns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or opening a file failed.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        error: std::io::Error,
    },
    /// A whole file is unusable (wrong size, not a dataset file, empty directory...).
    #[error("{}: {reason}", path.display())]
    File {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// One record of a file is bad (truncated, corrupt, label out of range...).
    #[error("{}, record {record}: {reason}", path.display())]
    Record {
        /// The file holding the record.
        path: PathBuf,
        /// The record's index in its file (0-based).
        record: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// One item of a Burn `Dataset` could not be had (its `get` failed or panicked).
    #[error("dataset item {index} (of {len}): {reason}")]
    Item {
        /// The item's index.
        index: usize,
        /// The dataset's length.
        len: usize,
        /// What went wrong.
        reason: String,
    },
    /// The pipeline or one of its parts was configured in a way that cannot work.
    #[error("configuration: {0}")]
    Config(String),
    /// A thread panicked; the panic message is kept.
    #[error("thread '{thread}' panicked: {message}")]
    Panic {
        /// The thread's name.
        thread: String,
        /// The panic payload, when it was a string.
        message: String,
    },
    /// A thread failed with an error of its own.
    #[error("thread '{thread}': {error}")]
    Thread {
        /// The thread's name.
        thread: String,
        /// Its error.
        error: Box<Error>,
    },
    /// Threads were still running when `join`'s grace period ran out.
    #[error("threads still running {grace_ms} ms after the stop request: {threads:?}")]
    JoinTimeout {
        /// The grace period that expired.
        grace_ms: u128,
        /// Names of the threads that did not finish.
        threads: Vec<String>,
    },
    /// More records were corrupt than [`crate::CorruptRecords::Skip`] allows.
    #[error(
        "{skipped} of {read} records read were corrupt, more than the {:.2}% allowed; the last: {last}",
        max_fraction * 100.0
    )]
    TooManyCorrupt {
        /// Records skipped, this one included.
        skipped: u64,
        /// Records read.
        read: u64,
        /// The fraction allowed.
        max_fraction: f64,
        /// The record that went over the limit.
        last: Box<Error>,
    },
    /// A queue was cancelled (a hard stop): not a failure of its own, a consequence of one.
    #[error("queue cancelled")]
    Cancelled,
}

impl Error {
    /// The error that caused this one, through any [`Error::Thread`] wrappers.
    pub fn root(&self) -> &Error {
        match self {
            Error::Thread { error, .. } => error.root(),
            other => other,
        }
    }
}

/// The pipeline's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
