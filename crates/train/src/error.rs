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
    /// An image file that cannot be decoded (not a JPEG or PNG, truncated, corrupt) or
    /// preprocessed.
    #[error("image {}: {reason}", path.display())]
    Image {
        /// The image file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A tensor that could not be read back from its device (a backend failure).
    #[error("reading {what} from the device: {reason}")]
    Readback {
        /// What was being read (`logits`, `probabilities`).
        what: &'static str,
        /// What the backend said.
        reason: String,
    },
    /// A file the run writes and reads back (the train log, the loss plot) that cannot be read
    /// or rendered.
    #[error("{}: {reason}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong (with the line, for the train log).
        reason: String,
    },
    /// The stop-signal handler (SIGINT, SIGTERM, SIGHUP) could not be installed.
    #[error("{0}")]
    Signals(String),
    /// The training input ended. Training input repeats its epochs forever, so one that ends
    /// is a source that cannot go on (a finite source given to training).
    #[error("the training input ended: training input must repeat its epochs forever")]
    InputEnded,
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
    Weights(towers_models::weights::WeightsError),
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

impl From<towers_models::weights::WeightsError> for Error {
    fn from(error: towers_models::weights::WeightsError) -> Self {
        Error::Weights(error)
    }
}

impl From<towers_multigpu::Error> for Error {
    fn from(error: towers_multigpu::Error) -> Self {
        Error::Towers(error)
    }
}

#[cfg(test)]
mod tests {
    use towers_models::weights::WeightsError;

    use super::*;

    /// What `fn main() -> anyhow::Result<()>` prints after `Error: `.
    fn report(error: Error) -> String {
        format!("{:?}", anyhow::Error::from(error))
    }

    /// The variant's name. No wildcard arm: a new variant does not compile until it is named
    /// here, and then [`a_report_prints_each_cause_once`] fails until it has a case.
    fn kind(error: &Error) -> &'static str {
        match error {
            Error::Config(_) => "Config",
            Error::Image { .. } => "Image",
            Error::Readback { .. } => "Readback",
            Error::InputEnded => "InputEnded",
            Error::File { .. } => "File",
            Error::Signals(_) => "Signals",
            Error::Io { .. } => "Io",
            Error::Checkpoint { .. } => "Checkpoint",
            Error::Diverged { .. } => "Diverged",
            Error::Data(_) => "Data",
            Error::Weights(_) => "Weights",
            Error::Towers(_) => "Towers",
        }
    }

    /// Every kind of error with a cause of its own, and its whole report: the message, then
    /// nothing (no "Caused by" repeating a cause the message already holds).
    fn every_kind() -> Vec<(Error, &'static str)> {
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
        let ckpt = "/ckpt/inception_v3.ckpt.index";
        vec![
            (
                Error::Config("batch_size: 0".into()),
                "configuration: batch_size: 0",
            ),
            (
                Error::Image {
                    path: "/photos/cat.jpg".into(),
                    reason: "not a JPEG or PNG".into(),
                },
                "image /photos/cat.jpg: not a JPEG or PNG",
            ),
            (
                Error::Readback {
                    what: "logits",
                    reason: "device lost".into(),
                },
                "reading logits from the device: device lost",
            ),
            (
                Error::InputEnded,
                "the training input ended: training input must repeat its epochs forever",
            ),
            (
                Error::File {
                    path: "/train/train_log.jsonl".into(),
                    reason: "line 3: expected value at line 1 column 1".into(),
                },
                "/train/train_log.jsonl: line 3: expected value at line 1 column 1",
            ),
            (
                Error::Signals("cannot install the signal handler: already set".into()),
                "cannot install the signal handler: already set",
            ),
            (
                Error::io("/ckpt/model.ckpt-5")(not_found()),
                "/ckpt/model.ckpt-5: entity not found",
            ),
            (
                Error::Checkpoint {
                    path: "/ckpt/model.ckpt-5".into(),
                    reason: "truncated".into(),
                },
                "checkpoint /ckpt/model.ckpt-5: truncated",
            ),
            (
                Error::Diverged {
                    step: 7,
                    loss: f64::NAN,
                    last_checkpoint: "none".into(),
                },
                "model diverged at step 7: loss = NaN; no checkpoint was written for it \
                 (the last good one is none)",
            ),
            (
                Error::from(reader),
                "input: thread 'reader-1': /data/train-00001: entity not found",
            ),
            (
                Error::from(WeightsError::Io {
                    path: ckpt.into(),
                    error: not_found(),
                }),
                "weights: /ckpt/inception_v3.ckpt.index: entity not found",
            ),
            (
                Error::from(WeightsError::Format {
                    path: ckpt.into(),
                    reason: "not a tensor bundle".into(),
                }),
                "weights: /ckpt/inception_v3.ckpt.index: not a tensor bundle",
            ),
            (
                Error::from(WeightsError::Tensor {
                    path: ckpt.into(),
                    tensor: "Conv2d_1a_3x3/weights".into(),
                    reason: "shape [3, 3] in the file".into(),
                }),
                "weights: /ckpt/inception_v3.ckpt.index: tensor `Conv2d_1a_3x3/weights`: \
                 shape [3, 3] in the file",
            ),
            (
                Error::from(spawn),
                "towers: cannot start the thread of tower 1 on `flex`: out of threads",
            ),
        ]
    }

    #[test]
    fn a_report_prints_each_cause_once() {
        for (error, want) in every_kind() {
            let printed = report(error);
            // A backtrace may follow when RUST_BACKTRACE is set; no "Caused by" may.
            assert!(printed.starts_with(want), "{printed}");
            assert!(!printed.contains("Caused by"), "{printed}");
        }
    }

    #[test]
    fn the_report_test_covers_every_kind() {
        let covered: std::collections::BTreeSet<_> =
            every_kind().iter().map(|(error, _)| kind(error)).collect();
        let all = [
            "Config",
            "Image",
            "Readback",
            "InputEnded",
            "File",
            "Signals",
            "Io",
            "Checkpoint",
            "Diverged",
            "Data",
            "Weights",
            "Towers",
        ];
        assert_eq!(covered, all.into_iter().collect());
    }
}
