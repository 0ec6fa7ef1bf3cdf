//! The crate's one error type: every variant names the device list entry or tower it concerns.
//! A cause that is an error value (Burn's, the OS's, the loss function's) is returned by
//! `Error::source` and kept out of the message, which says only what this layer adds: a report
//! that prints the chain prints each cause once, and a caller can downcast the cause.

use std::any::Any;
use std::fmt;

/// An error from parsing a device list, building the towers or running a step.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A device list entry that cannot be read.
    #[error("device list entry `{entry}`: {reason}")]
    DeviceList {
        /// The entry as written.
        entry: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A remote device list entry whose server id or address cannot be used: not an Iroh
    /// server id, a host name that does not resolve.
    #[error("device list entry `{entry}`: {what}")]
    RemoteAddress {
        /// The entry as written.
        entry: String,
        /// What could not be used (`` `HOST:PORT` does not resolve ``).
        what: String,
        /// The parser's or the resolver's error: the error's `source`.
        #[source]
        error: Cause,
    },
    /// The file of remote tokens could not be read.
    #[error("the token file {} (TOWERS_REMOTE_TOKEN_FILE)", path.display())]
    TokenFile {
        /// The file.
        path: std::path::PathBuf,
        /// What the OS said: the error's `source`.
        #[source]
        error: std::io::Error,
    },
    /// A device list entry names a backend this build does not include.
    #[error(
        "device `{entry}` needs the `{feature}` backend, which this build does not include: \
         rebuild with `--features {feature}`"
    )]
    BackendNotCompiled {
        /// The entry as written.
        entry: String,
        /// The cargo feature (of burn-towers and of towers-multigpu) that compiles it in.
        feature: &'static str,
    },
    /// A remote device list entry whose server could not be connected.
    #[error("device `{entry}`: cannot connect to the remote server {host}{advice}")]
    Remote {
        /// The entry as written.
        entry: String,
        /// The server's address, `ws://host:port`.
        host: String,
        /// What to try, when the likely cause is known (`" (no token was sent: ...)"`), or empty.
        advice: String,
        /// Burn's error (unreachable, no such device, another protocol version, a refused
        /// token, ...): the error's `source`.
        #[source]
        error: Cause,
    },
    /// The towers were configured in a way that cannot work.
    #[error("configuration: {0}")]
    Config(String),
    /// A batch could not be split across the towers as asked, or its weights are not
    /// positive.
    #[error("batch: {0}")]
    Batch(String),
    /// A tower's thread panicked (a shape error inside Burn, for instance); the step was dropped.
    #[error("tower {tower} on `{device}` panicked: {message}")]
    TowerPanicked {
        /// The tower's index in the device list.
        tower: usize,
        /// The tower's device, as named in the device list.
        device: String,
        /// The panic message, when it was a string.
        message: String,
    },
    /// A tower's loss function returned an error, or a loss that is not a mean, or Burn failed
    /// on the tower's device; the step was dropped.
    #[error("tower {tower} on `{device}` failed")]
    TowerFailed {
        /// The tower's index in the device list.
        tower: usize,
        /// The tower's device, as named in the device list.
        device: String,
        /// What went wrong, as the value it was (the loss function's own error, Burn's error
        /// wrapped in what the tower was doing, or a message): the error's `source`.
        #[source]
        error: Cause,
    },
    /// The operating system refused a tower thread.
    #[error("cannot start the thread of tower {tower} on `{device}`")]
    Spawn {
        /// The tower's index in the device list.
        tower: usize,
        /// The tower's device, as named in the device list.
        device: String,
        /// What the OS said: the error's `source`.
        #[source]
        error: std::io::Error,
    },
    /// The processes of a multi-process job (MPI ranks) disagree, or cannot be joined.
    #[error("across processes: {0}")]
    Processes(String),
    /// The exchange of gradients across processes failed on this rank (its thread could not
    /// start, a gradient could not be read from its device): the step was dropped.
    #[error("across processes: the exchange of gradients failed")]
    Exchange {
        /// What failed: the error's `source`.
        #[source]
        error: Cause,
    },
}

/// A cause under one of this crate's errors, kept as the value it was (Burn's, the OS's, a loss
/// function's): a caller finds it by `source()` and `downcast_ref`.
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

/// What was being done when `error` happened, kept apart from it (a report prints each once):
/// `reading the loss from the device`, then Burn's error. The crates above use it too.
#[derive(Debug, thiserror::Error)]
#[error("{doing}")]
pub struct While {
    doing: String,
    #[source]
    error: Cause,
}

impl While {
    /// `error` under `doing`, as a [`Cause`]: `.map_err(While::doing("reading ..."))`.
    pub fn doing<E: Into<Cause>>(doing: impl Into<String>) -> impl FnOnce(E) -> Cause {
        let doing = doing.into();
        move |error| {
            Box::new(While {
                doing,
                error: error.into(),
            })
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error and its causes on one line, `message: cause: cause`: what a log line or a message
/// built from an error should print (an error's own `Display` holds only its message).
pub struct ErrorChain<'a>(pub &'a (dyn std::error::Error + 'static));

impl fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = self.0.source();
        while let Some(error) = cause {
            write!(f, ": {error}")?;
            cause = error.source();
        }
        Ok(())
    }
}

/// The message a panic was raised with, when it was a string.
pub(crate) fn panic_message(panic: &(dyn Any + Send)) -> String {
    match (panic.downcast_ref::<String>(), panic.downcast_ref::<&str>()) {
        (Some(message), _) => message.clone(),
        (_, Some(message)) => message.to_string(),
        _ => "(a panic without a message)".to_string(),
    }
}
