//! The crate's one error type: each variant says what failed and where (file, step).
//!
//! A cause that is an error value (the OS's I/O error, Burn's read-back error, the input
//! pipeline's, the weights' or the towers' error, a train-log line's JSON error) is returned by
//! `Error::source` and kept out of the message, which says only what this layer adds (`input`,
//! `FILE`). A caller matches the kind by variant and the cause by `source()`
//! (`downcast_ref::<std::io::Error>()`); a report of the chain (`anyhow`'s, what the examples'
//! `main` prints, or `towers_data::ErrorChain`) prints each cause once.

use std::path::PathBuf;

use towers_multigpu::Cause;

/// An error from configuring, training, checkpointing or evaluating.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A configuration that cannot work.
    #[error("configuration: {0}")]
    Config(String),
    /// A config file that does not parse (TOML or JSON) or does not fit [`TrainConfig`].
    ///
    /// [`TrainConfig`]: crate::TrainConfig
    #[error("config file {}", path.display())]
    ConfigFile {
        /// The file.
        path: PathBuf,
        /// The parser's error: the error's `source`.
        #[source]
        error: Cause,
    },
    /// An image file that cannot be decoded (not of a known format, truncated, corrupt) or
    /// preprocessed.
    #[error("image {}", path.display())]
    Image {
        /// The image file.
        path: PathBuf,
        /// What is wrong with it (the decoder's error, the transform's): the error's `source`.
        #[source]
        error: Cause,
    },
    /// A tensor that could not be read back from its device (a backend failure).
    #[error("reading {what} from the device")]
    Readback {
        /// What was being read (`logits`, `probabilities`).
        what: &'static str,
        /// What Burn said: the error's `source`.
        #[source]
        error: burn::tensor::DataError,
    },
    /// A line of the train log that is not a log entry.
    #[error("{}: line {line}", path.display())]
    LogLine {
        /// The train log.
        path: PathBuf,
        /// The line (1-based).
        line: usize,
        /// What the JSON parser said: the error's `source`.
        #[source]
        error: serde_json::Error,
    },
    /// A file the run writes and reads back (the loss plot, an image list) that cannot be
    /// rendered or used.
    #[error("{}: {reason}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong, as far as this layer knows (`plotting`).
        reason: String,
        /// The error under it, when there is one (the plotting library's): the error's
        /// `source`.
        #[source]
        error: Option<Cause>,
    },
    /// The stop-signal handler (SIGINT, SIGTERM, SIGHUP) could not be installed.
    #[error("cannot install the stop-signal handler")]
    Signals(#[source] std::sync::Arc<ctrlc::Error>),
    /// The training input ended. Training input repeats its epochs forever, so one that ends
    /// is a source that cannot go on (a finite source given to training).
    #[error("the training input ended: training input must repeat its epochs forever")]
    InputEnded,
    /// A file or directory operation failed.
    #[error("{}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What the OS said: the error's `source`.
        #[source]
        error: std::io::Error,
    },
    /// A checkpoint that cannot be written or read back: not one, truncated, or for another
    /// model.
    #[error("checkpoint {}: {reason}", path.display())]
    Checkpoint {
        /// The checkpoint file.
        path: PathBuf,
        /// What is wrong with it, as far as this layer knows.
        reason: String,
        /// The error under it, when there is one (Burn's record error, the JSON parser's): the
        /// error's `source`.
        #[source]
        error: Option<Cause>,
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
    /// The input pipeline failed (a bad file, a reader panic): its error is the `source`.
    #[error("input")]
    Data(#[from] towers_data::Error),
    /// Weights that cannot be read, or do not fit the model: their error is the `source`.
    #[error("weights")]
    Weights(#[from] towers_models::weights::WeightsError),
    /// A tower failed, or the device list is wrong: the towers' error is the `source`.
    #[error("towers")]
    Towers(#[from] towers_multigpu::Error),
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

#[cfg(test)]
mod tests {
    use burn::tensor::TensorData;
    use towers_models::weights::WeightsError;

    use super::*;

    /// What `fn main() -> anyhow::Result<()>` prints after `Error: `: the message, then each
    /// cause under "Caused by".
    fn report(error: Error) -> String {
        format!("{:?}", anyhow::Error::from(error))
    }

    /// The variant's name. No wildcard arm: a new variant does not compile until it is named
    /// here, and then [`the_report_test_covers_every_kind`] fails until it has a case.
    fn kind(error: &Error) -> &'static str {
        match error {
            Error::Config(_) => "Config",
            Error::ConfigFile { .. } => "ConfigFile",
            Error::Image { .. } => "Image",
            Error::Readback { .. } => "Readback",
            Error::LogLine { .. } => "LogLine",
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

    fn not_found() -> std::io::Error {
        std::io::Error::from(std::io::ErrorKind::NotFound)
    }

    /// Burn's error for an i64 tensor read back as f32: a real `DataError`.
    fn dtype_mismatch() -> burn::tensor::DataError {
        TensorData::new(vec![1i64], [1])
            .try_to_vec::<f32>()
            .unwrap_err()
    }

    fn json_error() -> serde_json::Error {
        serde_json::from_str::<serde_json::Value>("{\"step\": 20, cut").unwrap_err()
    }

    /// Every kind of error, and the messages of its chain, outermost first: its own message,
    /// then each cause's.
    fn every_kind() -> Vec<(Error, Vec<String>)> {
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
        let chain = |layers: &[&str]| layers.iter().map(|l| l.to_string()).collect::<Vec<_>>();
        vec![
            (
                Error::Config("batch_size: 0".into()),
                chain(&["configuration: batch_size: 0"]),
            ),
            (
                Error::Image {
                    path: "/photos/cat.jpg".into(),
                    error: "not a JPEG or PNG".into(),
                },
                chain(&["image /photos/cat.jpg", "not a JPEG or PNG"]),
            ),
            (
                Error::Readback {
                    what: "logits",
                    error: dtype_mismatch(),
                },
                vec![
                    "reading logits from the device".into(),
                    dtype_mismatch().to_string(),
                ],
            ),
            (
                Error::LogLine {
                    path: "/train/train_log.jsonl".into(),
                    line: 3,
                    error: json_error(),
                },
                vec![
                    "/train/train_log.jsonl: line 3".into(),
                    json_error().to_string(),
                ],
            ),
            (
                Error::InputEnded,
                chain(&["the training input ended: training input must repeat its epochs forever"]),
            ),
            (
                Error::ConfigFile {
                    path: "/train/run.json".into(),
                    error: json_error().into(),
                },
                vec![
                    "config file /train/run.json".into(),
                    json_error().to_string(),
                ],
            ),
            (
                Error::File {
                    path: "/train/loss.svg".into(),
                    reason: "plotting".into(),
                    error: Some(not_found().into()),
                },
                chain(&["/train/loss.svg: plotting", "entity not found"]),
            ),
            (
                Error::Signals(std::sync::Arc::new(ctrlc::Error::MultipleHandlers)),
                vec![
                    "cannot install the stop-signal handler".into(),
                    ctrlc::Error::MultipleHandlers.to_string(),
                ],
            ),
            (
                Error::io("/ckpt/model.ckpt-5")(not_found()),
                chain(&["/ckpt/model.ckpt-5", "entity not found"]),
            ),
            (
                Error::Checkpoint {
                    path: "/ckpt/model.ckpt-5".into(),
                    reason: "truncated".into(),
                    error: None,
                },
                chain(&["checkpoint /ckpt/model.ckpt-5: truncated"]),
            ),
            (
                Error::Diverged {
                    step: 7,
                    loss: f64::NAN,
                    last_checkpoint: "none".into(),
                },
                chain(&[
                    "model diverged at step 7: loss = NaN; no checkpoint was written for it \
                         (the last good one is none)",
                ]),
            ),
            (
                Error::from(reader),
                chain(&[
                    "input",
                    "thread 'reader-1'",
                    "/data/train-00001",
                    "entity not found",
                ]),
            ),
            (
                Error::from(WeightsError::Io {
                    path: ckpt.into(),
                    error: not_found(),
                }),
                chain(&["weights", "/ckpt/inception_v3.ckpt.index: entity not found"]),
            ),
            (
                Error::from(WeightsError::Format {
                    path: ckpt.into(),
                    reason: "not a tensor bundle".into(),
                    error: None,
                }),
                chain(&[
                    "weights",
                    "/ckpt/inception_v3.ckpt.index: not a tensor bundle",
                ]),
            ),
            (
                Error::from(WeightsError::Tensor {
                    path: ckpt.into(),
                    tensor: "Conv2d_1a_3x3/weights".into(),
                    reason: "shape [3, 3] in the file".into(),
                    error: None,
                }),
                chain(&[
                    "weights",
                    "/ckpt/inception_v3.ckpt.index: tensor `Conv2d_1a_3x3/weights`: \
                     shape [3, 3] in the file",
                ]),
            ),
            (
                Error::from(spawn),
                chain(&[
                    "towers",
                    "cannot start the thread of tower 1 on `flex`",
                    "out of threads",
                ]),
            ),
        ]
    }

    /// Each error's chain of `source()`s holds exactly the expected messages, in order, and the
    /// report `main` prints is those messages, one a line: no message repeats a cause that
    /// `source()` also returns, so each cause is printed once.
    #[test]
    fn a_report_prints_each_cause_once() {
        for (error, layers) in every_kind() {
            let mut chain = vec![error.to_string()];
            let mut cause = std::error::Error::source(&error);
            while let Some(e) = cause {
                chain.push(e.to_string());
                cause = e.source();
            }
            assert_eq!(chain, layers);
            let printed = report(error);
            // anyhow prints the message, then under "Caused by:" one cause a line ("    0: ").
            let lines: Vec<&str> = printed
                .lines()
                .take_while(|line| !line.starts_with("Stack backtrace"))
                .filter(|line| !line.is_empty() && *line != "Caused by:")
                .map(|line| {
                    let line = line.trim_start();
                    line.split_once(": ")
                        .filter(|(n, _)| n.parse::<usize>().is_ok())
                        .map_or(line, |(_, cause)| cause)
                })
                .collect();
            assert_eq!(lines, layers, "{printed}");
        }
    }

    /// The cause is a value a caller can match: the OS's error kind through two wrappers, Burn's
    /// error, the pipeline's variant.
    #[test]
    fn the_causes_are_values_reachable_by_source() {
        let io = Error::io("/ckpt/model.ckpt-5")(not_found());
        let os = std::error::Error::source(&io).and_then(|e| e.downcast_ref::<std::io::Error>());
        assert_eq!(
            os.map(std::io::Error::kind),
            Some(std::io::ErrorKind::NotFound)
        );

        let readback = Error::Readback {
            what: "logits",
            error: dtype_mismatch(),
        };
        let burn = std::error::Error::source(&readback)
            .and_then(|e| e.downcast_ref::<burn::tensor::DataError>());
        assert!(
            matches!(burn, Some(burn::tensor::DataError::DTypeMismatch { .. })),
            "{readback:?}"
        );

        let input = Error::from(towers_data::Error::Thread {
            thread: "reader-1".into(),
            error: Box::new(towers_data::Error::Io {
                path: "/data/a".into(),
                error: not_found(),
            }),
        });
        let data = std::error::Error::source(&input)
            .and_then(|e| e.downcast_ref::<towers_data::Error>())
            .expect("the pipeline's error");
        assert!(
            matches!(data.root(), towers_data::Error::Io { .. }),
            "{data:?}"
        );
        let os =
            std::error::Error::source(data.root()).and_then(|e| e.downcast_ref::<std::io::Error>());
        assert_eq!(
            os.map(std::io::Error::kind),
            Some(std::io::ErrorKind::NotFound)
        );
    }

    #[test]
    fn the_report_test_covers_every_kind() {
        let covered: std::collections::BTreeSet<_> =
            every_kind().iter().map(|(error, _)| kind(error)).collect();
        let all = [
            "Config",
            "ConfigFile",
            "Image",
            "Readback",
            "LogLine",
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
