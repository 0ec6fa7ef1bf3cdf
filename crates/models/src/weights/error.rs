//! [`WeightsError`]: the error of reading or applying weights, naming the file and tensor.

use std::path::PathBuf;

/// An error reading or applying weights. Each names the file and, where there is one, the
/// tensor.
///
/// The OS's error is embedded in `Io`'s message (`FILE: entity not found`) and kept as a value
/// in its field; a decoder's error under `Format` or `Tensor` (protobuf's, safetensors', the
/// pickle reader's) is their `source`, kept out of the message: a report that prints the chain
/// (`anyhow`'s "Caused by") prints each cause once.
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
        /// What is wrong, as far as this layer knows.
        reason: String,
        /// The decoder's error under it, when there is one: the error's `source`.
        #[source]
        error: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// One tensor of the file is unreadable or does not fit the model.
    #[error("{}: tensor `{tensor}`: {reason}", path.display())]
    Tensor {
        /// The file.
        path: PathBuf,
        /// The tensor's name in the file.
        tensor: String,
        /// What is wrong, as far as this layer knows.
        reason: String,
        /// The decoder's error under it, when there is one: the error's `source`.
        #[source]
        error: Option<Box<dyn std::error::Error + Send + Sync>>,
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
            error: None,
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
            error: None,
        }
    }

    /// This [`Format`](Self::Format) or [`Tensor`](Self::Tensor) error with the decoder's
    /// `error` as its `source`.
    pub(crate) fn caused_by(
        mut self,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        if let Self::Format { error, .. } | Self::Tensor { error, .. } = &mut self {
            *error = Some(Box::new(cause));
        }
        self
    }
}

/// The result of reading or applying weights.
pub type Result<T, E = WeightsError> = std::result::Result<T, E>;
