//! The one error type of the input pipeline: every variant says where it happened.
//!
//! A cause that is an error value of its own (the OS's I/O error, the error a thread failed
//! with, the last corrupt record) is returned by `Error::source` and kept out of the message;
//! a message holds only what this layer adds (`thread 'reader-1'`, `FILE`). So a report that
//! prints the chain (`anyhow`'s `{:#}` or "Caused by", or [`ErrorChain`]) prints each cause
//! once, and a caller can match the cause by kind (`source()`, `downcast_ref::<io::Error>()`).

use std::path::{Path, PathBuf};

pub use towers_multigpu::{Cause, ErrorChain, While};

/// An input-pipeline error, with the file, record or thread it concerns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading or opening a file failed.
    #[error("{}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said: the error's `source`.
        #[source]
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
    #[error("{}, record {record}", path.display())]
    Record {
        /// The file holding the record.
        path: PathBuf,
        /// The record's index in its file (0-based).
        record: usize,
        /// What is wrong with it, as the value it was (the image decoder's error, the protobuf
        /// decoder's, a transform's, or a message): the error's `source`.
        #[source]
        error: Cause,
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
    #[error("thread '{thread}'")]
    Thread {
        /// The thread's name.
        thread: String,
        /// Its error: the error's `source`.
        #[source]
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
        "{skipped} of {read} records read were corrupt, more than the {:.2}% allowed; the last",
        max_fraction * 100.0
    )]
    TooManyCorrupt {
        /// Records skipped, this one included.
        skipped: u64,
        /// Records read.
        read: u64,
        /// The fraction allowed.
        max_fraction: f64,
        /// The record that went over the limit: the error's `source`.
        #[source]
        last: Box<Error>,
    },
    /// A queue was cancelled (a hard stop): not a failure of its own, a consequence of one.
    #[error("queue cancelled")]
    Cancelled,
}

impl Error {
    /// A `map_err` for I/O on `path`: the OS's error as [`Error::Io`] naming it.
    pub(crate) fn io_at(path: &Path) -> impl Fn(std::io::Error) -> Error + use<> {
        let path = path.to_path_buf();
        move |error| Error::Io {
            path: path.clone(),
            error,
        }
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    fn not_found() -> std::io::Error {
        std::io::Error::from(std::io::ErrorKind::NotFound)
    }

    /// A reader thread that failed because too many records were corrupt, the last of them
    /// unreadable: three layers of ours and the OS's error.
    fn nested() -> Error {
        Error::Thread {
            thread: "reader-1".into(),
            error: Box::new(Error::TooManyCorrupt {
                skipped: 3,
                read: 10,
                max_fraction: 0.1,
                last: Box::new(Error::Thread {
                    thread: "reader-0".into(),
                    error: Box::new(Error::Io {
                        path: "/data/train-00001".into(),
                        error: not_found(),
                    }),
                }),
            }),
        }
    }

    #[test]
    fn a_chain_prints_each_cause_once_in_order() {
        let error = nested();
        let causes = [
            "thread 'reader-1'",
            "3 of 10 records read were corrupt, more than the 10.00% allowed; the last",
            "thread 'reader-0'",
            "/data/train-00001",
            "entity not found",
        ];
        let printed = ErrorChain(&error).to_string();
        assert_eq!(printed, causes.join(": "));
        // What `fn main() -> anyhow::Result<()>` prints: the message, then "Caused by".
        let report = format!("{:?}", anyhow::Error::from(nested()));
        for cause in causes {
            assert_eq!(report.matches(cause).count(), 1, "{cause:?} in {report}");
        }
    }

    #[test]
    fn the_os_error_is_a_value_under_the_wrappers() {
        let error = nested();
        let io = std::iter::successors(Some(&error as &(dyn std::error::Error + 'static)), |e| {
            e.source()
        })
        .find_map(|e| e.downcast_ref::<std::io::Error>());
        assert_eq!(
            io.map(std::io::Error::kind),
            Some(std::io::ErrorKind::NotFound)
        );
    }
}
