//! [`WeightsError`]: the error of reading or applying weights, naming the file and tensor.

use std::path::PathBuf;

/// An error reading or applying weights. Each names the file and, where there is one, the
/// tensor.
///
/// Messages embed their causes (`FILE: entity not found`), so no variant also returns one from
/// `Error::source` (no field is named `source`): a report that prints the chain (`anyhow`'s
/// "Caused by") then prints each cause once.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WeightsError {
    /// The file could not be read.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        error: std::io::Error,
    },
    /// The file is not what it should be (not a checkpoint, truncated, corrupt, unsupported).
    #[error("{}: {reason}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// One tensor of the file is unreadable or does not fit the model.
    #[error("{}: tensor `{tensor}`: {reason}", path.display())]
    Tensor {
        /// The file.
        path: PathBuf,
        /// The tensor's name in the file.
        tensor: String,
        /// What is wrong.
        reason: String,
    },
}

impl WeightsError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |error| Self::Io { path, error }
    }

    pub(crate) fn format(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Self::Format {
            path: path.into(),
            reason: reason.into(),
        }
    }

    pub(crate) fn tensor(
        path: impl Into<PathBuf>,
        tensor: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        Self::Tensor {
            path: path.into(),
            tensor: tensor.into(),
            reason: reason.into(),
        }
    }
}

/// The result of reading or applying weights.
pub type Result<T, E = WeightsError> = std::result::Result<T, E>;
