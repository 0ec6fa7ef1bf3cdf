//! The crate's one error type: each variant says what failed and where (file, step).

use std::path::PathBuf;

/// An error from configuring, training, checkpointing or evaluating.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A configuration that cannot work, or a config file that cannot be read.
    #[error("configuration: {0}")]
    Config(String),
    /// A file or directory operation failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
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
    Data(#[from] towers_data::Error),
    /// Weights that cannot be read, or do not fit the model.
    #[error("weights: {0}")]
    Weights(#[from] towers_models::weights::WeightsError),
    /// A tower failed, or the device list is wrong.
    #[error("towers: {0}")]
    Towers(#[from] towers_multigpu::Error),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An [`Error::Io`] for `path`.
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { path, source }
    }
}
