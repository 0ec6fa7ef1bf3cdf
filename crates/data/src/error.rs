//! The one error type of the input pipeline: every variant says where it happened.

use std::path::PathBuf;

/// An input-pipeline error, with the file, record or thread it concerns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or opening a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
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
    /// A batch could not be split across devices as asked.
    #[error("batch split: {0}")]
    Split(String),
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
    #[error("thread '{thread}': {source}")]
    Thread {
        /// The thread's name.
        thread: String,
        /// Its error.
        source: Box<Error>,
    },
    /// Threads were still running when `join`'s grace period ran out.
    #[error("threads still running {grace_ms} ms after the stop request: {threads:?}")]
    JoinTimeout {
        /// The grace period that expired.
        grace_ms: u128,
        /// Names of the threads that did not finish.
        threads: Vec<String>,
    },
    /// A queue was cancelled (a hard stop): not a failure of its own, a consequence of one.
    #[error("queue cancelled")]
    Cancelled,
}

impl Error {
    /// The error that caused this one, through any [`Error::Thread`] wrappers.
    pub fn root(&self) -> &Error {
        match self {
            Error::Thread { source, .. } => source.root(),
            other => other,
        }
    }
}

/// The pipeline's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
