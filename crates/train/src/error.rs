//! The crate's one error type: each variant says what failed and where (file, step).
//!
//! Messages embed their causes (`input: thread 'reader-1': FILE, record 3: bad data CRC`), so
//! no variant also returns one from `Error::source`: `anyhow`'s report (what the examples'
//! `main` prints) would otherwise repeat each cause under "Caused by".

use std::path::PathBuf;

/// An error from configuring, training, checkpointing or evaluating.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A configuration that cannot work, or a config file that cannot be read.
    #[error("configuration: {0}")]
    Config(String),
    /// A file or directory operation failed.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What the OS said.
        error: std::io::Error,
    },
    /// A checkpoint that cannot be read back: not one, truncated, or for another model.
    #[error("checkpoint {}: {reason}", path.display())]
    Checkpoint {
        /// The checkpoint file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The loss became NaN or infinite: training stopped before writing anything more.
    #[error(
        "model diverged at step {step}: loss = {loss}; no checkpoint was written for it \
         (the last good one is {last_checkpoint})"
    )]
    Diverged {
        /// The step (1-based update count) whose loss was not finite.
        step: u64,
        /// The loss.
        loss: f64,
        /// The newest checkpoint on disk, or "none".
        last_checkpoint: String,
    },
    /// The input pipeline failed (a bad file, a reader panic).
    #[error("input: {0}")]
    Data(towers_data::Error),
    /// Weights that cannot be read, or do not fit the model.
    #[error("weights: {0}")]
    Weights(#[from] towers_models::weights::WeightsError),
    /// A tower failed, or the device list is wrong.
    #[error("towers: {0}")]
    Towers(towers_multigpu::Error),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An [`Error::Io`] for `path`.
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |error| Error::Io { path, error }
    }
}

// By hand rather than `#[from]`, which would also make the inner error the `source`.
impl From<towers_data::Error> for Error {
    fn from(error: towers_data::Error) -> Self {
        Error::Data(error)
    }
}

impl From<towers_multigpu::Error> for Error {
    fn from(error: towers_multigpu::Error) -> Self {
        Error::Towers(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `fn main() -> anyhow::Result<()>` prints after `Error: `.
    fn report(error: Error) -> String {
        format!("{:?}", anyhow::Error::from(error))
    }

    #[test]
    fn a_report_prints_each_cause_once() {
        let not_found = || std::io::Error::from(std::io::ErrorKind::NotFound);
        let reader = towers_data::Error::Thread {
            thread: "reader-1".into(),
            error: Box::new(towers_data::Error::Io {
                path: "/data/train-00001".into(),
                error: not_found(),
            }),
        };
        let spawn = towers_multigpu::Error::Spawn {
            tower: 1,
            device: "flex".into(),
            error: std::io::Error::other("out of threads"),
        };
        let cases = [
            (
                Error::from(reader),
                "input: thread 'reader-1': /data/train-00001: entity not found",
            ),
            (
                Error::from(spawn),
                "towers: cannot start the thread of tower 1 on `flex`: out of threads",
            ),
            (
                Error::io("/ckpt/model.ckpt-5")(not_found()),
                "/ckpt/model.ckpt-5: entity not found",
            ),
        ];
        for (error, want) in cases {
            let printed = report(error);
            // A backtrace may follow when RUST_BACKTRACE is set; no "Caused by" may.
            assert!(printed.starts_with(want), "{printed}");
            assert!(!printed.contains("Caused by"), "{printed}");
        }
    }
}
