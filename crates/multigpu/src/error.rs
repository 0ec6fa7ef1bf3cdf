//! The crate's one error type: every variant names the device list entry or tower it concerns.
//! Messages embed their causes, so no variant also returns one from `Error::source` (a
//! printed chain would repeat it).

/// An error from parsing a device list, building the towers or running a step.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A device list entry that cannot be read.
    #[error("device list entry `{entry}`: {reason}")]
    DeviceList {
        /// The entry as written.
        entry: String,
        /// What is wrong with it.
        reason: String,
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
    #[error("device `{entry}`: cannot connect to the remote server {host}: {reason}")]
    Remote {
        /// The entry as written.
        entry: String,
        /// The server's address, `ws://host:port`.
        host: String,
        /// Burn's reason (unreachable, no such device, another protocol version, ...).
        reason: String,
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
    /// A tower's loss function returned an error, or a loss that is not a mean; the step was
    /// dropped.
    #[error("tower {tower} on `{device}` failed: {message}")]
    TowerFailed {
        /// The tower's index in the device list.
        tower: usize,
        /// The tower's device, as named in the device list.
        device: String,
        /// What went wrong.
        message: String,
    },
    /// The operating system refused a tower thread.
    #[error("cannot start the thread of tower {tower} on `{device}`: {error}")]
    Spawn {
        /// The tower's index in the device list.
        tower: usize,
        /// The tower's device, as named in the device list.
        device: String,
        /// What the OS said.
        error: std::io::Error,
    },
    /// The processes of a multi-process job (MPI ranks) disagree, or cannot be joined.
    #[error("across processes: {0}")]
    Processes(String),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
